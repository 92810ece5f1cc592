"""xarray chunk manager that routes Rumi variables to grouped reads.

``xr.open_dataset(path, engine="rumi", chunks={}, chunked_array_type="rumi")``
is the one call that switches xarray's standard chunking path to grouped
reads. Everything else (operations, compute, rechunk) is plain dask: this
manager only changes how Rumi-backed variables become dask arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xarray.namedarray.daskmanager import DaskManager

from rumi_xarray import dataset, graph


class RumiChunkManager(DaskManager):
    """dask chunk manager whose ``from_array`` builds grouped Rumi reads."""

    def is_chunked_array(self, data: Any) -> bool:
        """Return False: dask's own manager handles every existing dask array.

        xarray refuses arrays recognised by two managers, so this one claims
        none; it only acts when asked by name to create arrays.
        """
        return False

    def from_array(self, data: Any, chunks: Any, **kwargs: Any) -> Any:
        """Return a grouped-read dask array for Rumi data, dask's otherwise."""
        backend_array = dataset.unindexed(data)
        if backend_array is None:
            return super().from_array(data, chunks, **kwargs)
        return graph.grouped_array(backend_array, _as_tuple(chunks, backend_array.shape),
                                   name=kwargs.get("name"))


def _as_tuple(chunks: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(chunks, tuple) and len(chunks) == len(shape):
        return tuple(c if c is not None else -1 for c in chunks)
    return chunks if chunks is not None else tuple(np.asarray(shape).tolist())
