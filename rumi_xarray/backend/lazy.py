"""Reads of one lazily indexed selection: a window in one call, scattered cells, or the cache.

Policy (one :class:`Route` per access, computed from the tile cache's state
with :meth:`~rumi_xarray.backend.cache.TileCache.peek` and ``seen`` only, so
``explain()`` predicts it exactly):

- **Window** (contiguous rows and columns: a chip, a dask chunk, a whole
  load): one planned native call decoding straight into the result, unless
  every plane it needs is cached or reuse shows (below). A catalog window is
  one ``read_many`` across scenes, returned without a copy when the scenes'
  items tile the result.
- **Scattered** (OUTER rows x columns far apart) and **points** (pointwise
  pairs): only the tile cells holding a selected pixel, each ``(scene,
  cell)`` once, as a window inside the cell around its pixels; equal windows
  batch into ``read_many`` calls of at most :data:`BATCH_BYTES` decoded,
  each decoded into one reusable scratch buffer and gathered with numpy
  into the result. Nothing larger than the result plus one batch is
  allocated, whatever the selection's bounding box. On transports that
  coalesce byte ranges (HTTP, object stores) a call groups only cells whose
  frames lie close together in the file (so the transport never fetches the
  frames between scattered cells), and up to :data:`REMOTE_CALLS` calls run
  at once to overlap request latency.
- **Cache**: planes found in the tile cache are used as they are. Missing
  planes go through the cache (whole cells, decoded into a block that
  becomes the cache entry without a copy) only when reuse is likely -- some
  were asked for before (ghost keys) -- and the whole cells fit in
  ``1/CACHE_FRACTION`` of its capacity. A first access only remembers its
  planes, so chips, dask chunks and whole loads never pay for filling it.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rumi_xarray import progress
from rumi_xarray.backend import cache
from rumi_xarray.model import cells, planning
from rumi_xarray.model.cube import Cube
from rumi_xarray.model.selection import Points, Selection
from rumi_xarray.native import reads

#: Decoded bytes one native call of a scattered read decodes at most (one
#: cell window may exceed it; it is then read alone).
BATCH_BYTES = 32 * 2**20
#: Reads go through the tile cache only when the whole cells they would
#: store fit in this fraction of its capacity.
CACHE_FRACTION = 8
#: Native calls of one read in flight at once on a remote source.
REMOTE_CALLS = 8

Key = tuple[Any, ...]


@dataclass
class Route:
    """How one selection is read now.

    Exactly one of two shapes: ``direct`` (a window read straight into the
    result) or cell targets, each served from cached planes (``hits``), by a
    whole-cell read into the cache (``fills``) or by a window read into
    scratch (``reads``). ``fills`` and ``reads`` pair each call with the
    targets its items serve.
    """

    direct: planning.Plan | None = None
    cube: Cube | None = None
    targets: list[cells.GridTarget] | list[cells.PointTarget] = field(default_factory=list)
    hits: dict[int, dict[tuple[int, int], np.ndarray]] = field(default_factory=dict)
    hit_keys: list[Key] = field(default_factory=list)
    fills: list[tuple[planning.Call, list[int]]] = field(default_factory=list)
    reads: list[tuple[planning.Call, list[int]]] = field(default_factory=list)
    missing: int = 0

    @property
    def calls(self) -> list[planning.Call]:
        """Return the native calls this route makes, in order."""
        if self.direct is not None:
            # A large direct read runs in slices when a progress bar is shown.
            assert self.cube is not None
            return [s for c in self.direct.calls for s in progress.steps(self.cube, c)]
        return [c for c, _ in self.fills] + [c for c, _ in self.reads]


# --- routing ---------------------------------------------------------------------


def coalescing(source: Any) -> bool:
    """Return whether librumi's transport coalesces this source's byte ranges.

    Karu merges the ranges of one call across gaps (fewer requests for
    HTTP and object stores, at the price of bytes between frames); local
    files and in-memory images are read frame by frame.

    Parameters
    ----------
    source : str, bytes or range source

    Returns
    -------
    bool
    """
    return isinstance(source, str) and ("://" in source or source.startswith("/vsi"))


def _spans(cube: Cube, items: list[cells.Item]) -> list[cells.Span] | None:
    """Return where each item's frames lie in its file, when the transport coalesces."""
    if not any(coalescing(cube.scenes[it.scene].source) for it in items):
        return None
    out = []
    for it in items:
        ranges = reads.plan_ranges(cube.scenes[it.scene], it.times, it.bands, it.row, it.col,
                                   it.height, it.width)
        out.append((min(o for o, _ in ranges), max(o + n for o, n in ranges)))
    return out


def _batches(cube: Cube, items: list[cells.Item]) -> list[tuple[planning.Call, list[int]]]:
    return cells.batches(items, cube.grid.dtype.itemsize, BATCH_BYTES, _spans(cube, items))



def direct_plan(cube: Cube, request: planning.Request) -> planning.Plan:
    """Plan a window read straight into the result.

    One scene: one call with the time steps and bands in the request's own
    order (librumi decodes them in that order), so the result needs no
    reordering. Several scenes: :func:`planning.plan` (one ``read_many``
    per group of equal selections).

    Parameters
    ----------
    cube : Cube
    request : planning.Request

    Returns
    -------
    planning.Plan
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
        return planning.Plan(calls=(call,), parts=((part,),))
    return planning.plan(cube, [request])


def _cell_bytes(cube: Cube, sel: Selection) -> int:
    """Return the decoded bytes of the whole cells a window touches (cheap: no targets)."""
    g = cube.grid
    y, x = sel.y_run, sel.x_run
    assert y is not None and x is not None
    down = (y[0] + y[1] - 1) // g.tile_height - y[0] // g.tile_height + 1
    across = (x[0] + x[1] - 1) // g.tile_width - x[0] // g.tile_width + 1
    per_cell = 0
    for _, local, _ in cube.segments(np.asarray(sel.times, dtype=np.int64)):
        n_t = len(set(local)) if "t" in g.index_order else g.time_count
        n_b = len(sel.bands) if "b" in g.index_order else g.bands
        per_cell += n_t * n_b
    return down * across * per_cell * g.tile_height * g.tile_width * g.dtype.itemsize


def _window_keys(cube: Cube, sel: Selection) -> list[Key]:
    """Return the tile-cache keys of every plane a dense window touches.

    The same keys :func:`_route_targets` builds from the window's cell targets:
    ``(scene identity, local time, band, cell row, cell column)``.
    """
    g = cube.grid
    y, x = sel.y_run, sel.x_run
    assert y is not None and x is not None
    rows = range(y[0] // g.tile_height, (y[0] + y[1] - 1) // g.tile_height + 1)
    cols = range(x[0] // g.tile_width, (x[0] + x[1] - 1) // g.tile_width + 1)
    bands = sorted(set(sel.bands))
    keys: list[Key] = []
    for scene, local, _ in cube.segments(np.asarray(sel.times, dtype=np.int64)):
        ident = cache.identity(cube.scenes[scene])
        for t in sorted(set(local)):
            for b in bands:
                keys += [(ident, t, b, r, c) for r in rows for c in cols]
    return keys


def route_outer(cube: Cube, sel: Selection, commit: bool) -> Route:
    """Decide how an OUTER selection is read (see the module docstring).

    Parameters
    ----------
    cube : Cube
    sel : Selection
    commit : bool
        Remember first accesses (ghost keys). False changes nothing
        (``explain()``).

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
            return Route(direct=direct_plan(cube, request), cube=cube)
        # A window nothing of which is cached and none asked for before (a first
        # chip) is read directly: decide from its plane keys alone, without the
        # per-cell targets (building them was most of a lazy chip's overhead).
        keys = _window_keys(cube, sel)
        if not store.seen(keys) and all(store.peek(k) is None for k in keys):
            if commit:
                store.remember(keys)
            return Route(direct=direct_plan(cube, request), cube=cube)
        return _route_targets(cube, cells.grid_targets(cube, sel), request, commit)
    return _route_targets(cube, cells.grid_targets(cube, sel), None, commit)


def route_points(cube: Cube, pts: Points, commit: bool) -> Route:
    """Decide how a pointwise selection is read (see :func:`route_outer`).

    Parameters
    ----------
    cube : Cube
    pts : Points
    commit : bool

    Returns
    -------
    Route
    """
    return _route_targets(cube, cells.point_targets(cube, pts), None, commit)


def _route_targets(cube: Cube, targets: Any, window: planning.Request | None,
                   commit: bool) -> Route:
    g = cube.grid
    itemsize = g.dtype.itemsize
    store = cache.get_cache()
    wholes = [cells.whole_cell(g, t.item) for t in targets]
    limit = store.max_bytes // CACHE_FRACTION
    if store.max_bytes == 0 or sum(w.nbytes(itemsize) for w in wholes) > limit:
        return _uncached(cube, targets, window, list(range(len(targets))))
    idents: dict[int, tuple[Any, ...]] = {}
    route = Route(targets=targets)
    missing: list[int] = []
    missing_keys: list[Key] = []
    for i, target in enumerate(targets):
        it = target.item
        if it.scene not in idents:
            idents[it.scene] = cache.identity(cube.scenes[it.scene])
        ident = idents[it.scene]
        planes: dict[tuple[int, int], np.ndarray] = {}
        absent: list[Key] = []
        keys: list[Key] = []
        for t in it.times:
            for b in it.bands:
                key = (ident, t, b, it.cell_row, it.cell_col)
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
        return Route(direct=direct_plan(cube, window), cube=cube)
    uncached = _uncached(cube, targets, None, missing)
    route.reads, route.missing = uncached.reads, len(missing_keys)
    return route


def _uncached(cube: Cube, targets: Any, window: planning.Request | None,
              which: list[int]) -> Route:
    """Read without the cache: the window directly, else cell windows into scratch."""
    if window is not None:
        return Route(direct=direct_plan(cube, window), cube=cube)
    items = [targets[i].item for i in which]
    return Route(targets=targets, reads=[(call, [which[k] for k in members])
                                         for call, members in _batches(cube, items)])


# --- execution -------------------------------------------------------------------


def run_direct(cube: Cube, plan: planning.Plan, request: planning.Request) -> np.ndarray:
    """Run a direct plan and return the request's ``(time, band, y, x)`` block.

    Parameters
    ----------
    cube : Cube
    plan : planning.Plan
        From :func:`direct_plan` (or :func:`planning.plan` with this request
        first).
    request : planning.Request

    Returns
    -------
    numpy.ndarray
    """
    # progress.run is reads.run, sliced with a bar for large reads in terminals/notebooks.
    results = [progress.run(cube, call) for call in plan.calls]
    return assemble(request, plan.parts[0], plan.calls, results, cube.grid.dtype)


def assemble(request: planning.Request, parts: tuple[planning.Part, ...],
             calls: tuple[planning.Call, ...], results: list[np.ndarray],
             dtype: np.dtype) -> np.ndarray:
    """Return a request's block from call results, without a copy whenever possible.

    Besides :func:`planning.assemble`'s views (one part), a catalog window
    read by one ``read_many`` whose items are the scenes in the result's
    time order is that call's buffer, reshaped.

    Parameters
    ----------
    request : planning.Request
    parts : tuple of planning.Part
    calls : tuple of planning.Call
    results : list of numpy.ndarray
    dtype : numpy.dtype

    Returns
    -------
    numpy.ndarray
    """
    if len(parts) > 1 and len({p.call for p in parts}) == 1:
        call = calls[parts[0].call]
        n_t, n_b = len(call.times), len(request.bands)
        ordered = sorted(parts, key=lambda p: p.t_out[0] if p.t_out else -1)
        whole_t, whole_b = tuple(range(n_t)), tuple(range(n_b))
        if (len(ordered) == len(call.scenes) and len(request.times) == n_t * len(ordered)
                and call.bands == tuple(request.bands)
                and all(p.item == k and p.t_src == whole_t and p.b_src == whole_b
                        and p.b_out == whole_b
                        and p.t_out == tuple(range(k * n_t, (k + 1) * n_t))
                        for k, p in enumerate(ordered))):
            block = results[parts[0].call]
            return block.reshape((len(request.times), n_b, request.height, request.width))
    return planning.assemble(request, parts, results, dtype)


def execute_cells(cube: Cube, route: Route, out: np.ndarray) -> None:
    """Fill ``out`` from the route's cached planes, cache fills and scratch reads.

    Parameters
    ----------
    cube : Cube
    route : Route
        A route without ``direct``.
    out : numpy.ndarray
        The result the targets write into.
    """
    g = cube.grid
    store = cache.get_cache()
    targets = route.targets
    if route.hit_keys:
        store.touch(route.hit_keys)
    if route.missing:
        store.count_misses(route.missing)
    for i, planes in route.hits.items():
        target = targets[i]
        for (t, b), plane in planes.items():
            target.put(out, t, b, plane, 0, 0)
    idents: dict[int, tuple[Any, ...]] = {}
    # The scenes this read uses, not every scene: a cube over a table on disk looks
    # its scenes up when they are read.
    remote = any(coalescing(cube.scenes[s].source)
                 for call, _ in (*route.fills, *route.reads) for s in set(call.scenes))
    for (call, members), block in _decoded(cube, route.fills, remote, scratch=False):
        entries = []
        for k, i in enumerate(members):
            target = targets[i]
            it = target.item
            if it.scene not in idents:
                idents[it.scene] = cache.identity(cube.scenes[it.scene])
            for ti, t in enumerate(call.times):
                for bi, b in enumerate(call.bands):
                    plane = block[k, ti, bi]
                    entries.append(((idents[it.scene], t, b, it.cell_row, it.cell_col), plane))
                    target.put(out, t, b, plane, 0, 0)
        store.put_block(block, entries)
    for (call, members), block in _decoded(cube, route.reads, remote, scratch=True):
        for k, i in enumerate(members):
            target = targets[i]
            it = target.item
            r0, c0, _, _ = cells.cell_extent(g, it.cell_row, it.cell_col)
            for ti, t in enumerate(call.times):
                for bi, b in enumerate(call.bands):
                    target.put(out, t, b, block[k, ti, bi], it.row - r0, it.col - c0)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    # A forked child (dask's processes scheduler) inherits the pool but not
    # its threads: work submitted there would never run. Start afresh.
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(REMOTE_CALLS, thread_name_prefix="rumi-remote-read")
    return _pool


def _decoded(cube: Cube, jobs: list[tuple[planning.Call, list[int]]], remote: bool,
             scratch: bool) -> Iterator[tuple[tuple[planning.Call, list[int]], np.ndarray]]:
    """Run calls and yield each job with its decoded block, in order.

    ``scratch``: decode into reusable scratch buffers, valid until the next
    item is taken (else each block is a new array the caller keeps). Calls on
    a remote source run up to :data:`REMOTE_CALLS` at a time, holding at most
    two batches' worth of decoded bytes beyond the one being consumed, so
    request latency overlaps; local calls run one after another (librumi's
    thread pool already decodes each call's frames in parallel).
    """
    store = cache.get_cache()
    g = cube.grid

    def start(call: planning.Call) -> tuple[np.ndarray | None, np.ndarray]:
        shape = (len(call.scenes), len(call.times), len(call.bands), call.height, call.width)
        if not scratch:
            return None, reads.run(cube, call)
        nbytes = math.prod(shape) * g.dtype.itemsize
        buf = store.take_scratch(nbytes)
        try:
            return buf, reads.run(cube, call, out=buf[:nbytes].view(g.dtype).reshape(shape))
        except BaseException:
            store.give_scratch(buf)
            raise

    def release(buf: np.ndarray | None) -> None:
        if buf is not None:
            store.give_scratch(buf)

    if not remote or len(jobs) < 2:
        for job in jobs:
            buf, block = start(job[0])
            try:
                yield job, block
            finally:
                release(buf)
        return
    pool = _executor()
    pending: deque[tuple[tuple[planning.Call, list[int]], Future[Any], int]] = deque()
    queue = deque(jobs)
    in_flight = 0
    try:
        while queue or pending:
            while queue and len(pending) < REMOTE_CALLS and (
                    not pending or in_flight + _nbytes(queue[0][0], g) <= 2 * BATCH_BYTES):
                job = queue.popleft()
                size = _nbytes(job[0], g)
                pending.append((job, pool.submit(start, job[0]), size))
                in_flight += size
            job, future, size = pending.popleft()
            in_flight -= size
            buf, block = future.result()
            try:
                yield job, block
            finally:
                release(buf)
    finally:
        for _, future, _ in pending:  # stopped early: let the calls in flight finish
            with contextlib.suppress(Exception):  # the first failure is the one raised
                release(future.result()[0])


def _nbytes(call: planning.Call, grid: Any) -> int:
    return len(call.scenes) * call.samples_per_item * grid.dtype.itemsize


def orient(sel: Selection, block: np.ndarray) -> np.ndarray:
    """Return a dense selection's window block in the key's row/column order (a view).

    Parameters
    ----------
    sel : Selection
        A dense selection.
    block : numpy.ndarray
        ``(times, bands, height, width)`` of ``sel.window()``.

    Returns
    -------
    numpy.ndarray
    """
    y, x = sel.y_run, sel.x_run
    assert y is not None and x is not None
    if y[2]:
        block = block[:, :, ::-1]
    if x[2]:
        block = block[:, :, :, ::-1]
    return block


def read_outer(cube: Cube, sel: Selection, route: Route | None = None) -> np.ndarray:
    """Read an OUTER selection.

    Parameters
    ----------
    cube : Cube
    sel : Selection
    route : Route, optional
        From :func:`route_outer` with ``commit=True``; computed when omitted.

    Returns
    -------
    numpy.ndarray
        ``(times, bands, ys, xs)``: distinct time steps and bands in the
        key's order (repeats are restored by the caller), rows and columns
        as the key gives them.
    """
    if route is None:
        route = route_outer(cube, sel, commit=True)
    if route.direct is not None:
        return orient(sel, run_direct(cube, route.direct, sel.window()))
    out = np.empty(sel.shape, dtype=cube.grid.dtype)
    execute_cells(cube, route, out)
    return out


def read_points(cube: Cube, pts: Points, route: Route | None = None) -> np.ndarray:
    """Read a pointwise selection.

    Parameters
    ----------
    cube : Cube
    pts : Points
    route : Route, optional
        From :func:`route_points` with ``commit=True``; computed when omitted.

    Returns
    -------
    numpy.ndarray
        Shaped ``pts.out_shape``.
    """
    if route is None:
        route = route_points(cube, pts, commit=True)
    out = np.empty(pts.gathered_shape, dtype=cube.grid.dtype)
    execute_cells(cube, route, out)
    return pts.arrange(out)
