"""Running ingest tasks: on a dask.distributed cluster, in local processes, or here.

One task per output. With a distributed client, tasks are submitted with
``retries`` (a task whose worker died is rescheduled by the scheduler, as
always in dask.distributed). Locally, a process pool runs them, its workers
forked from a ``forkserver`` that imported the task's modules once (xarray,
rioxarray, librumi's binding): starting a worker costs a fork, not an
interpreter start and its imports, and no worker inherits the threads of
this process (librumi's and GDAL's make a plain ``fork`` unsafe). A pool
broken by a killed worker is replaced and its unfinished tasks resubmitted.
Outcomes are handed to ``on_done`` in the client as they finish, so the
catalog grows while the run goes on.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from rumi_xarray import progress as progress_bars
from rumi_xarray.ingestion.plan import Task
from rumi_xarray.ingestion.task import Outcome, run_task


def active_client(client: Any) -> Any:
    """Return ``client``, else the active dask.distributed client, else None.

    Parameters
    ----------
    client : distributed.Client or str, optional
        A client, or a scheduler's address (``tcp://host:8786``) to connect to.

    Returns
    -------
    distributed.Client or None
    """
    if isinstance(client, str):
        from distributed import Client

        return Client(client)
    if client is not None:
        return client
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:  # no client in this process
        return None


def failed(task: Task, exc: BaseException) -> Outcome:
    """Return the outcome of a task that raised ``exc`` (after its retries)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return Outcome(task.output, task.key, None, 0, 0, 0.0, None,
                   f"{type(exc).__name__}: {text}")


def run(tasks: Sequence[Task], on_done: Callable[[Outcome], None], *, client: Any = None,
        max_workers: int | None = None, retries: int = 2, verify: bool = False,
        show_progress: bool | None = None) -> None:
    """Run ``tasks``, calling ``on_done`` in this process with each outcome as it arrives.

    Parameters
    ----------
    tasks : sequence of Task
    on_done : callable
        Called with every :class:`Outcome`, failed ones included.
    client : distributed.Client or str, optional
        Run on this cluster, or the scheduler at this address (else the active
        client, else local processes).
    max_workers : int, optional
        Local processes; ``0`` runs every task in this process, one after
        another (for debugging). Default: the machine's cores.
    retries : int, default 2
        Further attempts of a failed task.
    verify : bool, default False
        Tasks read their outputs back and compare (see :func:`run_task`).
    show_progress : bool, optional
        Draw a progress bar (by default in terminals and notebooks).
    """
    if not tasks:
        return
    with progress_bars.bar(len(tasks), "ingesting", unit="file",
                           show=show_progress) as advance:
        def done(outcome: Outcome) -> None:
            on_done(outcome)
            advance(1)

        cluster = active_client(client)
        if cluster is not None:
            try:
                _distributed(cluster, tasks, done, retries, verify)
            finally:
                if isinstance(client, str):  # connected here: closed here
                    cluster.close()
        elif max_workers == 0:
            for task in tasks:
                done(_attempts(task, verify, retries))
        else:
            _processes(tasks, done, max_workers, retries, verify)


def _attempts(task: Task, verify: bool, retries: int) -> Outcome:
    error: BaseException | None = None
    for _ in range(retries + 1):
        try:
            return run_task(task, verify)
        except Exception as exc:
            error = exc
    assert error is not None
    return failed(task, error)


def _distributed(client: Any, tasks: Sequence[Task], done: Callable[[Outcome], None],
                 retries: int, verify: bool) -> None:
    from distributed import as_completed

    futures = {}
    for task in tasks:
        future = client.submit(run_task, task, verify, retries=retries, pure=False,
                               key=f"rumi-ingest-{task.name}-{task.key[:16]}")
        futures[future.key] = (future, task)
    for future in as_completed([f for f, _ in futures.values()]):
        task = futures[future.key][1]
        try:
            outcome = future.result()
        except Exception as exc:
            outcome = failed(task, exc)
        done(outcome)
        future.release()


def _processes(tasks: Sequence[Task], done: Callable[[Outcome], None],
               max_workers: int | None, retries: int, verify: bool) -> None:
    attempts = dict.fromkeys(range(len(tasks)), 0)
    pending = list(range(len(tasks)))
    while pending:
        with ProcessPoolExecutor(max_workers=max_workers, mp_context=_context()) as pool:
            running: dict[Future[Outcome], int] = {}
            for i in pending:
                attempts[i] += 1
                running[pool.submit(run_task, tasks[i], verify)] = i
            pending = []
            broken = False
            while running:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    i = running.pop(future)
                    try:
                        done(future.result())
                    except BrokenProcessPool as exc:
                        broken = True
                        _again(i, exc, attempts, retries, pending, tasks, done)
                    except Exception as exc:
                        if attempts[i] <= retries:
                            attempts[i] += 1
                            running[pool.submit(run_task, tasks[i], verify)] = i
                        else:
                            done(failed(tasks[i], exc))
                if broken:  # a killed worker: every task still running is lost with it
                    for future, i in running.items():
                        future.cancel()
                        _again(i, BrokenProcessPool(traceback.format_exc(limit=0)),
                               attempts, retries, pending, tasks, done)
                    running = {}


#: Modules the fork server imports once, so each worker starts with them loaded (a
#: worker's first task otherwise spent about 1.3 s importing them, measured: dask's
#: first compute imports distributed when it is installed, and librumi's and geozl's
#: bindings parse their C declarations). Importing them starts no thread, so forking
#: after it is safe; the fork server skips a module that is not installed.
PRELOAD = ["rumi_xarray.ingestion.task", "rumi_xarray.write.to_rumi",
           "rumi_xarray.write.batches", "rumi_xarray.write.sources",
           "rumi_xarray.catalogs.table", "rumi_xarray.native.reads",
           "rumi_xarray.native.binding", "rumi", "geozl", "rioxarray", "rasterio.enums",
           "distributed"]


def _context() -> multiprocessing.context.BaseContext:
    """Return the start method of local workers: a preloaded fork server where there is one.

    The fork server is a fresh process started once (no threads of this one),
    so forking from it is safe; platforms without it (Windows) spawn.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _again(i: int, exc: BaseException, attempts: dict[int, int], retries: int,
           pending: list[int], tasks: Sequence[Task], done: Callable[[Outcome], None]) -> None:
    if attempts[i] <= retries:
        pending.append(i)
    else:
        done(failed(tasks[i], exc))
