"""The lazily indexed backend array over a cube: one planned native read per access."""

from __future__ import annotations

from typing import Any

import numpy as np
from xarray.backends import BackendArray
from xarray.core import indexing

from rumi_xarray.backend import lazy
from rumi_xarray.errors import RumiSelectionError
from rumi_xarray.model.cube import Cube
from rumi_xarray.model.planning import Call
from rumi_xarray.model.selection import Selection, selection


class RumiBackendArray(BackendArray):
    """Lazily indexed view of a cube ``(time, band, y, x)``, or of one of its bands.

    Supports xarray's OUTER indexing: integers, slices with any step and
    integer arrays on every dimension, negative indices included. Each access
    is one planned read (:mod:`rumi_xarray.backend.lazy`): a window is one
    native call straight into the result; scattered rows and columns read
    only the tile cells they touch. The array holds only picklable
    descriptions (paths, headers), so it is thread-safe and travels to dask
    workers: when xarray chunks a variable, every dask chunk is one call to
    this array.

    Parameters
    ----------
    cube : Cube
    band : int, optional
        Expose only this band (``band_as_variable=True``); ``band`` is then
        not a dimension.
    """

    def __init__(self, cube: Cube, band: int | None = None) -> None:
        self.cube = cube
        self.band = band
        t, b, y, x = cube.shape
        self.shape: tuple[int, ...] = (t, y, x) if band is not None else (t, b, y, x)
        self.dtype = cube.grid.dtype

    @property
    def dims(self) -> tuple[str, ...]:
        """Return the dimension names, matching :attr:`shape`."""
        return ("time", "y", "x") if self.band is not None else ("time", "band", "y", "x")

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        if isinstance(key, indexing.BasicIndexer | indexing.OuterIndexer):
            # Our reads take any OUTER key (negative steps included) directly;
            # xarray's decomposition is only needed for vectorized keys.
            return self._getitem(key.tuple)
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._getitem)

    def full_key(self, key: tuple[Any, ...]) -> tuple[Any, Any, Any, Any]:
        """Return the ``(time, band, y, x)`` key for a key over :attr:`dims`.

        Parameters
        ----------
        key : tuple
            One int, slice or integer array per dimension.

        Returns
        -------
        tuple
        """
        if self.band is None:
            return (key[0], key[1], key[2], key[3])
        return (key[0], self.band, key[1], key[2])

    def selection(self, key: tuple[Any, ...]) -> tuple[Selection | None, list[Any], list[bool]]:
        """Return what an OUTER key over :attr:`dims` reads (see :func:`selection`).

        Parameters
        ----------
        key : tuple

        Returns
        -------
        tuple
        """
        try:
            return selection(self.cube.shape, self.full_key(key))
        except IndexError as exc:
            raise RumiSelectionError(
                f"{self.cube.name}: selection {key!r} is out of range for shape "
                f"{self.shape} {self.dims}: {exc}") from exc

    def planned_calls(self, key: indexing.ExplicitIndexer | None = None) -> list[Call]:
        """Return the native calls ``self[key]`` would make now (``explain()``).

        Parameters
        ----------
        key : ExplicitIndexer, optional
            ``None`` reads the whole array.

        Returns
        -------
        list of Call
        """
        if key is None:
            outer: tuple[Any, ...] = (slice(None),) * len(self.shape)
        elif isinstance(key, indexing.BasicIndexer | indexing.OuterIndexer):
            outer = key.tuple
        else:
            backend_key, _ = indexing.decompose_indexer(key, self.shape,
                                                        indexing.IndexingSupport.OUTER)
            outer = backend_key.tuple
        sel, _, _ = self.selection(outer)
        return [] if sel is None else lazy.calls(self.cube, sel)

    def _getitem(self, key: tuple[Any, ...]) -> np.ndarray:
        sel, takes, drop = self.selection(key)
        if sel is None:
            data = np.empty(tuple(len(t) for t in takes), dtype=self.dtype)
        else:
            data = lazy.read(self.cube, sel)
            for axis, take in enumerate(takes):
                if take is not None:
                    data = np.take(data, take, axis=axis)
        squeeze = tuple(axis for axis in range(4) if drop[axis])
        return data.squeeze(axis=squeeze) if squeeze else data
