"""Lazily indexed array over a cube: one planned native read per access."""

from __future__ import annotations

from typing import Any

import numpy as np
from xarray.backends import BackendArray
from xarray.core import indexing

from rumi_xarray import reads
from rumi_xarray.cube import Cube


class RumiBackendArray(BackendArray):
    """Lazily indexed view of a cube (or of one of its bands).

    Supports xarray's OUTER indexing: integers, slices with any step and
    integer arrays on every dimension, negative indices included. Each access
    is one planned read: the selected time steps and bands, and the bounding
    window of the y/x selection; steps and fancy indices are then taken in
    numpy. The array holds only picklable descriptions (paths, headers), so
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
            request, takes, drop = selection(self.cube.shape, full)
        except IndexError as exc:
            raise IndexError(f"{self.cube.name}: selection {key!r} is out of range for "
                             f"shape {self.shape} {self.dims}: {exc}") from exc
        if request is None:
            data = np.empty(tuple(len(t) if isinstance(t, np.ndarray) else 0
                                  for t in takes), dtype=self.dtype)
        else:
            data = reads.read_request(self.cube, request)
            for axis, take in enumerate(takes):
                if take is not None:
                    data = np.take(data, take, axis=axis)
        squeeze = tuple(axis for axis in range(4) if drop[axis])
        return data.squeeze(axis=squeeze) if squeeze else data


def selection(shape: tuple[int, int, int, int], key: tuple[Any, Any, Any, Any]
              ) -> tuple[reads.Request | None, list[np.ndarray | None], list[bool]]:
    """Translate an OUTER key into one read request plus numpy takes.

    Parameters
    ----------
    shape : tuple
        ``(time, band, y, x)`` of the cube.
    key : tuple
        int, slice or integer array per axis.

    Returns
    -------
    request : Request or None
        ``None`` when the selection is empty.
    takes : list
        Per axis, positions to take from the read block (``None``: as read).
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
        return None, [np.empty(0, np.int64) if p.size == 0 else p for p in positions], drop
    takes: list[np.ndarray | None] = []
    # Time and band: read the distinct steps once, then reorder/repeat.
    listed = []
    for p in positions[:2]:
        unique, inverse = np.unique(p, return_inverse=True)
        listed.append(tuple(unique.tolist()))
        takes.append(None if np.array_equal(unique, p) else inverse)
    # y and x: read the bounding window, then subsample.
    window = []
    for p in positions[2:]:
        lo, hi = int(p.min()), int(p.max()) + 1
        window.append((lo, hi - lo))
        rel = p - lo
        takes.append(None if np.array_equal(rel, np.arange(hi - lo)) else rel)
    request = reads.Request(times=listed[0], bands=listed[1], row=window[0][0],
                            col=window[1][0], height=window[0][1], width=window[1][1])
    return request, takes, drop
