"""How one lazily indexed selection is read: its route (the read policy).

Pure decisions: nothing here reads. A :class:`Route` is computed from the
selection, the tile cache's state (:meth:`~rumi_xarray.backend.cache.TileCache.peek`
and ``seen`` only) and the progress setting passed in, so ``explain()``
predicts exactly what :mod:`rumi_xarray.backend.execute` then runs. librumi
is asked only for byte plans (``plan_ranges``, no I/O), to keep scattered
cells of a remote file apart.

- **Window** (contiguous rows and columns: a chip, a dask chunk, a whole
  load): one native call decoding straight into the result, unless every
  plane it needs is cached or reuse shows (below). A catalog window is one
  ``read_many`` across scenes, returned without a copy when the scenes'
  items tile the result. With ``progress=True``, a call decoding more
  than :data:`~rumi_xarray.model.planning.READ_BAR_BYTES` runs as the slices
  of :func:`~rumi_xarray.model.planning.split_call`.
- **Scattered** (OUTER rows x columns far apart) and **points** (pointwise
  pairs): only the tile cells holding a selected pixel, each ``(scene,
  cell)`` once, as a cell window around its pixels; equal cell windows batch
  into ``read_many`` calls of at most :data:`BATCH_BYTES` decoded. On
  transports that coalesce byte ranges (HTTP, object stores) a call groups
  only cells whose frames lie close together in the file (so the transport
  never fetches the frames between scattered cells).
- **Cache**: planes found in the tile cache are used as they are. Missing
  planes go through the cache (whole cells, decoded into a block that
  becomes the cache entry without a copy) only when reuse is likely -- some
  were asked for before (ghost keys) -- and the whole cells fit in
  ``1/CACHE_FRACTION`` of its capacity. A first access only remembers its
  planes, so chips, dask chunks and whole loads never pay for filling it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rumi_xarray.backend import cache
from rumi_xarray.errors import with_context
from rumi_xarray.model import cells, planning
from rumi_xarray.model.cube import Cube, Scene
from rumi_xarray.model.selection import Points, Selection
from rumi_xarray.native import reads
from rumi_xarray.sources.location import locate

#: Decoded bytes one native call of a scattered read decodes at most (one
#: cell window may exceed it; it is then read alone).
BATCH_BYTES = 32 * 2**20
#: Reads go through the tile cache only when the whole cells they would
#: store fit in this fraction of its capacity.
CACHE_FRACTION = 8

#: A tile-cache key: ``(scene identity, local time, band, cell row, cell column)``.
PlaneKey = tuple[Any, ...]


def plane_key(ident: tuple[Any, ...], t: int, b: int, row: int, col: int) -> PlaneKey:
    """Return the tile-cache key of one decoded plane (the one place keys are built).

    Parameters
    ----------
    ident : tuple
        The scene's :func:`identity`.
    t, b : int
        Scene-local time step and band.
    row, col : int
        Tile cell.

    Returns
    -------
    PlaneKey
    """
    return (ident, t, b, row, col)


# --- where a source lives: the read path's only questions about it ----------------


def coalescing(source: Any) -> bool:
    """Return whether librumi's transport coalesces this source's byte ranges.

    Karu merges the ranges of one call across gaps (fewer requests for
    HTTP and object stores, at the price of bytes between frames); local
    files and in-memory images are read frame by frame.

    Parameters
    ----------
    source : str, bytes or range source
        A scene's source, as opened.

    Returns
    -------
    bool
        True for URLs and GDAL-style ``/vsi`` paths.
    """
    # Sources are opened by now: fsspec URLs are range sources, GDAL virtual paths URLs.
    return isinstance(source, str) and locate(source).kind == "native"


def local_file(source: Any) -> bool:
    """Return whether ``source`` (as for :func:`coalescing`) is a path on this machine."""
    return isinstance(source, str) and locate(source).local


def identity(scene: Scene) -> tuple[Any, ...]:
    """Return the tile-cache key part that changes whenever the scene's content may have.

    Parameters
    ----------
    scene : Scene

    Returns
    -------
    tuple
        The header (which locates and checksums every frame) plus, for local
        files, device, inode, size and modification time.

    Raises
    ------
    RumiFileNotFoundError
        A local file is gone.
    """
    source, header = scene.source, scene.header
    if local_file(source):
        try:
            st = os.stat(source)
        except OSError as exc:
            raise with_context(exc, f"{scene.describe()}: cannot read the file",
                               source=scene.name, row=scene.catalog_row) from exc
        return ("file", source, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, header)
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    # bytes are immutable and hash by content (cached by Python), URLs by
    # text, range sources by their own equality: none can alias another file.
    return ("other", source, header)


# --- the route of one selection ---------------------------------------------------


@dataclass
class Route:
    """How one selection is read now.

    Exactly one of two shapes: ``direct`` (a window read straight into the
    result, its calls split as :func:`~rumi_xarray.model.planning.split_call`
    says for ``progress``) or cell targets, each served from cached planes
    (``hits``), by a whole-cell read into the cache (``fills``) or by a cell
    window read into scratch (``reads``). ``fills`` and ``reads`` pair each
    call with the targets its items serve.
    """

    direct: planning.Assembly | None = None
    cube: Cube | None = None
    progress: bool = False
    targets: list[cells.GridTarget] | list[cells.PointTarget] = field(default_factory=list)
    hits: dict[int, dict[tuple[int, int], np.ndarray]] = field(default_factory=dict)
    hit_keys: list[PlaneKey] = field(default_factory=list)
    fills: list[tuple[planning.Call, list[int]]] = field(default_factory=list)
    reads: list[tuple[planning.Call, list[int]]] = field(default_factory=list)
    missing: int = 0

    @property
    def calls(self) -> list[planning.Call]:
        """Return the native calls this route makes, in order (what ``explain()`` counts)."""
        if self.direct is not None:
            assert self.cube is not None
            return [s for c in self.direct.calls
                    for s in planning.split_call(self.cube, c, progress=self.progress)]
        return [c for c, _ in self.fills] + [c for c, _ in self.reads]


def _direct(cube: Cube, request: planning.Request, progress: bool) -> Route:
    return Route(direct=window_assembly(cube, request), cube=cube, progress=progress)


def window_assembly(cube: Cube, request: planning.Request) -> planning.Assembly:
    """Return the calls of a window read straight into the result, and its parts.

    One scene: one call with the time steps and bands in the request's own
    order (librumi decodes them in that order), so the result needs no
    reordering. Several scenes: :func:`planning.batch_requests` (one
    ``read_many`` per group of equal selections).

    Parameters
    ----------
    cube : Cube
    request : planning.Request

    Returns
    -------
    planning.Assembly
    """
    segments = cube.segments(np.asarray(request.times, dtype=np.int64))
    if len(segments) == 1:
        scene, local, _ = segments[0]
        call = planning.Call(scenes=(scene,), rows=(request.row,), cols=(request.col,),
                             times=tuple(local), bands=tuple(request.bands),
                             height=request.height, width=request.width)
        n_t, n_b = len(local), len(request.bands)
        part = planning.Part(call=0, item=0, t_out=tuple(range(n_t)), t_src=tuple(range(n_t)),
                             b_out=tuple(range(n_b)), b_src=tuple(range(n_b)))
        return planning.Assembly(calls=(call,), parts=((part,),))
    return planning.batch_requests(cube, [request])


def _spans(cube: Cube, windows: list[cells.CellWindow]) -> list[cells.Span] | None:
    """Return where each cell window's frames lie in its file, when the transport coalesces."""
    if not any(coalescing(cube.scenes[w.scene].source) for w in windows):
        return None
    out = []
    for w in windows:
        ranges = reads.plan_ranges(cube.scenes[w.scene], w.times, w.bands, w.row, w.col,
                                   w.height, w.width)
        out.append((min(o for o, _ in ranges), max(o + n for o, n in ranges)))
    return out


def _batches(cube: Cube, windows: list[cells.CellWindow]
             ) -> list[tuple[planning.Call, list[int]]]:
    layouts = [cube.layout(w.scene) for w in windows] if cube.ragged else None
    return cells.batches(windows, cube.grid.dtype.itemsize, BATCH_BYTES, _spans(cube, windows),
                         layouts)


def _cell_bytes(cube: Cube, sel: Selection) -> int:
    """Return the decoded bytes of the whole cells a window touches (cheap: no targets)."""
    g = cube.grid
    y, x = sel.y_run, sel.x_run
    assert y is not None and x is not None
    down = (y[0] + y[1] - 1) // g.tile_height - y[0] // g.tile_height + 1
    across = (x[0] + x[1] - 1) // g.tile_width - x[0] // g.tile_width + 1
    per_cell = 0
    for scene, local, _ in cube.segments(np.asarray(sel.times, dtype=np.int64)):
        own = cube.scene_grid(scene)
        n_t = len(set(local)) if "t" in own.index_order else own.time_count
        n_b = len(sel.bands) if "b" in own.index_order else own.bands
        per_cell += n_t * n_b
    return down * across * per_cell * g.tile_height * g.tile_width * g.dtype.itemsize


def _window_keys(cube: Cube, sel: Selection) -> list[PlaneKey]:
    """Return the tile-cache keys of every plane a dense window touches.

    The same keys :func:`_route_targets` builds from the window's cell targets.
    """
    g = cube.grid
    y, x = sel.y_run, sel.x_run
    assert y is not None and x is not None
    rows = range(y[0] // g.tile_height, (y[0] + y[1] - 1) // g.tile_height + 1)
    cols = range(x[0] // g.tile_width, (x[0] + x[1] - 1) // g.tile_width + 1)
    bands = sorted(set(sel.bands))
    keys: list[PlaneKey] = []
    for scene, local, _ in cube.segments(np.asarray(sel.times, dtype=np.int64)):
        ident = identity(cube.scenes[scene])
        for t in sorted(set(local)):
            for b in bands:
                keys += [plane_key(ident, t, b, r, c) for r in rows for c in cols]
    return keys


def route_outer(cube: Cube, sel: Selection, *, commit: bool, progress: bool) -> Route:
    """Decide how an OUTER selection is read (see the module docstring).

    Parameters
    ----------
    cube : Cube
    sel : Selection
    commit : bool
        Remember first accesses (ghost keys). False changes nothing
        (``explain()``).
    progress : bool
        Whether large reads run in slices for a progress bar
        (:func:`rumi_xarray.progress.sliced_reads`).

    Returns
    -------
    Route
    """
    store = cache.get_cache()
    if sel.dense:
        request = sel.window()
        # Decide from sizes alone first: a large window (a dask chunk, a whole
        # load) never builds per-cell targets.
        if store.max_bytes == 0 or _cell_bytes(cube, sel) > store.max_bytes // CACHE_FRACTION:
            return _direct(cube, request, progress)
        # A window nothing of which is cached and none asked for before (a first
        # chip) is read directly: decide from its plane keys alone, without the
        # per-cell targets (building them was most of a lazy chip's overhead).
        keys = _window_keys(cube, sel)
        if not store.seen(keys) and all(store.peek(k) is None for k in keys):
            if commit:
                store.remember(keys)
            return _direct(cube, request, progress)
        return _route_targets(cube, cells.grid_targets(cube, sel), request, commit, progress)
    return _route_targets(cube, cells.grid_targets(cube, sel), None, commit, progress)


def route_points(cube: Cube, pts: Points, *, commit: bool, progress: bool) -> Route:
    """Decide how a pointwise selection is read (see :func:`route_outer`).

    Parameters
    ----------
    cube : Cube
    pts : Points
    commit, progress : bool

    Returns
    -------
    Route
    """
    return _route_targets(cube, cells.point_targets(cube, pts), None, commit, progress)


def _route_targets(cube: Cube, targets: Any, window: planning.Request | None,
                   commit: bool, progress: bool) -> Route:
    g = cube.grid
    itemsize = g.dtype.itemsize
    store = cache.get_cache()
    wholes = [cells.whole_cell(cube.scene_grid(t.window.scene), t.window) for t in targets]
    limit = store.max_bytes // CACHE_FRACTION
    if store.max_bytes == 0 or sum(w.nbytes(itemsize) for w in wholes) > limit:
        if window is not None:
            return _direct(cube, window, progress)
        return _uncached(cube, targets, list(range(len(targets))))
    idents: dict[int, tuple[Any, ...]] = {}
    route = Route(targets=targets)
    missing: list[int] = []
    missing_keys: list[PlaneKey] = []
    for i, target in enumerate(targets):
        w = target.window
        if w.scene not in idents:
            idents[w.scene] = identity(cube.scenes[w.scene])
        ident = idents[w.scene]
        planes: dict[tuple[int, int], np.ndarray] = {}
        absent: list[PlaneKey] = []
        keys: list[PlaneKey] = []
        for t in w.times:
            for b in w.bands:
                key = plane_key(ident, t, b, w.cell_row, w.cell_col)
                keys.append(key)
                plane = store.peek(key)
                if plane is None:
                    absent.append(key)
                else:
                    planes[(t, b)] = plane
        if absent:
            missing.append(i)
            missing_keys += absent
        else:
            route.hits[i] = planes
            route.hit_keys += keys
    if not missing:
        return route
    if store.seen(missing_keys):
        # Reuse shows: read the missing targets' whole cells into the cache.
        route.fills = [(call, [missing[k] for k in members]) for call, members in
                       _batches(cube, [wholes[i] for i in missing])]
        route.missing = len(missing_keys)
        return route
    if commit:
        store.remember(missing_keys)
    if window is not None:
        return _direct(cube, window, progress)
    uncached = _uncached(cube, targets, missing)
    route.reads, route.missing = uncached.reads, len(missing_keys)
    return route


def _uncached(cube: Cube, targets: Any, which: list[int]) -> Route:
    """Read cell windows into scratch, without the cache."""
    windows = [targets[i].window for i in which]
    return Route(targets=targets, reads=[(call, [which[k] for k in members])
                                         for call, members in _batches(cube, windows)])
