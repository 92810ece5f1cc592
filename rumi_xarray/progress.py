"""Progress bars for long operations (writes, conversions, catalogs, large reads).

Shown by default in terminals and notebooks (``tqdm.auto`` draws a widget in
Jupyter), never in pipes or logs; ``rx.set_options(progress=True/False)`` or
``RUMI_XARRAY_PROGRESS`` decide instead.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any, TypeVar

from rumi_xarray import options

T = TypeVar("T")
R = TypeVar("R")


def in_notebook() -> bool:
    """Return whether this process is a Jupyter kernel."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()  # type: ignore[attr-defined]
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
def bar(total: int, desc: str, unit: str = "it", show: bool | None = None
        ) -> Iterator[Callable[[int], None]]:
    """Yield a function that advances a progress bar by ``n``.

    Parameters
    ----------
    total : int
    desc : str
    unit : str
    show : bool, optional
        Override :func:`enabled`.

    Yields
    ------
    callable
    """
    if not (enabled() if show is None else show):
        yield lambda n: None
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
              leave=False) as progress:
        yield progress.update


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
    out: list[Any] = []
    with bar(len(futures), desc, unit) as advance:
        for future in futures:
            out.append(future.result())
            advance(1)
    return out
