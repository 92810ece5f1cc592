"""A chip batch: which native calls read a batch of chips and where each chip lands.

A *chip* is ``size`` x ``size`` pixels of one cube time step, given by the
``(time, row, col)`` of its upper-left pixel. ``rumi.read_many`` takes one
time and band selection for all of its items and windows of one size, so a
batch is read by one call per distinct scene-local time step (a batch from
single-date scenes, whatever their number, is ONE call). When a frame holds
every time step of its tile (``t b h w`` layouts) reading all the needed steps
decodes no frame more, and the batch is one call again.

Chips that cross the raster's edge (``boundless=True``) are read as the
nearest window inside the raster (same size, so they stay in the batch's
call) and their overlap is placed into a filled chip; chips wholly outside
read nothing. Pure: no I/O, no librumi.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from rumi_xarray.errors import RumiSelectionError
from rumi_xarray.model.cube import Cube
from rumi_xarray.model.planning import Call


@dataclass(frozen=True)
class Placement:
    """Where one chip comes from: ``out[chip][:, oy:oy+h, ox:ox+w] = result[call][item, t]``.

    The source rectangle is ``[sy:sy+h, sx:sx+w]`` of the item's window.
    """

    chip: int
    call: int
    item: int
    t: int
    oy: int
    ox: int
    sy: int
    sx: int
    h: int
    w: int


@dataclass(frozen=True)
class ChipBatch:
    """The native calls of a batch and where every chip's pixels come from.

    Attributes
    ----------
    calls : tuple of Call
    placements : tuple of Placement
        One per chip that reads anything.
    direct : bool
        The batch is one call whose result, in chip order, *is* the output:
        no chip is clipped, every item has one time step.
    n : int
        Chips in the batch.
    size : int
    bands : tuple of int
    """

    calls: tuple[Call, ...]
    placements: tuple[Placement, ...]
    direct: bool
    n: int
    size: int
    bands: tuple[int, ...]


def as_starts(starts: object) -> np.ndarray:
    """Return chip starts as an ``(n, 3)`` int64 array.

    Parameters
    ----------
    starts : array-like
        ``(n, 3)`` integer ``(time, row, col)``; one ``(3,)`` start is one chip.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    RumiSelectionError
        Not integers, or not shaped ``(n, 3)``.
    """
    array = np.asarray(starts)
    if array.ndim == 1 and array.shape[0] == 3:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != 3:
        raise RumiSelectionError(
            f"chip starts must be an (n, 3) array of (time, row, col), got shape {array.shape}")
    if array.size and array.dtype.kind not in "iu":
        if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(
                array == np.round(array)):
            array = array.astype(np.int64)
        else:
            raise RumiSelectionError(
                f"chip starts must be integers (pixel and time positions), got {array.dtype}")
    return array.astype(np.int64, copy=False)


def batch_chips(cube: Cube, starts: np.ndarray, size: int, bands: tuple[int, ...], *,
               boundless: bool = False) -> ChipBatch:
    """Return the chip batch: the native calls that read these chips, and placements.

    Parameters
    ----------
    cube : Cube
    starts : numpy.ndarray
        ``(n, 3)`` cube ``(time, row, col)`` of each chip's upper-left pixel.
    size : int
        Chip height and width, in pixels.
    bands : tuple of int
        Cube band positions every chip reads, in output order.
    boundless : bool, default False
        Chips may cross the raster's edge (the caller fills what lies outside).

    Returns
    -------
    ChipBatch

    Raises
    ------
    RumiSelectionError
        A zero or negative size, no band, a band or time step out of range,
        or a chip crossing the edge without ``boundless``; the message names
        the chip and its scene.
    """
    g = cube.grid
    n_times, _, height, width = cube.shape
    given: object = size  # callers pass whatever users typed
    if not isinstance(given, (int, np.integer)) or isinstance(given, bool) or given < 1:
        raise RumiSelectionError(f"{cube.name}: chip size must be a positive integer, "
                                 f"got {size!r}")
    size = int(size)
    if not bands:
        raise RumiSelectionError(f"{cube.name}: a chip needs at least one band")
    bad = [b for b in bands if not 0 <= b < g.bands]
    if bad:
        raise RumiSelectionError(f"{cube.name}: band position(s) {bad} out of range for "
                                 f"{g.bands} band(s)")
    times = starts[:, 0]
    out_of_time = np.flatnonzero((times < 0) | (times >= n_times))
    if out_of_time.size:
        i = int(out_of_time[0])
        raise RumiSelectionError(
            f"{cube.name}: chip {i} starts at time {int(times[i])}, outside the cube's "
            f"{n_times} time step(s)")
    rows, cols = starts[:, 1], starts[:, 2]
    inside = (rows >= 0) & (cols >= 0) & (rows + size <= height) & (cols + size <= width)
    if not boundless and not inside.all():
        i = int(np.flatnonzero(~inside)[0])
        scene = cube.scenes[cube.steps[int(times[i])][0]]
        error = RumiSelectionError(
            f"{scene.describe()}: chip {i} at (time {int(times[i])}, row {int(rows[i])}, "
            f"col {int(cols[i])}) of {size}x{size} crosses the edge of the "
            f"{height}x{width} raster; pass boundless=True to fill what lies outside with "
            f"nodata")
        error.source, error.row = scene.name, scene.catalog_row
        error.selection = f"chip {i}: ({int(times[i])}, {int(rows[i])}, {int(cols[i])})"
        raise error

    # Every read window has one size: the chip, or the raster where it is smaller.
    rh, rw = min(size, height), min(size, width)
    # Key: the scene-local time steps of the call (all of them when frames hold every
    # step), and in a ragged cube the scene's layout (one read_many reads one layout).
    groups: dict[tuple[Any, ...], list[tuple[int, int, int, int]]] = defaultdict(list)
    reads: list[tuple[int, tuple[Any, ...], int, int, int, int, int, int, int, int, int]] = []
    for i in range(len(starts)):
        t, row, col = int(times[i]), int(rows[i]), int(cols[i])
        # Overlap of the chip with the raster.
        y0, y1 = max(row, 0), min(row + size, height)
        x0, x1 = max(col, 0), min(col + size, width)
        if y0 >= y1 or x0 >= x1:
            continue  # wholly outside: nothing to read
        scene_index, local = cube.steps[t]
        # The window inside the raster nearest the chip, holding its overlap.
        wy = min(max(row, 0), height - rh)
        wx = min(max(col, 0), width - rw)
        own = cube.scene_grid(scene_index)
        all_times = own.time_frame == own.time_count and own.time_count > 1
        key = (tuple(range(own.time_count)) if all_times else (local,),
               cube.layout(scene_index))
        groups[key].append((scene_index, wy, wx, i))
        reads.append((i, key, local, y0 - row, x0 - col, y0 - wy, x0 - wx, y1 - y0, x1 - x0,
                      wy, wx))

    calls: list[Call] = []
    item_of: dict[tuple[tuple[Any, ...], int], tuple[int, int]] = {}
    for key, members in groups.items():
        for k, (_, _, _, i) in enumerate(members):
            item_of[(key, i)] = (len(calls), k)
        calls.append(Call(scenes=tuple(m[0] for m in members),
                          rows=tuple(m[1] for m in members),
                          cols=tuple(m[2] for m in members),
                          times=key[0], bands=tuple(bands), height=rh, width=rw))
    placements = []
    for i, key, local, oy, ox, sy, sx, h, w, _, _ in reads:
        call, item = item_of[(key, i)]
        placements.append(Placement(chip=i, call=call, item=item, t=key[0].index(local),
                                    oy=oy, ox=ox, sy=sy, sx=sx, h=h, w=w))
    direct = (len(calls) == 1 and len(placements) == len(starts)
              and len(calls[0].times) == 1 and rh == size and rw == size
              and all(p.item == p.chip and p.h == size and p.w == size for p in placements))
    return ChipBatch(calls=tuple(calls), placements=tuple(placements), direct=direct,
                    n=len(starts), size=size, bands=tuple(bands))


def random_starts(rng: np.random.Generator, n: int, size: int, times: np.ndarray,
                  weights: np.ndarray | None, height: int, width: int) -> np.ndarray:
    """Draw ``n`` chip starts uniformly inside a raster, times by weight.

    Parameters
    ----------
    rng : numpy.random.Generator
    n, size : int
    times : numpy.ndarray
        Cube time positions to draw from.
    weights : numpy.ndarray or None
        Relative weight per entry of ``times``.
    height, width : int

    Returns
    -------
    numpy.ndarray
        ``(n, 3)`` int64.
    """
    if size > height or size > width:
        raise RumiSelectionError(f"a {size}x{size} chip does not fit in the {height}x{width} "
                                 f"raster")
    p = None
    if weights is not None:
        p = np.asarray(weights, dtype=np.float64)
        if p.shape != times.shape or not np.all(np.isfinite(p)) or (p < 0).any() or p.sum() <= 0:
            raise RumiSelectionError("time weights must be one finite, non-negative number per "
                                     "time step, not all zero")
        p = p / p.sum()
    t = rng.choice(times, size=n, p=p)
    r = rng.integers(0, height - size + 1, size=n)
    c = rng.integers(0, width - size + 1, size=n)
    return np.stack([t, r, c], axis=1).astype(np.int64)


def grid_starts(times: np.ndarray, size: int, stride: int, height: int, width: int
                ) -> np.ndarray:
    """Return the starts of chips tiling a raster with a stride, every time step.

    The last row and column of chips are moved back to end at the raster's
    edge, so every pixel is covered and no chip crosses the edge.

    Parameters
    ----------
    times : numpy.ndarray
    size, stride : int
    height, width : int

    Returns
    -------
    numpy.ndarray
        ``(n, 3)`` int64, time-major then row-major.
    """
    if stride < 1:
        raise RumiSelectionError(f"stride must be a positive integer, got {stride!r}")
    if size > height or size > width:
        raise RumiSelectionError(f"a {size}x{size} chip does not fit in the {height}x{width} "
                                 f"raster")

    def axis(extent: int) -> np.ndarray:
        steps = np.arange(0, extent - size + 1, stride)
        if steps[-1] != extent - size:
            steps = np.append(steps, extent - size)
        return steps

    t, r, c = np.meshgrid(times, axis(height), axis(width), indexing="ij")
    return np.stack([t.ravel(), r.ravel(), c.ravel()], axis=1).astype(np.int64)
