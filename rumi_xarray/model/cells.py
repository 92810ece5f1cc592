"""Tile cells a scattered selection touches, the cell windows that read them, the targets.

Pure: no I/O. A scattered selection (rows and columns far apart, or points)
is read cell by cell: every frame lies in one tile cell, so decoding a cell's
frames once serves every selected pixel in it. Each touched ``(scene, cell)`` is one
:class:`CellWindow`: a window inside the cell that covers the selected
pixels there (1 x 1 for a lone pixel, else one size common to the selection
so that the windows batch into few ``read_many`` calls; never beyond the
cell, so no other frame is touched). A :class:`GridTarget` (OUTER rows x
columns) or :class:`PointTarget` (pointwise pairs) says where each plane of
the cell window goes in the result; :func:`batches` groups cell windows into
native calls under a decoded-bytes budget.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rumi_xarray.model.cube import Cube
from rumi_xarray.model.grid import Grid
from rumi_xarray.model.planning import Block, Call
from rumi_xarray.model.selection import Points, Selection

#: An index along one axis: a slice (basic indexing, no copy) or positions.
Index = slice | np.ndarray


@dataclass(frozen=True)
class CellWindow(Block):
    """One window inside one tile cell of one scene, with its time steps and bands.

    Attributes
    ----------
    times : tuple of int
        Local time steps of the scene, sorted and distinct.
    bands : tuple of int
        Bands, sorted and distinct.
    row, col, height, width : int
        The window, inside the cell.
    scene : int
        Scene of the cube.
    cell_row, cell_col : int
        The tile cell.
    """

    scene: int
    cell_row: int
    cell_col: int


def cell_extent(grid: Grid, cell_row: int, cell_col: int) -> tuple[int, int, int, int]:
    """Return ``(row, col, height, width)`` of a tile cell (edge cells are clipped).

    Parameters
    ----------
    grid : Grid
    cell_row, cell_col : int

    Returns
    -------
    tuple of int
    """
    th, tw = grid.tile_height, grid.tile_width
    r, c = cell_row * th, cell_col * tw
    return r, c, min(th, grid.height - r), min(tw, grid.width - c)


def whole_cell(grid: Grid, window: CellWindow) -> CellWindow:
    """Return the cell window's whole cell, as the tile cache stores it.

    A frame that holds every time step (or band) of the cell is decoded
    whole whatever is asked of it, so the cache keeps all of them.

    Parameters
    ----------
    grid : Grid
    window : CellWindow

    Returns
    -------
    CellWindow
    """
    r, c, h, w = cell_extent(grid, window.cell_row, window.cell_col)
    times = window.times if "t" in grid.index_order else tuple(range(grid.time_count))
    bands = window.bands if "b" in grid.index_order else tuple(range(grid.bands))
    return replace(window, times=times, bands=bands, row=r, col=c, height=h, width=w)


def _sized(targets: list[Any], grid: Grid) -> list[Any]:
    """Give every target its final cell window; they arrive holding their bounding box.

    A single pixel reads a 1 x 1 window; every other cell window reads one
    common size (the largest bounding box, clipped to its cell), so the cell
    windows of a selection fall into few sizes and batch into few
    ``read_many`` calls. A window never leaves its cell: no other frame is
    touched.
    """
    boxes = [t.window for t in targets]
    multi = [b for b in boxes if b.height > 1 or b.width > 1]
    big_h = max((b.height for b in multi), default=1)
    big_w = max((b.width for b in multi), default=1)
    for target, box in zip(targets, boxes, strict=True):
        if box.height == 1 and box.width == 1:
            continue
        r0, c0, h, w = cell_extent(grid, box.cell_row, box.cell_col)
        height, width = min(big_h, h), min(big_w, w)
        row = min(box.row, r0 + h - height)
        col = min(box.col, c0 + w - width)
        target.window = replace(box, row=row, col=col, height=height, width=width)
    return targets


def _box(scene: int, cell: tuple[int, int], times: tuple[int, ...], bands: tuple[int, ...],
         origin: tuple[int, int], ys: np.ndarray, xs: np.ndarray) -> CellWindow:
    """Return the cell window of the bounding box of cell-relative positions (sized later)."""
    r0, c0 = origin
    y0, x0 = int(ys.min()), int(xs.min())
    return CellWindow(times=times, bands=bands, row=r0 + y0, col=c0 + x0,
                      height=int(ys.max()) - y0 + 1, width=int(xs.max()) - x0 + 1,
                      scene=scene, cell_row=cell[0], cell_col=cell[1])


def as_index(values: np.ndarray) -> Index:
    """Return a slice when positions step evenly upwards (a view), else the positions.

    Parameters
    ----------
    values : numpy.ndarray
        Non-negative positions.

    Returns
    -------
    slice or numpy.ndarray
    """
    n = int(values.size)
    if n == 1:
        v = int(values[0])
        return slice(v, v + 1)
    if n > 1:
        step = int(values[1]) - int(values[0])
        if step > 0 and bool(np.all(np.diff(values) == step)):
            return slice(int(values[0]), int(values[-1]) + 1, step)
    return values


def _shift(index: Index, by: int) -> Index:
    if isinstance(index, slice):
        return slice(index.start - by, index.stop - by, index.step)
    return index - by


def _groups(keys: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Group positions by key: ``[(key, positions in increasing order)]``, keys sorted."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    bounds = np.flatnonzero(np.diff(sorted_keys)) + 1
    starts = np.concatenate([[0], bounds])
    return [(int(sorted_keys[s]), part) for s, part in zip(starts, np.split(order, bounds),
                                                           strict=True)]


def _rows(values: tuple[int, ...] | np.ndarray) -> dict[int, np.ndarray]:
    """Map each distinct value to the positions holding it."""
    out: dict[int, list[int]] = defaultdict(list)
    for pos, v in enumerate(np.asarray(values).tolist()):
        out[int(v)].append(pos)
    return {v: np.asarray(p, dtype=np.intp) for v, p in out.items()}


class GridTarget:
    """Where the planes of one cell window go in an OUTER result ``(time, band, y, x)``.

    Parameters
    ----------
    window : CellWindow
    t_rows : dict
        Local time step -> result positions along time.
    b_rows : dict
        Band -> result positions along band.
    out_y, cell_y : slice or numpy.ndarray
        Result rows, and the same rows relative to the cell's first row.
    out_x, cell_x : slice or numpy.ndarray
        Likewise for columns.
    """

    def __init__(self, window: CellWindow, t_rows: dict[int, np.ndarray],
                 b_rows: dict[int, np.ndarray], out_y: Index, cell_y: Index, out_x: Index,
                 cell_x: Index) -> None:
        self.window = window
        self.t_rows, self.b_rows = t_rows, b_rows
        self.out_y, self.cell_y, self.out_x, self.cell_x = out_y, cell_y, out_x, cell_x

    def put(self, out: np.ndarray, t: int, b: int, plane: np.ndarray, dy: int, dx: int) -> None:
        """Copy what the result needs of one plane into it.

        Parameters
        ----------
        out : numpy.ndarray
            The result.
        t, b : int
            Local time step and band of the plane.
        plane : numpy.ndarray
            2-D samples whose first pixel is at ``(dy, dx)`` in the cell.
        dy, dx : int
        """
        t_rows, b_rows = self.t_rows.get(t), self.b_rows.get(b)
        if t_rows is None or b_rows is None:
            return  # a plane the cache keeps that this result does not need
        sy, sx = _shift(self.cell_y, dy), _shift(self.cell_x, dx)
        oy: Any = self.out_y
        ox: Any = self.out_x
        # Two position arrays on one side would pair up pointwise: cross them.
        if (isinstance(sy, np.ndarray) and isinstance(sx, np.ndarray)) or (
                isinstance(oy, np.ndarray) and isinstance(ox, np.ndarray)):
            src = plane[np.ix_(_positions(sy), _positions(sx))]
            oy, ox = np.ix_(_positions(oy), _positions(ox))
        else:
            src = plane[sy, sx]
        for ti in t_rows.tolist():
            for bi in b_rows.tolist():
                out[ti, bi][oy, ox] = src


    def put_planes(self, out: np.ndarray, times: Sequence[int], bands: Sequence[int],
                   planes: np.ndarray, dy: int, dx: int) -> None:
        """Copy what the result needs of a cell window's planes into it.

        Parameters
        ----------
        out : numpy.ndarray
            The result.
        times, bands : sequence of int
            Local time steps and bands of ``planes``' first two axes.
        planes : numpy.ndarray
            ``(times, bands, height, width)`` whose first pixel is at
            ``(dy, dx)`` in the cell.
        dy, dx : int
        """
        for ti, t in enumerate(times):
            for bi, b in enumerate(bands):
                self.put(out, t, b, planes[ti, bi], dy, dx)


def _positions(index: Index) -> np.ndarray:
    if isinstance(index, slice):
        return np.arange(index.start, index.stop, index.step or 1)
    return index


class PointTarget:
    """Where the planes of one cell window go in a gathered ``(time, band, point)`` block.

    Parameters
    ----------
    window : CellWindow
    t_rows : dict
        Local time step -> block positions along time (``[0]`` when every
        point has its own time step).
    b_rows : dict
        Band -> block positions along band (``[0]`` when per point).
    points : numpy.ndarray
        The points in the cell window (block positions along the point axis).
    cell_y, cell_x : numpy.ndarray
        Their row and column relative to the cell's first row and column.
    point_t, point_b : numpy.ndarray or None
        Their own local time step / band, when they have one.
    """

    def __init__(self, window: CellWindow, t_rows: dict[int, np.ndarray],
                 b_rows: dict[int, np.ndarray], points: np.ndarray, cell_y: np.ndarray,
                 cell_x: np.ndarray, point_t: np.ndarray | None, point_b: np.ndarray | None
                 ) -> None:
        self.window = window
        self.t_rows, self.b_rows = t_rows, b_rows
        self.points, self.cell_y, self.cell_x = points, cell_y, cell_x
        self.point_t, self.point_b = point_t, point_b

    def put(self, out: np.ndarray, t: int, b: int, plane: np.ndarray, dy: int, dx: int) -> None:
        """Copy the points' samples of one plane into the block (see :meth:`GridTarget.put`)."""
        t_rows, b_rows = self.t_rows.get(t), self.b_rows.get(b)
        if t_rows is None or b_rows is None:
            return
        points, ys, xs = self.points, self.cell_y, self.cell_x
        if self.point_t is not None or self.point_b is not None:
            mine = np.ones(points.size, dtype=bool)
            if self.point_t is not None:
                mine &= self.point_t == t
            if self.point_b is not None:
                mine &= self.point_b == b
            points, ys, xs = points[mine], ys[mine], xs[mine]
            if not points.size:
                return
        values = plane[ys - dy, xs - dx]
        for ti in t_rows.tolist():
            for bi in b_rows.tolist():
                out[ti, bi, points] = values

    def put_planes(self, out: np.ndarray, times: Sequence[int], bands: Sequence[int],
                   planes: np.ndarray, dy: int, dx: int) -> None:
        """Copy the points' samples of a cell window's planes (see :meth:`GridTarget.put_planes`).

        One gather and one scatter for every plane at once when each time
        step and band goes to one place in the block (a pixel series), rather
        than one per plane.
        """
        t_out = [self.t_rows.get(t) for t in times]
        b_out = [self.b_rows.get(b) for b in bands]
        if (self.point_t is not None or self.point_b is not None
                or any(r is None or r.size != 1 for r in (*t_out, *b_out))):
            for ti, t in enumerate(times):
                for bi, b in enumerate(bands):
                    self.put(out, t, b, planes[ti, bi], dy, dx)
            return
        values = planes[:, :, self.cell_y - dy, self.cell_x - dx]  # (times, bands, points)
        rows_t = np.concatenate([r for r in t_out if r is not None])
        rows_b = np.concatenate([r for r in b_out if r is not None])
        out[np.ix_(rows_t, rows_b, self.points)] = values


def _cells_along(positions: np.ndarray, tile: int) -> list[tuple[int, Index, np.ndarray]]:
    """Group result positions by tile cell: ``[(cell, result index, cell-relative positions)]``."""
    out = []
    for cell, where in _groups(positions // tile):
        out.append((cell, as_index(where), positions[where] - cell * tile))
    return out


def grid_targets(cube: Cube, sel: Selection) -> list[GridTarget]:
    """Return one target per ``(scene, cell)`` an OUTER selection touches.

    Parameters
    ----------
    cube : Cube
    sel : Selection

    Returns
    -------
    list of GridTarget
    """
    g = cube.grid
    rows = _cells_along(sel.ys, g.tile_height)
    cols = _cells_along(sel.xs, g.tile_width)
    bands = tuple(sorted(sel.bands))
    b_rows = _rows(sel.bands)
    targets = []
    for scene, local, out_pos in cube.segments(np.asarray(sel.times, dtype=np.int64)):
        times = tuple(sorted(set(local)))
        t_rows: dict[int, np.ndarray] = defaultdict(lambda: np.empty(0, dtype=np.intp))
        for lt, pos in zip(local, out_pos, strict=True):
            t_rows[lt] = np.append(t_rows[lt], pos)
        for cr, out_y, ly in rows:
            for cc, out_x, lx in cols:
                r0, c0, _, _ = cell_extent(g, cr, cc)
                window = _box(scene, (cr, cc), times, bands, (r0, c0), ly, lx)
                targets.append(GridTarget(window, dict(t_rows), b_rows, out_y, as_index(ly),
                                          out_x, as_index(lx)))
    return _sized(targets, g)


def point_targets(cube: Cube, pts: Points) -> list[PointTarget]:
    """Return one :class:`PointTarget` per ``(scene, cell)`` the points touch.

    As :func:`grid_targets`, for pointwise pairs.
    """
    g = cube.grid
    th, tw = g.tile_height, g.tile_width
    n_rows, n_cols = g.cells
    cy, cx = pts.ys // th, pts.xs // tw
    cell_key = cy * n_cols + cx
    if pts.bands is not None:
        bands: tuple[int, ...] | None = tuple(sorted(set(pts.bands)))
        b_rows = _rows(pts.bands)
    else:
        bands, b_rows = None, {}
    targets = []

    def target(scene: int, key: int, members: np.ndarray, times: tuple[int, ...],
               t_rows: dict[int, np.ndarray], point_t: np.ndarray | None) -> PointTarget:
        cr, cc = divmod(key % (n_rows * n_cols), n_cols)
        r0, c0, _, _ = cell_extent(g, cr, cc)
        ly, lx = pts.ys[members] - r0, pts.xs[members] - c0
        point_b = None
        own_bands, own_b_rows = bands, b_rows
        if pts.point_bands is not None:
            point_b = pts.point_bands[members]
            own_bands = tuple(sorted(set(point_b.tolist())))
            own_b_rows = {b: np.zeros(1, dtype=np.intp) for b in own_bands}
        assert own_bands is not None
        window = _box(scene, (cr, cc), times, own_bands, (r0, c0), ly, lx)
        return PointTarget(window, t_rows, own_b_rows, members, ly, lx, point_t, point_b)

    if pts.point_times is None:
        assert pts.times is not None
        # Per scene its time steps, per cell its points: a cell's target in each scene
        # is the same but for the scene (a pixel series over a catalog of many scenes).
        per_scene = []
        for scene, local, out_pos in cube.segments(np.asarray(pts.times, dtype=np.int64)):
            t_rows = {t: np.asarray([p for lt, p in zip(local, out_pos, strict=True)
                                     if lt == t], dtype=np.intp) for t in set(local)}
            per_scene.append((scene, tuple(sorted(t_rows)), t_rows))
        for key, members in _groups(cell_key):
            first = target(per_scene[0][0], key, members, per_scene[0][1], per_scene[0][2],
                           None)
            for scene, times, t_rows in per_scene:
                window = replace(first.window, scene=scene, times=times)
                targets.append(PointTarget(window, t_rows, first.b_rows, members, first.cell_y,
                                           first.cell_x, None, first.point_b))
    else:
        steps = np.asarray(cube.steps, dtype=np.int64).reshape(-1, 2)[pts.point_times]
        scene_of, local_t = steps[:, 0], steps[:, 1]
        for key, members in _groups(scene_of * (n_rows * n_cols) + cell_key):
            point_t = local_t[members]
            times = tuple(sorted(set(point_t.tolist())))
            t_rows = {t: np.zeros(1, dtype=np.intp) for t in times}
            targets.append(target(int(scene_of[members[0]]), key, members, times, t_rows,
                                  point_t))
    return _sized(targets, g)


#: A call on a transport that coalesces byte ranges (HTTP, object stores)
#: groups cell windows only while the bytes between their frames stay under
#: this fraction of the bytes the windows span: whatever the transport merges,
#: a call then fetches at most 1.25x what reading each window alone could.
SLACK = 0.25

#: ``(first byte, end byte)`` of a cell window's frames in its scene's file.
Span = tuple[int, int]


def batches(windows: Sequence[CellWindow], itemsize: int, budget: int,
            spans: Sequence[Span] | None = None,
            layouts: Sequence[Any] | None = None) -> list[tuple[Call, list[int]]]:
    """Group cell windows into native calls: equal windows and planes share one ``read_many``.

    Parameters
    ----------
    windows : sequence of CellWindow
    itemsize : int
        Bytes per sample.
    budget : int
        Upper bound on the decoded bytes of one call (one window may exceed
        it; it is then read alone).
    spans : sequence of Span, optional
        Where each window's frames lie in its file, for sources whose
        transport coalesces byte ranges: windows then batch in file order and
        only while the gaps between them stay within :data:`SLACK` of what
        they need, so scattered cells never pull in the frames between them.
    layouts : sequence, optional
        Each window's scene layout (:meth:`Cube.layout`) in a ragged cube:
        windows of different layouts never share a call.

    Returns
    -------
    list of (Call, window positions)
        Item ``k`` of a call (its ``k``-th window) is ``windows[positions[k]]``.
    """
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, it in enumerate(windows):
        layout = None if layouts is None else layouts[i]
        groups[(it.times, it.bands, it.height, it.width, layout)].append(i)
    out = []
    for (times, bands, h, w, _), members in sorted(groups.items(), key=lambda kv: kv[0][:4]):
        per_item = max(1, len(times) * len(bands) * h * w * itemsize)
        size = max(1, budget // per_item)
        if spans is None:
            members.sort(key=lambda i: (windows[i].scene, windows[i].row, windows[i].col))
            size = math.ceil(len(members) / math.ceil(len(members) / size))  # even batches
            parts = [members[k:k + size] for k in range(0, len(members), size)]
        else:
            members.sort(key=lambda i: (windows[i].scene, spans[i][0]))
            parts = _compact(members, spans, [windows[i].scene for i in range(len(windows))],
                             size)
        for batch in parts:
            out.append((Call(scenes=tuple(windows[i].scene for i in batch),
                             rows=tuple(windows[i].row for i in batch),
                             cols=tuple(windows[i].col for i in batch),
                             times=times, bands=bands, height=h, width=w), batch))
    return out


def _compact(members: list[int], spans: Sequence[Span], scenes: list[int],
             size: int) -> list[list[int]]:
    """Split windows (sorted by scene, then file offset) into batches of compact byte spans."""
    parts: list[list[int]] = []
    batch: list[int] = []
    reach: dict[int, tuple[int, int, int]] = {}  # scene -> (first, end, bytes spanned)
    for i in members:
        lo, hi = spans[i]
        covered = hi - lo
        old = reach.get(scenes[i])
        if old is not None:  # other files' frames never coalesce with these
            lo, hi, covered = min(lo, old[0]), max(hi, old[1]), covered + old[2]
        if batch and (len(batch) >= size or hi - lo > (1 + SLACK) * covered):
            parts.append(batch)
            batch, reach = [], {}
            lo, hi = spans[i]
            covered = hi - lo
        batch.append(i)
        reach[scenes[i]] = (lo, hi, covered)
    if batch:
        parts.append(batch)
    return parts
