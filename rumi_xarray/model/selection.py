"""Selections: what an xarray indexing key asks of a cube, as sorted distinct positions.

Pure: translating OUTER keys (ints, slices with any step, integer arrays) into
the distinct time steps, bands, rows and columns to read, plus the numpy
takes that restore the key's order and repeats afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rumi_xarray.model.planning import Request


@dataclass(frozen=True)
class Selection:
    """Sorted, distinct positions to read along each cube axis."""

    times: tuple[int, ...]
    bands: tuple[int, ...]
    ys: np.ndarray
    xs: np.ndarray

    def bounding(self) -> Request:
        """Return the request for the bounding window of the selection."""
        y0, x0 = int(self.ys[0]), int(self.xs[0])
        return Request(times=self.times, bands=self.bands, row=y0, col=x0,
                       height=int(self.ys[-1]) - y0 + 1, width=int(self.xs[-1]) - x0 + 1)

    @property
    def dense(self) -> bool:
        """Return whether rows and columns are each one contiguous run (a window)."""
        return _contiguous(self.ys) and _contiguous(self.xs)


def _contiguous(values: np.ndarray) -> bool:
    return bool(values.size) and int(values[-1]) - int(values[0]) + 1 == values.size


def selection(shape: tuple[int, int, int, int], key: tuple[Any, Any, Any, Any]
              ) -> tuple[Selection | None, list[np.ndarray], list[bool]]:
    """Translate an OUTER key into sorted distinct positions plus numpy takes.

    Parameters
    ----------
    shape : tuple
        ``(time, band, y, x)`` of the cube.
    key : tuple
        int, slice or integer array per axis.

    Returns
    -------
    sel : Selection or None
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
    sel = Selection(times=tuple(distinct[0].tolist()), bands=tuple(distinct[1].tolist()),
                         ys=distinct[2], xs=distinct[3])
    return sel, takes, drop
