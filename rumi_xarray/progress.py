"""Progress bars for long operations (writes, conversions, catalogs, large reads).

Shown by default in terminals and notebooks (``tqdm.auto`` draws a widget in
Jupyter), never in pipes or logs; ``rx.set_options(progress=True/False)`` or
``RUMI_XARRAY_PROGRESS`` decide instead.

Bars advance as work finishes, unit by unit (a frame compressed, a file
catalogued, a slice of a large read decoded), never from 0 straight to 100 %.
A large lazy read is one native call, which reports nothing until it
returns: :func:`run` splits a read of more than :data:`READ_BAR_BYTES` into
slices along an axis whose frames are not shared between slices (scenes,
then time steps or bands that frames do not hold, then rows of tiles), so no
frame is decoded twice, and advances the bar after each slice.

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
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from rumi_xarray import options

if TYPE_CHECKING:
    import numpy as np

    from rumi_xarray.model.cube import Cube
    from rumi_xarray.model.planning import Call

#: Lazy reads decoding more than this many bytes show a bar (when bars are on).
READ_BAR_BYTES = 256 * 2**20
#: A large read is split in slices of at least this many decoded bytes...
READ_STEP_BYTES = 32 * 2**20
#: ... and in at most this many slices (each slice is one native call).
READ_MAX_STEPS = 64

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


# --- large lazy reads -----------------------------------------------------------


def read_bytes(cube: Cube, call: Call) -> int:
    """Return the decoded bytes of one planned native call.

    Parameters
    ----------
    cube : Cube
    call : Call

    Returns
    -------
    int
    """
    return len(call.scenes) * call.samples_per_item * int(cube.grid.dtype.itemsize)


def steps(cube: Cube, call: Call) -> list[Call]:
    """Return the native calls :func:`run` makes for ``call``.

    One call (``call`` itself) unless bars are shown and the read decodes
    more than :data:`READ_BAR_BYTES`; then slices of it that share no frame,
    so the total work is the same and the bar can advance after each.

    Parameters
    ----------
    cube : Cube
    call : Call

    Returns
    -------
    list of Call
    """
    total = read_bytes(cube, call)
    if total <= READ_BAR_BYTES or not enabled():
        return [call]
    wanted = max(2, min(READ_MAX_STEPS, total // READ_STEP_BYTES))
    g = cube.grid
    if len(call.scenes) > 1:
        return [replace(call, scenes=call.scenes[a:b], rows=call.rows[a:b],
                        cols=call.cols[a:b]) for a, b in _cuts(len(call.scenes), wanted)]
    if "t" in g.index_order and len(call.times) > 1:
        return [replace(call, times=call.times[a:b]) for a, b in _cuts(len(call.times), wanted)]
    if "b" in g.index_order and len(call.bands) > 1:
        return [replace(call, bands=call.bands[a:b]) for a, b in _cuts(len(call.bands), wanted)]
    # Rows of tiles: cut only where a tile row ends, so no frame is shared.
    top, tile = call.rows[0], g.tile_height
    edges = [top, *range((top // tile + 1) * tile, top + call.height, tile), top + call.height]
    rows = [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    groups = [rows[a:b] for a, b in _cuts(len(rows), wanted)]
    return [replace(call, rows=(group[0][0],), height=group[-1][1] - group[0][0])
            for group in groups]


def _cuts(n: int, parts: int) -> list[tuple[int, int]]:
    """Return ``min(n, parts)`` contiguous, nearly equal ``(start, stop)`` ranges of ``n``."""
    parts = max(1, min(n, parts))
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i + 1] > bounds[i]]


def run(cube: Cube, call: Call, out: np.ndarray | None = None) -> np.ndarray:
    """Run one planned native call, with a progress bar when it is large.

    Exactly ``rumi_xarray.native.reads.run(cube, call, out)`` for reads of
    :data:`READ_BAR_BYTES` or less, or when bars are off (pipes, logs,
    ``rx.set_options(progress=False)``). Larger reads run as the slices of
    :func:`steps`, each decoded straight into its part of the result (a
    slice of rows of a multi-plane read goes through a buffer of its own),
    and the bar advances by each slice's bytes.

    Parameters
    ----------
    cube : Cube
    call : Call
    out : numpy.ndarray, optional
        Contiguous ``(n_items, n_times, n_bands, height, width)`` destination.

    Returns
    -------
    numpy.ndarray
        ``(n_items, n_times, n_bands, height, width)``.
    """
    import numpy as np

    from rumi_xarray.native import reads

    parts = steps(cube, call)
    if len(parts) == 1:
        return reads.run(cube, call, out=out)
    shape = (len(call.scenes), len(call.times), len(call.bands), call.height, call.width)
    if out is None:
        out = np.empty(shape, dtype=cube.grid.dtype)
    item = time = band = row = 0
    with bar(read_bytes(cube, call), "reading", unit="B", unit_scale=True) as advance:
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
            advance(read_bytes(cube, part))
    return out
