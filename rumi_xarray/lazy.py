"""Lazy (non-dask) reads of a selection, through the decoded-tile cache when small.

A selection is sorted, distinct time steps, bands, rows and columns. Small
selections read only the tile cells their rows and columns touch (scattered
pixels do not pull in the tiles between them), whole cells at a time, into
the bounded tile cache, grouped into as few ``read_many`` calls as there are
cell sizes. Large selections read their bounding window directly, in one
planned call, and are subsampled in numpy.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rumi_xarray import cache, reads
from rumi_xarray.cube import Cube

Key = tuple


@dataclass(frozen=True)
class Selection:
    """Sorted, distinct positions to read along each cube axis."""

    times: tuple[int, ...]
    bands: tuple[int, ...]
    ys: np.ndarray
    xs: np.ndarray

    def bounding(self) -> reads.Request:
        """Return the request for the bounding window of the selection."""
        y0, x0 = int(self.ys[0]), int(self.xs[0])
        return reads.Request(times=self.times, bands=self.bands, row=y0, col=x0,
                             height=int(self.ys[-1]) - y0 + 1, width=int(self.xs[-1]) - x0 + 1)


def _index(values: np.ndarray) -> slice | np.ndarray:
    """Return a slice for a contiguous run (a view), else the positions."""
    if values.size and values[-1] - values[0] + 1 == values.size:
        return slice(int(values[0]), int(values[-1]) + 1)
    return values


def _by_cell(positions: np.ndarray, tile: int) -> dict[int, tuple[slice | np.ndarray,
                                                                   slice | np.ndarray]]:
    """Group positions by tile cell: cell -> (output positions, positions in the cell)."""
    cells = positions // tile
    out = {}
    for cell in np.unique(cells):
        where = np.nonzero(cells == cell)[0]
        out[int(cell)] = (_index(where), _index(positions[where] - cell * tile))
    return out


def _cacheable(cube: Cube, sel: Selection, n_cells: int) -> bool:
    capacity = cache.CACHE.max_bytes
    g = cube.grid
    planes = len(sel.times) * len(sel.bands)
    need = n_cells * planes * g.tile_height * g.tile_width * g.dtype.itemsize
    return capacity > 0 and need <= capacity // 4


def _route(cube: Cube, sel: Selection) -> tuple[dict, dict, reads.Plan | None]:
    """Return the tile cells a selection touches and, if too big to cache, its direct plan."""
    g = cube.grid
    rows, cols = _by_cell(sel.ys, g.tile_height), _by_cell(sel.xs, g.tile_width)
    if _cacheable(cube, sel, len(rows) * len(cols)):
        return rows, cols, None
    return rows, cols, reads.plan(cube, [sel.bounding()], budget=2**62)


def read(cube: Cube, sel: Selection) -> np.ndarray:
    """Read a selection.

    Parameters
    ----------
    cube : Cube
    sel : Selection

    Returns
    -------
    numpy.ndarray
        ``(times, bands, ys, xs)`` in the selection's (sorted) order.
    """
    g = cube.grid
    rows, cols, direct = _route(cube, sel)
    if direct is not None:
        request = sel.bounding()
        block = reads.assemble(request, direct.parts[0],
                               [reads.execute(cube, c) for c in direct.calls], g.dtype)
        return block[:, :, _index(sel.ys - request.row)][..., _index(sel.xs - request.col)]
    places, have, missing = _lookup(cube, sel, rows, cols)
    for call, items in _cell_calls(cube, missing):
        have.update(_store(cube, call, items, reads.execute(cube, call)))
    out = np.empty((len(sel.times), len(sel.bands), sel.ys.size, sel.xs.size), dtype=g.dtype)
    for key, to, bo, cr, cc in places:
        (ry, iy), (rx, ix) = rows[cr], cols[cc]
        plane = have[key]
        if isinstance(iy, slice) and isinstance(ix, slice):
            out[to, bo, ry, rx] = plane[iy, ix]
        else:
            out[to, bo][np.ix_(np.arange(sel.ys.size)[ry], np.arange(sel.xs.size)[rx])] = \
                plane[np.ix_(np.arange(plane.shape[0])[iy], np.arange(plane.shape[1])[ix])]
    return out


def calls(cube: Cube, sel: Selection) -> list[reads.Call]:
    """Return the native calls :func:`read` would make now (the cache as it is).

    Parameters
    ----------
    cube : Cube
    sel : Selection

    Returns
    -------
    list of reads.Call
    """
    rows, cols, direct = _route(cube, sel)
    if direct is not None:
        return list(direct.calls)
    _, _, missing = _lookup(cube, sel, rows, cols, count=False)
    return [call for call, _ in _cell_calls(cube, missing)]


def _lookup(cube: Cube, sel: Selection, rows: dict, cols: dict, count: bool = True
            ) -> tuple[list[tuple[Key, int, int, int, int]], dict[Key, np.ndarray],
                       dict[tuple[int, int, int], set[tuple[int, int]]]]:
    """Find each needed plane in the cache; collect the missing ones per cell."""
    places = []
    have: dict[Key, np.ndarray] = {}
    missing: dict[tuple[int, int, int], set[tuple[int, int]]] = defaultdict(set)
    for scene, local, t_out in cube.segments(np.asarray(sel.times, dtype=np.int64)):
        ident = cache.identity(cube.scenes[scene].source, cube.scenes[scene].header)
        for cr in rows:
            for cc in cols:
                for lt, to in zip(local, t_out, strict=True):
                    for bo, b in enumerate(sel.bands):
                        key = (ident, lt, b, cr, cc)
                        places.append((key, to, bo, cr, cc))
                        if key in have:
                            continue
                        plane = cache.CACHE.get(key) if count else cache.CACHE.peek(key)
                        if plane is None:
                            missing[(scene, cr, cc)].add((lt, b))
                        else:
                            have[key] = plane
    return places, have, missing


def _cell_calls(cube: Cube, missing: dict[tuple[int, int, int], set[tuple[int, int]]]
                ) -> list[tuple[reads.Call, list[tuple[int, int, int]]]]:
    """Group whole-cell reads of the missing planes into few native calls."""
    g = cube.grid
    th, tw = g.tile_height, g.tile_width
    whole_cell = not g.index_order  # a frame holds every step and band: read them all
    groups: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)
    for (scene, cr, cc), planes in sorted(missing.items()):
        if whole_cell:
            times, bands = tuple(range(g.time_count)), tuple(range(g.bands))
        else:
            times = tuple(sorted({t for t, _ in planes}))
            bands = tuple(sorted({b for _, b in planes}))
        h, w = min(th, g.height - cr * th), min(tw, g.width - cc * tw)
        groups[(times, bands, h, w)].append((scene, cr, cc))
    out = []
    for (times, bands, h, w), items in groups.items():
        out.append((reads.Call(scenes=tuple(s for s, _, _ in items),
                               rows=tuple(r * th for _, r, _ in items),
                               cols=tuple(c * tw for _, _, c in items),
                               times=times, bands=bands, height=h, width=w), items))
    return out


def _store(cube: Cube, call: reads.Call, items: list[tuple[int, int, int]],
           result: np.ndarray) -> dict[Key, np.ndarray]:
    """Put every plane of a whole-cell read into the cache and return them."""
    fetched = {}
    for k, (scene, cr, cc) in enumerate(items):
        ident = cache.identity(cube.scenes[scene].source, cube.scenes[scene].header)
        for ti, t in enumerate(call.times):
            for bi, b in enumerate(call.bands):
                key = (ident, t, b, cr, cc)
                plane = np.ascontiguousarray(result[k, ti, bi])
                fetched[key] = plane
                cache.CACHE.put(key, plane)
    return fetched
