"""Progress bars for long operations (writes, conversions, catalogs, large reads).

Shown by default in terminals and notebooks (``tqdm.auto`` draws a widget in
Jupyter), never in pipes or logs; ``rx.set_options(progress=True/False)`` or
``RUMI_XARRAY_PROGRESS`` decide instead.

Bars advance as work finishes, unit by unit (a frame compressed, a file
catalogued, a slice of a large read decoded), never from 0 straight to 100 %.
A large lazy read is one native call, which reports nothing until it
returns: while bars are shown, the read path
(:func:`rumi_xarray.backend.execute.run_call`) runs a call of more than
:data:`~rumi_xarray.model.planning.READ_BAR_BYTES` as the slices of
:func:`~rumi_xarray.model.planning.split_call`, which share no frame, and
advances the bar after each slice.

Bars that are off still report through the package logger (``rumi_xarray``,
:data:`LOG_EVERY` of the way at ``INFO``), so a long write in a pipe or a
batch job shows it is moving to anyone who turns logging on
(``logging.basicConfig(level="INFO")``).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, as_completed
from contextlib import contextmanager
from typing import TypeVar

from rumi_xarray import options

#: Bars log a line at INFO each time this fraction of the total is done.
LOG_EVERY = 0.1

LOGGER = logging.getLogger("rumi_xarray")

T = TypeVar("T")
R = TypeVar("R")


def in_notebook() -> bool:
    """Return whether this process is a Jupyter kernel."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except AttributeError:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def enabled() -> bool:
    """Return whether progress bars are shown now.

    Returns
    -------
    bool
        The ``progress`` option when set, else whether standard error is a
        terminal or this is a notebook.
    """
    chosen = options.option("progress")
    if chosen is not None:
        return bool(chosen)
    try:
        terminal = bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        terminal = False
    return terminal or in_notebook()


@contextmanager
def bar(total: int, desc: str, unit: str = "it", show: bool | None = None,
        unit_scale: bool = False) -> Iterator[Callable[[int], None]]:
    """Yield a function that advances a progress bar by ``n``.

    Parameters
    ----------
    total : int
    desc : str
    unit : str
    show : bool, optional
        Override :func:`enabled`.
    unit_scale : bool, default False
        Show totals with SI prefixes (for bytes).

    Yields
    ------
    callable
    """
    log = _Log(total, desc, unit)
    if not (enabled() if show is None else show):
        yield log
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
              leave=False, unit_scale=unit_scale, unit_divisor=1024 if unit_scale else 1000
              ) as progress:
        def advance(n: int) -> None:
            progress.update(n)
            log(n)

        yield advance


class _Log:
    """Log progress at INFO through :data:`LOGGER` every :data:`LOG_EVERY` of ``total``.

    Thread-safe: dask tasks advance bars from worker threads.
    """

    def __init__(self, total: int, desc: str, unit: str) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.done = 0
        self.logged = 0
        self.start = time.perf_counter()
        self._lock = threading.Lock()

    def __call__(self, n: int) -> None:
        if n <= 0 or self.total <= 0 or not LOGGER.isEnabledFor(logging.INFO):
            return
        with self._lock:
            self.done += n
            step = max(1, int(self.total * LOG_EVERY))
            if self.done - self.logged < step and self.done < self.total:
                return
            self.logged = self.done
            done = self.done
        LOGGER.info("%s: %d/%d %ss (%d%%) in %.1f s", self.desc, done, self.total,
                    self.unit, 100 * done // self.total, time.perf_counter() - self.start)


def progress_map(pool: Executor, func: Callable[[T], R], items: Iterable[T], desc: str,
                 unit: str = "it") -> list[R]:
    """Map ``func`` over ``items`` in ``pool``, in order, with a progress bar.

    Parameters
    ----------
    pool : concurrent.futures.Executor
    func : callable
    items : iterable
    desc, unit : str

    Returns
    -------
    list
    """
    items = list(items)
    futures = [pool.submit(func, item) for item in items]
    with bar(len(futures), desc, unit) as advance:
        # Advance as each item finishes, whatever its position: a slow first
        # item must not hold the bar at 0 while the others are done.
        for future in as_completed(futures):
            future.result()
            advance(1)
    return [future.result() for future in futures]
