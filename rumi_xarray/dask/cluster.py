"""What a process learns about the dask worker it runs in (threads, memory limit).

Asked only when a process sizes its own resources (librumi's thread pool, the
tile cache), never from graph code: a task runs the same wherever it lands.
"""

from __future__ import annotations

import os
import sys


def _worker() -> object | None:
    """Return the ``distributed`` worker running this process, if any.

    ``get_worker()`` knows the worker only inside its tasks; ``client.run``
    (``client.run(rx.cache_info)``, ``client.run(rx.clear_cache)``) runs
    elsewhere on the worker and may be the first to size the tile cache, so
    the process's workers are asked next. Several workers in one process
    (``LocalCluster(processes=False)``) share its cache: the one with the
    smallest memory limit is returned.
    """
    if "distributed" not in sys.modules:
        return None  # not imported: this process is no worker
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        pass
    try:
        from distributed.worker import Worker
    except ImportError:
        return None
    gone = ("closing", "closed", "failed")
    alive = [w for w in list(getattr(Worker, "_instances", ()))
             if getattr(getattr(w, "status", None), "name", "closed") not in gone]
    if not alive:
        return None
    return min(alive, key=lambda w: _limit(w) or float("inf"))


def _limit(worker: object) -> int | None:
    manager = getattr(worker, "memory_manager", None)
    limit = getattr(manager, "memory_limit", None)
    return int(limit) if limit else None


def worker_threads() -> int:
    """Return how many threads this process's dask worker runs tasks on.

    The ``distributed`` worker's thread count when this process is one, else
    dask's ``num_workers`` setting, else the CPU count.

    Returns
    -------
    int
    """
    worker = _worker()
    if worker is not None:
        state = getattr(worker, "state", None)
        threads = getattr(state, "nthreads", None) or getattr(worker, "nthreads", None)
        if threads:
            return max(1, int(threads))
    configured = None
    if "dask" in sys.modules:
        import dask

        configured = dask.config.get("num_workers", None)
    return max(1, int(configured or os.cpu_count() or 1))


def worker_memory_limit() -> int | None:
    """Return this process's dask worker memory limit in bytes, if it has one.

    Returns
    -------
    int or None
    """
    worker = _worker()
    return None if worker is None else _limit(worker)
