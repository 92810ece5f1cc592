"""Async loads: librumi reads off the event loop, loads awaited together batched.

librumi is synchronous (it releases the GIL while it reads), so an
``await da.load_async()`` runs the read in the event loop's default executor.
Loads that arrive together -- ``asyncio.gather`` of several ``load_async``
calls -- are collected for as long as new ones keep arriving in consecutive
loop iterations (at most a few), then served in ONE worker job: the window
reads of the same cube are batched together (:func:`planning.batch_requests`), so equal
windows of one file or of a catalog's scenes share one ``read_many`` and
windows of one scene share one call across their time steps. Other reads
(scattered, points, cached) run as the synchronous path would.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import defaultdict
from typing import Any

import numpy as np

from rumi_xarray import progress as bars
from rumi_xarray.backend import execute
from rumi_xarray.backend.route import window_assembly
from rumi_xarray.model import planning

#: Loop iterations a batch waits for more loads to join, at most.
_DEFER = 3

Outcome = tuple[bool, Any]  # (True, result) or (False, exception)


class _Batcher:
    """Collects the loads of one event loop and serves them in worker jobs."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: list[tuple[Any, Any, asyncio.Future[np.ndarray]]] = []
        self.scheduled = False
        self.seen = 0
        self.deferred = 0

    def submit(self, array: Any, key: Any) -> asyncio.Future[np.ndarray]:
        future: asyncio.Future[np.ndarray] = self.loop.create_future()
        self.pending.append((array, key, future))
        if not self.scheduled:
            self.scheduled, self.seen, self.deferred = True, 0, 0
            self.loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        # xarray reaches the backend through nested gathers, so loads started
        # together arrive over a few iterations: wait while more keep coming.
        if len(self.pending) != self.seen and self.deferred < _DEFER:
            self.seen = len(self.pending)
            self.deferred += 1
            self.loop.call_soon(self._flush)
            return
        batch, self.pending, self.scheduled = self.pending, [], False
        work = self.loop.run_in_executor(None, serve, [(a, k) for a, k, _ in batch])
        futures = [f for _, _, f in batch]

        def deliver(done: asyncio.Future[list[Outcome]]) -> None:
            if done.cancelled() or done.exception() is not None:
                error = done.exception() if not done.cancelled() else asyncio.CancelledError()
                outcomes: list[Outcome] = [(False, error)] * len(futures)
            else:
                outcomes = done.result()
            for future, (ok, value) in zip(futures, outcomes, strict=True):
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

        work.add_done_callback(deliver)


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = (
    weakref.WeakKeyDictionary())


async def submit(array: Any, key: Any) -> np.ndarray:
    """Read ``array[key]`` in a worker thread, batched with loads awaited alongside.

    Parameters
    ----------
    array : RumiBackendArray
    key : ExplicitIndexer

    Returns
    -------
    numpy.ndarray
    """
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = _Batcher(loop)
    return await batcher.submit(array, key)


def serve(requests: list[tuple[Any, Any]]) -> list[Outcome]:
    """Serve a batch of ``(backend array, key)`` loads (runs in a worker thread).

    Window reads of the same cube are batched and read together; everything
    else is read as ``array[key]`` would.

    Parameters
    ----------
    requests : list of (RumiBackendArray, ExplicitIndexer)

    Returns
    -------
    list of (bool, object)
        Per request, ``(True, result)`` or ``(False, exception)``.
    """
    outcomes: list[Outcome | None] = [None] * len(requests)
    windows: dict[int, list[tuple[int, Any, planning.Request]]] = defaultdict(list)
    cubes: dict[int, Any] = {}
    for i, (array, key) in enumerate(requests):
        try:
            read = array.lazy_read(key)
            route = read.route(commit=True, progress=bars.enabled())
            if route is not None and route.direct is not None and read.outer is not None:
                group = _cube_key(cubes, read.cube)
                windows[group].append((i, read, read.outer.window()))
            else:
                outcomes[i] = (True, read.run(route))
        except Exception as exc:  # delivered to that load's awaiter
            outcomes[i] = (False, exc)
    for group, members in windows.items():
        _serve_windows(cubes[group], members, outcomes)
    assert all(o is not None for o in outcomes)
    return outcomes  # type: ignore[return-value]


def _cube_key(cubes: dict[int, Any], cube: Any) -> int:
    """Return the group of equal cubes ``cube`` belongs to (arrays opened separately)."""
    for group, known in cubes.items():
        if known is cube or known == cube:
            return group
    cubes[len(cubes)] = cube
    return len(cubes) - 1


def _serve_windows(cube: Any, members: list[tuple[int, Any, planning.Request]],
                   outcomes: list[Outcome | None]) -> None:
    """Read the windows of one cube with the fewest native calls."""
    requests = [request for _, _, request in members]
    assembly = (window_assembly(cube, requests[0]) if len(requests) == 1
                else planning.batch_requests(cube, requests))
    try:
        # No bar here: one worker job serves many loads, each call whole.
        results = [execute.run_call(cube, call, progress=False) for call in assembly.calls]
        for (i, read, request), parts in zip(members, assembly.parts, strict=True):
            block = planning.assemble(request, parts, assembly.calls, results, cube.grid.dtype)
            outcomes[i] = (True, read.finish_window(block))
    except Exception as exc:
        if len(members) == 1:
            outcomes[members[0][0]] = (False, exc)
            return
        # A shared call failed: read each window alone, so every load gets
        # its own result or the error that names its own file and selection.
        for i, read, request in members:
            try:
                block = execute.run_assembly(cube, window_assembly(cube, request), request,
                                             progress=bars.enabled())
                outcomes[i] = (True, read.finish_window(block))
            except Exception as exc:
                outcomes[i] = (False, exc)

