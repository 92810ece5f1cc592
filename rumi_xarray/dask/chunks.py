"""Chunk a Dataset the way ``xr.open_dataset(..., chunks=...)`` does, from preferred chunks.

``xr.open_dataset`` turns ``chunks`` into dask chunks through each variable's
``encoding["preferred_chunks"]`` (the read groups); ``Dataset.chunk`` does
not look at them. Cubes rumi_xarray builds itself (catalogs, STAC) are chunked
here with the same rules, so ``chunks={}`` means one read group per chunk on
every path.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import xarray as xr
from dask.array.core import normalize_chunks


def open_chunks(ds: xr.Dataset, chunks: Any) -> dict[Hashable, tuple[int, ...]]:
    """Return the chunks ``xr.open_dataset`` would give ``ds``'s data variables.

    Parameters
    ----------
    ds : xarray.Dataset
        Lazily indexed, with ``preferred_chunks`` in its variables' encoding.
    chunks : dict, int, str or tuple
        As for :func:`xarray.open_dataset`: ``{}`` the preferred chunks,
        ``"auto"`` multiples of them, ints or a mapping per dimension.

    Returns
    -------
    dict
        Normalized chunks per dimension.
    """
    out: dict[Hashable, tuple[int, ...]] = {}
    for var in ds.data_vars.values():
        preferred: Mapping[Hashable, Any] = var.encoding.get("preferred_chunks", {})
        dims = var.dims
        wanted = dict.fromkeys(dims, chunks) if not isinstance(chunks, Mapping) else chunks
        shape = tuple(wanted.get(d) or preferred.get(d, n)
                      for d, n in zip(dims, var.shape, strict=True))
        previous = tuple(preferred.get(d, n) for d, n in zip(dims, var.shape, strict=True))
        normalized = normalize_chunks(shape, var.shape, dtype=var.dtype,
                                      previous_chunks=previous)
        for dim, blocks in zip(dims, normalized, strict=True):
            out.setdefault(dim, tuple(int(b) for b in blocks))
    return out


def chunk_like_open_dataset(ds: xr.Dataset, chunks: Any) -> xr.Dataset:
    """Return ``ds`` chunked as ``xr.open_dataset(..., chunks=chunks)`` would chunk it.

    Parameters
    ----------
    ds : xarray.Dataset
    chunks : dict, int, str or tuple

    Returns
    -------
    xarray.Dataset
    """
    return ds.chunk(open_chunks(ds, chunks))
