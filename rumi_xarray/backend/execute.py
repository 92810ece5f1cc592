"""Running a route: native calls, the remote-call threads, progress, the result.

:mod:`rumi_xarray.backend.route` decides what to read; this module does it,
and nothing else decides here: a window read runs exactly
``route.calls`` (the slices of :func:`~rumi_xarray.model.planning.split_call`
for the route's progress setting), scattered cells exactly the route's cache
fills and scratch reads.

Scattered cell windows are decoded into one reusable scratch buffer per call
and copied into the result with numpy: nothing larger than the result plus
one batch is allocated, whatever the selection's bounding box. On a remote
source up to :data:`REMOTE_CALLS` calls run at once to overlap request
latency, on the threads of :data:`REMOTE` (see :class:`RemoteCalls`).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from rumi_xarray import progress as bars
from rumi_xarray.backend import cache
from rumi_xarray.backend.route import (
    BATCH_BYTES,
    Route,
    coalescing,
    identity,
    plane_key,
    route_outer,
    route_points,
)
from rumi_xarray.model import cells, planning
from rumi_xarray.model.cube import Cube
from rumi_xarray.model.selection import Points, Selection
from rumi_xarray.native import reads

#: Native calls of one read in flight at once on a remote source.
REMOTE_CALLS = 8

Job = tuple[planning.Call, list[int]]


class RemoteCalls:
    """The threads that overlap a remote scattered read's native calls.

    One owner for the whole process: the pool starts at the first remote
    read with two calls or more (never at import), serves every read after
    it, and ends with the process (``concurrent.futures`` joins its threads
    at exit). A forked child -- dask's processes scheduler, multiprocessing
    -- inherits the pool object but not its threads, so work submitted there
    would never run: the child notices (another process id, or the fork hook
    below) and starts a pool of its own.

    Parameters
    ----------
    workers : int
        Threads, i.e. calls in flight at once.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def executor(self) -> ThreadPoolExecutor:
        """Return this process's pool, started on first use.

        Returns
        -------
        concurrent.futures.ThreadPoolExecutor
        """
        pid = os.getpid()
        pool = self._pool
        if pool is None or self._pid != pid:
            with self._lock:
                if self._pool is None or self._pid != pid:
                    self._pool = ThreadPoolExecutor(self.workers,
                                                    thread_name_prefix="rumi-remote-read")
                    self._pid = pid
                pool = self._pool
        return pool

    def forget(self) -> None:
        """Drop the pool without touching its threads (they are not in this process)."""
        self._pool, self._pid, self._lock = None, 0, threading.Lock()


#: The remote-call threads of this process.
REMOTE = RemoteCalls(REMOTE_CALLS)
os.register_at_fork(after_in_child=REMOTE.forget)


# --- window reads ----------------------------------------------------------------


def run_call(cube: Cube, call: planning.Call, *, progress: bool,
             out: np.ndarray | None = None) -> np.ndarray:
    """Run one planned call as the slices :func:`planning.split_call` gives.

    One slice (no bar): exactly one native call into ``out``. More: each
    slice decoded straight into its part of the result (a slice of rows of a
    multi-plane read goes through a buffer of its own), the bar advancing by
    each slice's bytes.

    Parameters
    ----------
    cube, call, out
        As for :func:`rumi_xarray.native.reads.run`.
    progress : bool
        Whether large calls run in slices for a progress bar (the route's setting).

    Returns
    -------
    numpy.ndarray
        ``(n_items, n_times, n_bands, height, width)``, ``out`` when given.
    """
    parts = planning.split_call(cube, call, progress=progress)
    itemsize = cube.grid.dtype.itemsize
    if len(parts) == 1:
        total = call.nbytes(itemsize)
        if total <= planning.READ_BAR_BYTES or not bars.enabled():
            return reads.run(cube, call, out=out)
        # A bar where bars are shown, in one step: slices only when progress=True.
        with bars.bar(total, "reading", unit="B", show=True, unit_scale=True) as advance:
            got = reads.run(cube, call, out=out)
            advance(total)
        return got
    shape = (len(call.scenes), len(call.times), len(call.bands), call.height, call.width)
    if out is None:
        out = np.empty(shape, dtype=cube.grid.dtype)
    item = time = band = row = 0
    with bars.bar(call.nbytes(itemsize), "reading", unit="B", show=True,
                  unit_scale=True) as advance:
        for part in parts:
            if part.scenes != call.scenes:
                target = out[item:item + len(part.scenes)]
                item += len(part.scenes)
            elif part.times != call.times:
                target = out[:, time:time + len(part.times)]
                time += len(part.times)
            elif part.bands != call.bands:
                target = out[:, :, band:band + len(part.bands)]
                band += len(part.bands)
            else:
                target = out[:, :, :, row:row + part.height]
                row += part.height
            if target.flags.c_contiguous:
                reads.run(cube, part, out=target)
            else:
                target[...] = reads.run(cube, part)
            advance(part.nbytes(itemsize))
    return out


def run_assembly(cube: Cube, assembly: planning.Assembly, request: planning.Request, *,
                 progress: bool) -> np.ndarray:
    """Run a window read's calls and return the request's ``(time, band, y, x)`` block.

    Parameters
    ----------
    cube : Cube
    assembly : planning.Assembly
        From :func:`~rumi_xarray.backend.route.window_assembly` (or
        :func:`planning.batch_requests` with this request first).
    request : planning.Request
    progress : bool
        Whether large calls run in slices for a progress bar (the route's setting).

    Returns
    -------
    numpy.ndarray
    """
    results = [run_call(cube, call, progress=progress) for call in assembly.calls]
    return planning.assemble(request, assembly.parts[0], assembly.calls, results,
                             cube.grid.dtype)


# --- scattered cells -------------------------------------------------------------


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
            w = target.window
            if w.scene not in idents:
                idents[w.scene] = identity(cube.scenes[w.scene])
            for ti, t in enumerate(call.times):
                for bi, b in enumerate(call.bands):
                    plane = block[k, ti, bi]
                    entries.append((plane_key(idents[w.scene], t, b, w.cell_row, w.cell_col),
                                    plane))
                    target.put(out, t, b, plane, 0, 0)
        store.put_block(block, entries)
    for (call, members), block in _decoded(cube, route.reads, remote, scratch=True):
        for k, i in enumerate(members):
            target = targets[i]
            w = target.window
            r0, c0, _, _ = cells.cell_extent(g, w.cell_row, w.cell_col)
            target.put_planes(out, call.times, call.bands, block[k], w.row - r0, w.col - c0)


def _decoded(cube: Cube, jobs: list[Job], remote: bool, scratch: bool
             ) -> Iterator[tuple[Job, np.ndarray]]:
    """Run calls and yield each job with its decoded block, in order.

    ``scratch``: decode into reusable scratch buffers, valid until the next
    job is taken (else each block is a new array the caller keeps). Calls on
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
    pool = REMOTE.executor()
    itemsize = g.dtype.itemsize
    pending: deque[tuple[Job, Future[Any], int]] = deque()
    queue = deque(jobs)
    in_flight = 0
    try:
        while queue or pending:
            while queue and len(pending) < REMOTE_CALLS and (
                    not pending or in_flight + queue[0][0].nbytes(itemsize) <= 2 * BATCH_BYTES):
                job = queue.popleft()
                size = job[0].nbytes(itemsize)
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


# --- whole selections ------------------------------------------------------------


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
    """Read an OUTER selection along its route.

    Parameters
    ----------
    cube : Cube
    sel : Selection
    route : Route, optional
        From :func:`~rumi_xarray.backend.route.route_outer` with
        ``commit=True``; decided now (progress as shown now) when omitted.

    Returns
    -------
    numpy.ndarray
        ``(times, bands, ys, xs)``: distinct time steps and bands in the
        key's order (repeats are restored by the caller), rows and columns
        as the key gives them.
    """
    if route is None:
        route = route_outer(cube, sel, commit=True, progress=bars.sliced_reads())
    if route.direct is not None:
        block = run_assembly(cube, route.direct, sel.window(), progress=route.progress)
        return orient(sel, block)
    out = np.empty(sel.shape, dtype=cube.grid.dtype)
    execute_cells(cube, route, out)
    return out


def read_points(cube: Cube, pts: Points, route: Route | None = None) -> np.ndarray:
    """Read a pointwise selection along its route; see :func:`read_outer`.

    ``route`` comes from :func:`~rumi_xarray.backend.route.route_points`
    (``commit=True``), or is decided now. Returns ``pts.out_shape``.
    """
    if route is None:
        route = route_points(cube, pts, commit=True, progress=bars.sliced_reads())
    out = np.empty(pts.gathered_shape, dtype=cube.grid.dtype)
    execute_cells(cube, route, out)
    return pts.arrange(out)
