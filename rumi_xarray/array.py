"""Lazily indexed array over a cube: one planned native read per access."""

from __future__ import annotations

from typing import Any

import numpy as np
from xarray.backends import BackendArray
from xarray.core import indexing

from rumi_xarray import lazy
from rumi_xarray.cube import Cube


class RumiBackendArray(BackendArray):
    """Lazily indexed view of a cube (or of one of its bands).

    Supports xarray's OUTER indexing: integers, slices with any step and
    integer arrays on every dimension, negative indices included. Each access
    is one planned read (:mod:`rumi_xarray.lazy`): the selected time steps and
    bands, and either the tile cells the y/x selection touches (through the
    tile cache) or its bounding window; steps and fancy indices are then taken
    in numpy. The array holds only picklable descriptions (paths, headers), so
    it is thread-safe and travels to dask workers.

    Parameters
    ----------
    cube : Cube
    has_time : bool
        Whether ``time`` is a dimension (else the single step is squeezed).
    band : int, optional
        Expose only this band (``band_as_variable=True``); ``band`` is then
        not a dimension.
    """

    def __init__(self, cube: Cube, has_time: bool, band: int | None = None) -> None:
        self.cube = cube
        self.has_time = has_time
        self.band = band
        t, b, y, x = cube.shape
        shape: tuple[int, ...] = (y, x)
        if band is None:
            shape = (b, *shape)
        if has_time:
            shape = (t, *shape)
        self.shape = shape
        self.dtype = cube.grid.dtype

    @property
    def dims(self) -> tuple[str, ...]:
        """Return the dimension names, matching :attr:`shape`."""
        dims: tuple[str, ...] = ("y", "x")
        if self.band is None:
            dims = ("band", *dims)
        if self.has_time:
            dims = ("time", *dims)
        return dims

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
        parts = list(key)
        t = parts.pop(0) if self.has_time else 0
        b = parts.pop(0) if self.band is None else self.band
        return (t, b, parts[0], parts[1])

    def _getitem(self, key: tuple[Any, ...]) -> np.ndarray:
        full = self.full_key(key)
        try:
            sel, takes, drop = selection(self.cube.shape, full)
        except IndexError as exc:
            raise IndexError(f"{self.cube.name}: selection {key!r} is out of range for "
                             f"shape {self.shape} {self.dims}: {exc}") from exc
        if sel is None:
            data = np.empty(tuple(len(t) for t in takes), dtype=self.dtype)
        else:
            data = lazy.read(self.cube, sel)
            for axis, take in enumerate(takes):
                if take is not None:
                    data = np.take(data, take, axis=axis)
        squeeze = tuple(axis for axis in range(4) if drop[axis])
        return data.squeeze(axis=squeeze) if squeeze else data


def selection(shape: tuple[int, int, int, int], key: tuple[Any, Any, Any, Any]
              ) -> tuple[lazy.Selection | None, list[np.ndarray], list[bool]]:
    """Translate an OUTER key into sorted distinct positions plus numpy takes.

    Parameters
    ----------
    shape : tuple
        ``(time, band, y, x)`` of the cube.
    key : tuple
        int, slice or integer array per axis.

    Returns
    -------
    sel : lazy.Selection or None
        ``None`` when the selection is empty.
    takes : list
        Per axis, positions to take from what was read to restore the key's
        order and repeats (``None``: as read); for an empty selection, the
        positions per axis.
    drop : list of bool
        Axes indexed by an integer, to squeeze.
    """
    positions = []
    drop = []
    for size, k in zip(shape, key, strict=True):
        if isinstance(k, (int, np.integer)):
            k = int(k)
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for size {size}")
            positions.append(np.array([k % size], dtype=np.int64))
            drop.append(True)
        elif isinstance(k, slice):
            positions.append(np.arange(size, dtype=np.int64)[k])
            drop.append(False)
        else:
            arr = np.asarray(k)
            if arr.dtype.kind not in "iu":
                raise IndexError(f"expected integer indices, got {arr.dtype}")
            arr = arr.astype(np.int64).ravel()
            if arr.size and (arr.min() < -size or arr.max() >= size):
                raise IndexError(f"indices {arr.min()}..{arr.max()} out of bounds "
                                 f"for size {size}")
            positions.append(arr % size if arr.size else arr)
            drop.append(False)
    if any(p.size == 0 for p in positions):
        return None, positions, drop
    # Read each distinct position once, in order; reorder/repeat afterwards.
    distinct, takes = [], []
    for p in positions:
        unique, inverse = np.unique(p, return_inverse=True)
        distinct.append(unique)
        takes.append(None if np.array_equal(unique, p) else inverse)
    sel = lazy.Selection(times=tuple(distinct[0].tolist()), bands=tuple(distinct[1].tolist()),
                         ys=distinct[2], xs=distinct[3])
    return sel, takes, drop
