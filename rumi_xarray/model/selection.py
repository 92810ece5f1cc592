"""Selections: what an xarray indexing key asks of a cube.

Pure: no I/O. Two kinds of key reach the backend array:

- OUTER keys (ints, slices with any step, integer arrays: one independent
  selection per axis) become a :class:`Selection`: the time steps and bands
  to read and the rows and columns of the output, in the key's order;
- VECTORIZED keys (integer arrays broadcast against each other: pointwise
  selection such as ``isel(y=DataArray, x=DataArray)``) become
  :class:`Points`: one ``(y, x)`` pair per point (with its own time step or
  band when the key ties them to the points) plus time steps and bands
  selected independently of the points, and how the gathered values are laid
  out in the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rumi_xarray.model.planning import Request


@dataclass(frozen=True, eq=False)
class Selection:
    """An OUTER selection of a cube ``(time, band, y, x)``.

    Attributes
    ----------
    times, bands : tuple of int
        Distinct positions to read, in the key's order.
    ys, xs : numpy.ndarray
        Rows and columns of the output, in the key's order (repeats allowed).
    t_take, b_take : numpy.ndarray or None
        Positions in ``times``/``bands`` that restore the key's repeats
        (``None``: the key has none).
    """

    times: tuple[int, ...]
    bands: tuple[int, ...]
    ys: np.ndarray
    xs: np.ndarray
    t_take: np.ndarray | None = None
    b_take: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """Return the shape of what is read: ``(times, bands, ys, xs)``."""
        return (len(self.times), len(self.bands), int(self.ys.size), int(self.xs.size))

    @property
    def y_run(self) -> tuple[int, int, bool] | None:
        """Return ``(first row, height, reversed)`` when the rows are a window."""
        return _run(self.ys)

    @property
    def x_run(self) -> tuple[int, int, bool] | None:
        """Return ``(first column, width, reversed)`` when the columns are a window."""
        return _run(self.xs)

    @property
    def dense(self) -> bool:
        """Return whether rows and columns are each one run of neighbours (a window)."""
        return self.y_run is not None and self.x_run is not None

    def window(self) -> Request:
        """Return the request of the window a dense selection reads.

        Returns
        -------
        Request
            The time steps and bands in the selection's order and the window
            in increasing rows and columns (reversed runs are flipped after
            the read).
        """
        y, x = self.y_run, self.x_run
        if y is None or x is None:
            raise ValueError("window() of a selection that is not a window")
        return Request(times=self.times, bands=self.bands, row=y[0], col=x[0],
                       height=y[1], width=x[1])


def _run(values: np.ndarray) -> tuple[int, int, bool] | None:
    """Return ``(first, length, reversed)`` when ``values`` step by exactly +1 or -1."""
    n = int(values.size)
    if n == 0:
        return None
    first, last = int(values[0]), int(values[-1])
    if n == 1:
        return first, 1, False
    if last - first == n - 1 and bool(np.all(np.diff(values) == 1)):
        return first, n, False
    if first - last == n - 1 and bool(np.all(np.diff(values) == -1)):
        return last, n, True
    return None


def _positions(size: int, k: Any) -> tuple[np.ndarray, bool]:
    """Return the positions an OUTER key element selects and whether it drops the axis."""
    if isinstance(k, (int, np.integer)):
        k = int(k)
        if not -size <= k < size:
            raise IndexError(f"index {k} is out of bounds for size {size}")
        return np.array([k % size], dtype=np.int64), True
    if isinstance(k, slice):
        return np.arange(size, dtype=np.int64)[k], False
    return _checked(np.asarray(k), size).ravel(), False


def _checked(arr: np.ndarray, size: int) -> np.ndarray:
    """Return integer positions made non-negative, after checking their bounds."""
    if arr.dtype.kind not in "iu":
        raise IndexError(f"expected integer indices, got {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (int(arr.min()) < -size or int(arr.max()) >= size):
        raise IndexError(f"indices {int(arr.min())}..{int(arr.max())} out of bounds "
                         f"for size {size}")
    return np.where(arr < 0, arr + size, arr) if arr.size and int(arr.min()) < 0 else arr


def _distinct(values: np.ndarray) -> tuple[tuple[int, ...], np.ndarray | None]:
    """Return the distinct values in order of first appearance, and the take restoring repeats."""
    unique, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    if unique.size == values.size:
        return tuple(values.tolist()), None
    order = np.argsort(first, kind="stable")  # distinct values by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return tuple(unique[order].tolist()), rank[inverse.ravel()]


def selection(shape: tuple[int, int, int, int], key: tuple[Any, Any, Any, Any]
              ) -> tuple[Selection | None, tuple[int, ...], list[bool]]:
    """Translate an OUTER key into a :class:`Selection`.

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
    out_shape : tuple of int
        Shape of the result before integer-indexed axes are dropped.
    drop : list of bool
        Axes indexed by an integer, to squeeze.

    Raises
    ------
    IndexError
        A position is out of bounds or not an integer.
    """
    positions, drop = [], []
    for size, k in zip(shape, key, strict=True):
        pos, dropped = _positions(size, k)
        positions.append(pos)
        drop.append(dropped)
    out_shape = tuple(int(p.size) for p in positions)
    if any(n == 0 for n in out_shape):
        return None, out_shape, drop
    times, t_take = _distinct(positions[0])
    bands, b_take = _distinct(positions[1])
    sel = Selection(times=times, bands=bands, ys=positions[2], xs=positions[3],
                    t_take=t_take, b_take=b_take)
    return sel, out_shape, drop


@dataclass(frozen=True, eq=False)
class Points:
    """A pointwise (VECTORIZED) selection of a cube ``(time, band, y, x)``.

    Values are gathered into a block ``(n_times, n_bands, n_points)`` and
    laid out in the result with :meth:`arrange`.

    Attributes
    ----------
    ys, xs : numpy.ndarray
        Row and column of every point (repeats allowed).
    times : tuple of int or None
        Cube time steps selected for every point (key order, repeats
        allowed); ``None`` when each point has its own (``point_times``).
    bands : tuple of int or None
        Likewise for bands (``point_bands``).
    point_times, point_bands : numpy.ndarray or None
        The time step / band of each point, when the key ties them to points.
    out_shape : tuple of int
        Shape of the result.
    block_shape : tuple of int
        The gathered block reshaped so that each result axis is its own axis.
    order : tuple of int
        Result axis of every axis of ``block_shape``.
    """

    ys: np.ndarray
    xs: np.ndarray
    times: tuple[int, ...] | None
    bands: tuple[int, ...] | None
    point_times: np.ndarray | None
    point_bands: np.ndarray | None
    out_shape: tuple[int, ...]
    block_shape: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def gathered_shape(self) -> tuple[int, int, int]:
        """Return the shape of the gathered block ``(times, bands, points)``."""
        return (1 if self.times is None else len(self.times),
                1 if self.bands is None else len(self.bands), int(self.ys.size))

    def arrange(self, gathered: np.ndarray) -> np.ndarray:
        """Lay the gathered block out as the key's result (a view, no copy).

        Parameters
        ----------
        gathered : numpy.ndarray
            ``(times, bands, points)`` as :attr:`gathered_shape`.

        Returns
        -------
        numpy.ndarray
            Shaped :attr:`out_shape`.
        """
        out = gathered.reshape(self.block_shape).transpose(np.argsort(self.order))
        if out.shape != self.out_shape:
            # Result axes along which no key varies (every point the same pixel):
            # the one value repeats.
            out = np.ascontiguousarray(np.broadcast_to(out, self.out_shape))
        return out


def _vectorized_arrays(shape: tuple[int, ...], key: tuple[Any, ...]) -> list[np.ndarray]:
    """Return one integer array per axis, all with the result's number of dimensions.

    xarray's convention for a vectorized key: integer arrays broadcast
    against each other and their dimensions come first; every slice adds its
    own dimension after them, in order. Integers select without adding one.
    """
    arrays = [np.asarray(k) for k in key if not isinstance(k, slice | int | np.integer)]
    n = max((a.ndim for a in arrays), default=0)
    n_slices = sum(isinstance(k, slice) for k in key)
    out, i = [], 0
    for size, k in zip(shape, key, strict=True):
        if isinstance(k, slice):
            r = np.arange(*k.indices(size), dtype=np.int64)
            out.append(r.reshape((1,) * (n + i) + (-1,) + (1,) * (n_slices - i - 1)))
            i += 1
        elif isinstance(k, (int, np.integer)):
            out.append(_checked(np.asarray(int(k)), size).reshape(()))
        else:
            a = _checked(np.asarray(k), size)
            out.append(a.reshape((1,) * (n - a.ndim) + a.shape + (1,) * n_slices))
    ndim = max(a.ndim for a in out)
    return [a.reshape((1,) * (ndim - a.ndim) + a.shape) for a in out]


def _varying(a: np.ndarray) -> set[int]:
    """Return the axes along which the values of ``a`` change.

    Examples
    --------
    >>> t = np.broadcast_to(np.arange(3)[:, None], (3, 4))
    >>> sorted(_varying(np.ascontiguousarray(t))), sorted(_varying(np.zeros((2, 5))))
    ([0], [])
    """
    out = set()
    for j, n in enumerate(a.shape):
        if n > 1 and bool((a != a.take([0], axis=j)).any()):
            out.add(j)
    return out


def points(shape: tuple[int, int, int, int], key: tuple[Any, Any, Any, Any]
           ) -> tuple[Points | None, tuple[int, ...]]:
    """Translate a VECTORIZED key over ``(time, band, y, x)`` into :class:`Points`.

    Axes whose key varies along result dimensions that no spatial key varies
    along (typically time and band in a pixel series) stay independent of
    the points, so each touched tile cell is read once for all of them; keys
    tied to the points (a time step per point) travel with each point.

    Parameters
    ----------
    shape : tuple
        ``(time, band, y, x)`` of the cube.
    key : tuple
        Per axis an integer array, an integer or a slice (xarray's
        ``VectorizedIndexer`` convention).

    Returns
    -------
    pts : Points or None
        ``None`` when the result is empty.
    out_shape : tuple of int

    Raises
    ------
    IndexError
        A position is out of bounds, not an integer, or the arrays do not
        broadcast.
    """
    arrays = _vectorized_arrays(shape, key)
    try:
        out_shape = tuple(int(n) for n in np.broadcast_shapes(*(a.shape for a in arrays)))
    except ValueError as exc:
        raise IndexError(f"indexing arrays do not broadcast together: {exc}") from exc
    if any(n == 0 for n in out_shape):
        return None, out_shape
    # The result axes each key varies along, by value: xarray hands a pixel series'
    # time and band keys broadcast to the points' shape, so by shape alone every key
    # would vary along the points and each point would read its own planes.
    axes = [_varying(a) for a in arrays]
    # Which of (time, band, y, x) travel with the points: y and x always;
    # time and band when they vary along a dimension the points vary along
    # (or along one another's, a list of planes: then per point as well).
    spatial = {2, 3}
    spatial_axes = axes[2] | axes[3]
    changed = True
    while changed:
        changed = False
        for d in (0, 1):
            if d not in spatial and (axes[d] & spatial_axes
                                     or (axes[d] & axes[1 - d] and axes[d])):
                spatial.add(d)
                spatial_axes |= axes[d]
                changed = True
    p_axes = sorted(spatial_axes)
    p_shape = tuple(out_shape[j] for j in p_axes)

    def along(a: np.ndarray, keep: list[int]) -> np.ndarray:
        # The key along the axes kept; it is constant along the others.
        return a[tuple(slice(None) if j in keep else 0 for j in range(a.ndim))]

    def per_point(d: int) -> np.ndarray:
        return np.broadcast_to(along(arrays[d], p_axes), p_shape).ravel()

    block_shape: list[int] = []
    order: list[int] = []
    independent: list[tuple[int, ...] | None] = []
    for d in (0, 1):
        if d in spatial:
            independent.append(None)
            continue
        own = sorted(axes[d])
        independent.append(tuple(along(arrays[d], own).ravel().tolist()))
        block_shape += [out_shape[j] for j in own]
        order += own
    block_shape += list(p_shape)
    order += p_axes
    rest = [j for j in range(len(out_shape)) if j not in order]
    block_shape += [1] * len(rest)
    order += rest
    pts = Points(ys=per_point(2), xs=per_point(3), times=independent[0], bands=independent[1],
                 point_times=per_point(0) if 0 in spatial else None,
                 point_bands=per_point(1) if 1 in spatial else None,
                 out_shape=out_shape, block_shape=tuple(block_shape), order=tuple(order))
    return pts, out_shape
