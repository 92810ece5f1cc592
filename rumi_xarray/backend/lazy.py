"""Reads of one selection: one native call for a window, tile cells for scattered ones.

A selection is sorted, distinct time steps, bands, rows and columns. A window
(contiguous rows and columns: a chip, a chunk of a dask array, a whole load)
is read with one planned native call straight into the result, unless every
plane it needs is already in the tile cache. Scattered selections read only
the tile cells their rows and columns touch (points do not pull in the tiles
between them), whole cells at a time, into the bounded tile cache, grouped
into as few ``read_many`` calls as there are cell sizes; when too large to
cache they read their bounding window, subsampled in numpy.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from rumi_xarray.backend import cache
from rumi_xarray.model import planning
from rumi_xarray.model.cube import Cube
from rumi_xarray.model.selection import Selection
from rumi_xarray.native import reads

Key = tuple


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
    capacity = cache.get_cache().max_bytes
    g = cube.grid
    planes = len(sel.times) * len(sel.bands)
    need = n_cells * planes * g.tile_height * g.tile_width * g.dtype.itemsize
    return capacity > 0 and need <= capacity // 4


def _route(cube: Cube, sel: Selection, commit: bool
           ) -> tuple[dict, dict, planning.Plan | None, tuple | None]:
    """Decide how a selection is read: its direct plan, or tile cells through the cache.

    Returns ``(rows, cols, plan, cached)``: exactly one of ``plan`` (one
    planned read of the bounding window, normally one native call) and
    ``cached`` (the :func:`_lookup` result) is set. Cells serve a selection
    when all its planes are cached, when it is scattered (points read only
    their own tiles) or when reuse is likely: a window's planes were asked for
    before. A first window is read directly and only remembered, so chips and
    dask chunks never pay for filling the cache. ``commit`` False changes
    nothing (``explain()``).
    """
    g = cube.grid
    rows, cols = _by_cell(sel.ys, g.tile_height), _by_cell(sel.xs, g.tile_width)
    store = cache.get_cache()
    if not _cacheable(cube, sel, len(rows) * len(cols)):
        return rows, cols, planning.plan(cube, [sel.bounding()]), None
    found = _lookup(cube, sel, rows, cols, count=commit)
    missing_keys = found[3]
    if not missing_keys or not sel.dense or store.seen(missing_keys):
        return rows, cols, None, found
    if commit:
        store.remember(missing_keys)
    return rows, cols, planning.plan(cube, [sel.bounding()]), None


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
    rows, cols, direct, cached = _route(cube, sel, commit=True)
    if direct is not None:
        request = sel.bounding()
        if len(direct.calls) == 1 and len(direct.calls[0].scenes) == 1:
            # One scene, one call: decode straight into the result, no copy.
            call = direct.calls[0]
            part = direct.parts[0][0]
            if part.t_src == tuple(range(len(call.times))) and part.b_src == tuple(
                    range(len(call.bands))):
                block = reads.run(cube, call)[0]
                return _subsample(block, sel, request)
        block = planning.assemble(request, direct.parts[0],
                                  [reads.run(cube, c) for c in direct.calls], g.dtype)
        return _subsample(block, sel, request)
    assert cached is not None
    places, have, missing, _ = cached
    for call, items in _cell_calls(cube, missing):
        have.update(_store(cube, call, items, reads.run(cube, call)))
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


def _subsample(block: np.ndarray, sel: Selection, request: planning.Request) -> np.ndarray:
    if sel.dense:
        return block
    return block[:, :, _index(sel.ys - request.row)][..., _index(sel.xs - request.col)]


def calls(cube: Cube, sel: Selection) -> list[planning.Call]:
    """Return the native calls :func:`read` would make now (the cache as it is).

    Parameters
    ----------
    cube : Cube
    sel : Selection

    Returns
    -------
    list of planning.Call
    """
    _, _, direct, cached = _route(cube, sel, commit=False)
    if direct is not None:
        return list(direct.calls)
    assert cached is not None
    return [call for call, _ in _cell_calls(cube, cached[2])]


def _lookup(cube: Cube, sel: Selection, rows: dict, cols: dict, count: bool = True
            ) -> tuple[list[tuple[Key, int, int, int, int]], dict[Key, np.ndarray],
                       dict[tuple[int, int, int], set[tuple[int, int]]], list[Key]]:
    """Find each needed plane in the cache; collect the missing ones per cell."""
    places = []
    have: dict[Key, np.ndarray] = {}
    missing: dict[tuple[int, int, int], set[tuple[int, int]]] = defaultdict(set)
    missing_keys: list[Key] = []
    store = cache.get_cache()
    for scene, local, t_out in cube.segments(np.asarray(sel.times, dtype=np.int64)):
        ident = cache.identity(cube.scenes[scene])
        for cr in rows:
            for cc in cols:
                for lt, to in zip(local, t_out, strict=True):
                    for bo, b in enumerate(sel.bands):
                        key = (ident, lt, b, cr, cc)
                        places.append((key, to, bo, cr, cc))
                        if key in have:
                            continue
                        plane = store.get(key) if count else store.peek(key)
                        if plane is None:
                            if (lt, b) not in missing[(scene, cr, cc)]:
                                missing_keys.append(key)
                            missing[(scene, cr, cc)].add((lt, b))
                        else:
                            have[key] = plane
    return places, have, missing, missing_keys


def _cell_calls(cube: Cube, missing: dict[tuple[int, int, int], set[tuple[int, int]]]
                ) -> list[tuple[planning.Call, list[tuple[int, int, int]]]]:
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
        out.append((planning.Call(scenes=tuple(s for s, _, _ in items),
                               rows=tuple(r * th for _, r, _ in items),
                               cols=tuple(c * tw for _, _, c in items),
                               times=times, bands=bands, height=h, width=w), items))
    return out


def _store(cube: Cube, call: planning.Call, items: list[tuple[int, int, int]],
           result: np.ndarray) -> dict[Key, np.ndarray]:
    """Put every plane of a whole-cell read into the cache and return them."""
    fetched = {}
    store = cache.get_cache()
    for k, (scene, cr, cc) in enumerate(items):
        ident = cache.identity(cube.scenes[scene])
        for ti, t in enumerate(call.times):
            for bi, b in enumerate(call.bands):
                key = (ident, t, b, cr, cc)
                plane = np.ascontiguousarray(result[k, ti, bi])
                fetched[key] = plane
                store.put(key, plane)
    return fetched
