"""Chunk policy: how rumi_xarray chooses read groups and dask chunks, in one place.

A new chunking rule is made here and nowhere else. Every path that chunks
Rumi data asks this module:

- **Read-group size** (:func:`group_bytes`): the ``group_bytes`` option, else
  16 MiB under dask's array query planning (said once with a warning), else
  dask's ``array.chunk-size``, else 128 MiB.
- **Read groups** (:func:`read_group`, :func:`preferred_chunks`): whole
  frames, grown in the order of their bytes in the file; a read group is
  ``encoding["preferred_chunks"]`` of every variable ``xr.open_dataset`` and
  the catalogs build, and one native ``read_many`` call.
- **open_dataset-compatible chunks** (:func:`open_chunks`,
  :func:`chunk_like_open_dataset`): cubes rumi_xarray builds itself
  (catalogs, STAC over one grid) are chunked with ``xr.open_dataset``'s rules
  from the preferred chunks, so ``chunks={}`` means one read group per chunk
  on every path.
- **Frame alignment** (:func:`frame_aligned`): dask's ``"auto"`` sizes can
  split frames (its estimate starts from the median block, which a partial
  edge block drags below a frame when a dimension has two blocks, e.g. 300
  rows of 256-row tiles give 226 + 74); they are moved to the nearest frame
  boundary, so a chunk never decodes a frame that its neighbour decodes again.
- **STAC output chunks** (:func:`stac_output_chunks`): the chunks of a load
  across grids, whose output grid has no frames of its own.
- **Write blocks** (:func:`write_chunks`, :func:`whole_frame_blocks`): input
  that is not dask yet is chunked in blocks of whole frames at least
  :data:`WRITE_BLOCK_PIXELS` on a side; a dask array being written whose
  chunks split frames is rechunked to the frame multiple nearest its first
  chunk.

What dask is configured to do (its chunk size, query planning) are facts read
by :mod:`rumi_xarray.dask.config`; the frame grid itself is
:mod:`rumi_xarray.model.grid` (pure geometry).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import xarray as xr
from dask.array.core import normalize_chunks

from rumi_xarray import options
from rumi_xarray.dask import config
from rumi_xarray.errors import RumiCatalogError, user_stacklevel
from rumi_xarray.model.cube import Cube, RaggedSteps, UniformSteps
from rumi_xarray.model.grid import CUBE_DIMS, Grid

#: Read-group size when neither the option nor dask's configuration says.
DEFAULT_GROUP_BYTES = 128 * 2**20
#: Under dask's array query planning a selection reads every chunk it touches
#: whole (no slice reaches the read), so read groups default to less.
QUERY_PLANNING_GROUP_BYTES = 16 * 2**20
#: Side of the square spatial chunks of a STAC load's output, in pixels.
SPATIAL_STEP = 256

_warned_query_planning = False

#: Chunks along ``(time, band, y, x)``.
Chunks4 = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


# ---------------------------------------------------------------------------
# The size of a read group


def group_bytes() -> int:
    """Return the decoded bytes of one read group (the preferred dask chunk).

    Returns
    -------
    int
        The ``group_bytes`` option, else 16 MiB under dask's array query
        planning (warned once), else dask's ``array.chunk-size`` (when dask
        is in use), else 128 MiB.
    """
    chosen = options.option("group_bytes")
    if chosen is not None:
        return int(chosen)
    if config.query_planning():
        _warn_query_planning()
        return QUERY_PLANNING_GROUP_BYTES
    configured = config.chunk_size()
    return DEFAULT_GROUP_BYTES if configured is None else configured


def _warn_query_planning() -> None:
    global _warned_query_planning
    if _warned_query_planning:
        return
    _warned_query_planning = True
    warnings.warn(
        "dask's array query planning is on: it does not pass a selection down to the "
        "read of a chunk, so every chunk a computation touches is read whole (one native "
        f"call each). rumi_xarray therefore uses read groups of "
        f"{QUERY_PLANNING_GROUP_BYTES // 2**20} MiB instead of dask's chunk size; "
        "rx.set_options(group_bytes=...) chooses another size." + _values_caveat(),
        UserWarning, stacklevel=user_stacklevel())


def _values_caveat() -> str:
    """Say so when this dask's query-planning arrays do not convert to numpy."""
    if config.converts_to_numpy():
        return ""
    return (" In this mode dask arrays lack __array__ (dask/dask#11922): .values and "
            "numpy.asarray return an object array, so use .compute() or .load().")


# ---------------------------------------------------------------------------
# Read groups of a Rumi cube


def read_group(grid: Grid, steps: int, target_bytes: int, *, one_band: bool = False
               ) -> tuple[int, int, int, int]:
    """Return the ``(time, band, y, x)`` shape of one read group.

    A read group is whole frames, as many as fit in ``target_bytes`` decoded,
    grown in the order that keeps the bytes one native call fetches in the
    fewest byte ranges: in a Rumi file the frames of a tile cell (every time
    step and band it holds) are adjacent and cells follow in row-major order.
    So: every band of a cell, then the scene's time steps (a divisor of them,
    so a group never needs two calls), then more scenes of a catalog, then
    tile columns up to the full width (a row of cells is one range), then rows
    of cells. Time comes before space in catalogs too: a reduction over time
    (mean, median, composite) then completes inside each chunk instead of
    combining one partial result per scene, which measured 2.5x faster for a
    time mean of 12 scenes (``benchmarks/results/latest-catalog-exp.md``) and
    is what ``median("time")`` needs. Scenes are added while a full row of
    cells of each still fits, so a scene's share of a group is one byte range
    and a full load costs a request per scene per group of rows, not one per
    scene.

    Parameters
    ----------
    grid : Grid
        Geometry of every scene.
    steps : int
        Time steps of the cube (scenes x steps per scene).
    target_bytes : int
        Decoded bytes to aim for; a group is never smaller than one frame.
    one_band : bool, default False
        The variable holds one band (``band_as_variable=True``).

    Returns
    -------
    tuple of int
    """
    itemsize = grid.dtype.itemsize
    ft, fb = grid.time_frame, 1 if one_band else grid.band_frame
    bands = 1 if one_band else grid.bands
    size = [ft, fb, min(grid.tile_height, grid.height), min(grid.tile_width, grid.width)]

    def fits(t: int, b: int, y: int, x: int) -> bool:
        return t * b * y * x * itemsize <= target_bytes

    # Bands: any multiple of the frame's bands.
    size[1] = _grow(fb, bands, lambda n: fits(size[0], n, size[2], size[3]))
    # Time within a scene: multiples of the frame's steps that divide its steps.
    per_scene = grid.time_count
    within = [n for n in range(ft, per_scene + 1, ft) if per_scene % n == 0 and n <= steps]
    fitting = [n for n in within if fits(n, size[1], size[2], size[3])]
    size[0] = max(fitting, default=ft)
    # More scenes of a catalog, once every step of one scene is in, while a full
    # row of cells of each still fits: a scene's share of a group stays one byte
    # range, so a full load costs a request per file per group of rows.
    if size[0] == per_scene:
        # The largest multiple of a scene's steps that fits (computed, not searched: a
        # catalog of a million scenes would otherwise try every count).
        per_step = size[1] * size[2] * grid.width * itemsize
        most = min(steps, target_bytes // per_step) // per_scene * per_scene
        if most >= 2 * per_scene:
            size[0] = most
    # Columns of cells up to the full width, then rows of cells.
    size[3] = _grow(grid.tile_width, grid.width, lambda n: fits(size[0], size[1], size[2], n))
    if size[3] >= grid.width:
        size[2] = _grow(grid.tile_height, grid.height,
                        lambda n: fits(size[0], size[1], n, size[3]))
    return (min(size[0], steps), size[1], size[2], size[3])


def _grow(step: int, limit: int, fits: Callable[[int], bool]) -> int:
    """Return the largest multiple of ``step`` (capped at ``limit``) that fits."""
    if step >= limit:
        return limit
    n = max(1, math.floor(limit / step))
    best = step
    lo, hi = 1, n
    while lo <= hi:  # fits() is monotonic in the size
        mid = (lo + hi) // 2
        if fits(mid * step):
            best, lo = mid * step, mid + 1
        else:
            hi = mid - 1
    if best == n * step and limit % step and fits(limit):
        return limit
    return best


def preferred_chunks(cube: Cube, dims: tuple[str, ...]) -> dict[str, int]:
    """Return one read group per dimension: xarray's ``preferred_chunks``.

    ``chunks={}`` gives exactly these chunks, ``chunks="auto"`` multiples of
    them; either way every dask chunk is whole frames read by one native call.

    Parameters
    ----------
    cube : Cube
    dims : tuple of str
        The variable's dimensions; without ``band`` it holds one band.

    Returns
    -------
    dict
    """
    if cube.ragged:
        return _ragged_chunks(cube, dims)
    group = read_group(cube.grid, len(cube.steps), group_bytes(),
                       one_band="band" not in dims)
    return {d: n for d, n in zip(CUBE_DIMS, group, strict=True) if d in dims}


def scene_steps(cube: Cube) -> tuple[int, ...]:
    """Return how many time steps each scene of a cube contributes, in cube order.

    Parameters
    ----------
    cube : Cube

    Returns
    -------
    tuple of int
    """
    if isinstance(cube.steps, RaggedSteps):
        return tuple(int(n) for n in cube.steps.counts)
    if isinstance(cube.steps, UniformSteps):
        return (cube.steps.per_scene,) * cube.steps.scenes
    scenes = np.asarray(cube.steps, dtype=np.int64).reshape(-1, 2)[:, 0]
    return tuple(int(n) for n in np.bincount(scenes, minlength=len(cube.scenes)))


def _ragged_chunks(cube: Cube, dims: tuple[str, ...]) -> dict[str, Any]:
    """Return the read groups of a cube whose scenes hold different numbers of steps.

    Along time, one group per scene (its own frames: scenes of different
    layouts are never one native call); bands and space as for the scene
    with the most steps, so no group exceeds the read-group size by more
    than one scene's frames do.
    """
    counts = scene_steps(cube)
    longest = max(counts)
    grid = replace(cube.grid, time_count=longest)
    group = read_group(grid, longest, group_bytes(), one_band="band" not in dims)
    sizes: dict[str, Any] = {"time": counts, "band": group[1], "y": group[2], "x": group[3]}
    return {d: sizes[d] for d in CUBE_DIMS if d in dims}


# ---------------------------------------------------------------------------
# Chunks as xr.open_dataset(chunks=...) gives them


def open_chunks(ds: xr.Dataset, chunks: Any) -> dict[Hashable, tuple[int, ...]]:
    """Return the chunks ``xr.open_dataset`` would give ``ds``'s data variables.

    ``xr.open_dataset`` turns ``chunks`` into dask chunks through each
    variable's ``encoding["preferred_chunks"]`` (the read groups);
    ``Dataset.chunk`` does not look at them, so cubes rumi_xarray builds
    itself are chunked through this.

    Parameters
    ----------
    ds : xarray.Dataset
        Lazily indexed, with ``preferred_chunks`` in its variables' encoding.
    chunks : dict, int, str or tuple
        As for :func:`xarray.open_dataset`: ``{}`` the preferred chunks,
        ``"auto"`` multiples of them, ints or a mapping per dimension.

    Returns
    -------
    dict
        Normalized chunks per dimension.
    """
    out: dict[Hashable, tuple[int, ...]] = {}
    for var in ds.data_vars.values():
        preferred: Mapping[Hashable, Any] = var.encoding.get("preferred_chunks", {})
        dims = var.dims
        wanted = dict.fromkeys(dims, chunks) if not isinstance(chunks, Mapping) else chunks
        shape = tuple(wanted.get(d) or preferred.get(d, n)
                      for d, n in zip(dims, var.shape, strict=True))
        previous = tuple(preferred.get(d, n) for d, n in zip(dims, var.shape, strict=True))
        normalized = normalize_chunks(shape, var.shape, dtype=var.dtype,
                                      previous_chunks=previous)
        frame: Mapping[Hashable, int] = var.encoding.get("rumi_frame_shape", {})
        for dim, blocks, size in zip(dims, normalized, var.shape, strict=True):
            if wanted.get(dim) == "auto" and isinstance(preferred.get(dim), tuple):
                # Scenes of different steps: "auto" blocks end where scenes end.
                edges = np.cumsum(preferred[dim])[:-1].tolist()
                blocks = aligned(blocks, edges, size)
            elif wanted.get(dim) == "auto" and frame.get(dim):
                blocks = frame_aligned(blocks, int(frame[dim]), size)
            out.setdefault(dim, tuple(int(b) for b in blocks))
    return out


def frame_aligned(blocks: tuple[int, ...], frame: int, size: int) -> tuple[int, ...]:
    """Return ``blocks`` with every inner boundary moved to the nearest frame boundary.

    Parameters
    ----------
    blocks : tuple of int
        Block sizes along one dimension (summing to ``size``).
    frame : int
        Frame extent along that dimension.
    size : int

    Returns
    -------
    tuple of int
        Blocks of whole frames (the last one may be a partial edge frame),
        never empty; blocks that would shrink to nothing are merged.
    """
    bounds: list[int] = []
    for edge in np.cumsum(blocks)[:-1].tolist():
        snapped = max(frame, round(edge / frame) * frame)
        if snapped < size and (not bounds or snapped > bounds[-1]):
            bounds.append(snapped)
    edges = [0, *bounds, size]
    return tuple(int(step) for step in np.diff(edges))


def aligned(blocks: tuple[int, ...], edges: list[int], size: int) -> tuple[int, ...]:
    """Return ``blocks`` with every inner boundary moved to the nearest of ``edges``.

    Parameters
    ----------
    blocks : tuple of int
        Block sizes along one dimension (summing to ``size``).
    edges : list of int
        The allowed inner boundaries, increasing (for instance where each
        scene's time steps end).
    size : int

    Returns
    -------
    tuple of int
        Blocks starting and ending on ``edges``; blocks that would shrink to
        nothing are merged.

    Examples
    --------
    >>> aligned((4, 5), [3, 8], 9)
    (3, 6)
    """
    if not edges:
        return (size,)
    allowed = np.asarray(edges, dtype=np.int64)
    bounds: list[int] = []
    for edge in np.cumsum(blocks)[:-1].tolist():
        snapped = int(allowed[np.argmin(np.abs(allowed - edge))])
        if not bounds or snapped > bounds[-1]:
            bounds.append(snapped)
    return tuple(int(step) for step in np.diff([0, *bounds, size]))


def chunk_like_open_dataset(ds: xr.Dataset, chunks: Any) -> xr.Dataset:
    """Return ``ds`` chunked as ``xr.open_dataset(..., chunks=chunks)`` would chunk it.

    Parameters
    ----------
    ds : xarray.Dataset
    chunks : dict, int, str or tuple

    Returns
    -------
    xarray.Dataset
    """
    return ds.chunk(open_chunks(ds, chunks))


# ---------------------------------------------------------------------------
# The output chunks of a STAC load across grids


def stac_output_chunks(chunks: Any, shape: tuple[int, int, int, int], itemsize: int, *,
                       target: int | None = None) -> Chunks4:
    """Return the output chunks of a STAC load along time, band, y and x.

    Dimensions the caller does not fix form a *read group* of at most
    ``target`` bytes: every band (one native call reads them together); the
    whole extent when it fits, else square tiles (multiples of 256 pixels);
    then as many time steps as fit, so a time series over a small area is
    one chunk (one native call per source group for all its scenes).

    Parameters
    ----------
    chunks : dict, int, str or None
        ``{}``, ``"auto"`` or None: read groups; an int: that size along
        time, y and x; a dict ``{"time": n, "band": n, "y": n, "x": n}``
        (``-1`` the whole dimension), missing ones sized as read groups.
        ``"band": 1`` reads each band in its own tasks.
    shape : (time, band, y, x)
    itemsize : int
    target : int, optional
        Decoded bytes of one read group; :func:`group_bytes` by default.

    Returns
    -------
    tuple of tuple of int

    Raises
    ------
    RumiCatalogError
        ``chunks`` is none of the above.
    """
    if target is None:
        target = group_bytes()
    nt, nb, ny, nx = shape
    wanted: dict[str, int | None] = {"time": None, "band": None, "y": None, "x": None}
    if isinstance(chunks, int) and not isinstance(chunks, bool):
        wanted = {"time": chunks, "band": None, "y": chunks, "x": chunks}
    elif isinstance(chunks, Mapping):
        for dim, value in chunks.items():
            if dim in ("latitude", "longitude"):
                dim = {"latitude": "y", "longitude": "x"}[dim]
            if dim not in wanted:
                continue
            wanted[dim] = None if value in (None, "auto") else int(value)
    elif not (chunks is None or chunks == "auto"):
        raise RumiCatalogError(f"chunks must be a dict, an int, 'auto' or None, got {chunks!r}")
    fixed = {d: (n if w == -1 else w) for (d, w), n in zip(wanted.items(), shape, strict=True)}
    band = fixed["band"] or nb
    per_pixel = max(1, band * itemsize)
    y, x = fixed["y"] or ny, fixed["x"] or nx
    if (fixed["y"] is None or fixed["x"] is None) and y * x * per_pixel > target:
        side = max(SPATIAL_STEP,
                   int(math.sqrt(target / per_pixel)) // SPATIAL_STEP * SPATIAL_STEP)
        y = fixed["y"] or min(ny, side)
        x = fixed["x"] or min(nx, side)
    time = fixed["time"] or max(1, min(nt, target // max(y * x * per_pixel, 1)))
    return (_split(nt, max(1, time)), _split(nb, max(1, band)), _split(ny, max(1, y)),
            _split(nx, max(1, x)))


def _split(n: int, size: int) -> tuple[int, ...]:
    """Return blocks of ``size`` covering ``n`` (a smaller last one); ``(0,)`` for none."""
    if n == 0:
        return (0,)
    full, rest = divmod(n, size)
    return (size,) * full + ((rest,) if rest else ())


def whole_frame_blocks(data: Any, frame_shape: tuple[int, int, int, int]) -> Any:
    """Return ``data`` with every chunk made of whole frames, for writing.

    The array itself when its chunk boundaries already fall on frame
    boundaries; otherwise a rechunk to the multiple of the frame extent
    nearest each axis's first chunk (at least one frame), so each block
    compresses into whole frames and no frame is split across tasks.

    Parameters
    ----------
    data : dask.array.Array
    frame_shape : tuple of int
        Extent of an interior frame along ``(t, b, y, x)``.

    Returns
    -------
    dask.array.Array
    """
    aligned = all(all(int(edge) % n == 0 for edge in np.cumsum(chunks)[:-1])
                  for chunks, n in zip(data.chunks, frame_shape, strict=True))
    if aligned:
        return data
    target = tuple(n * max(1, round(int(chunks[0]) / n))
                   for chunks, n in zip(data.chunks, frame_shape, strict=True))
    return data.rechunk(target)


#: Input that is not dask yet is chunked for writing in blocks of whole frames
#: at least this many pixels on a side, so small tiles do not make one dask
#: task (and one read of a lazily opened file) per frame.
WRITE_BLOCK_PIXELS = 256


def write_chunks(frame_axes: frozenset[str], tile_size: int,
                 min_side: int = WRITE_BLOCK_PIXELS) -> dict[str, int]:
    """Return the dask chunks, per standard dimension, that data is written in.

    Parameters
    ----------
    frame_axes : frozenset of str
        The axes (``"t"``, ``"b"``) one frame holds whole
        (:func:`rumi_xarray.native.frames.frame_axes`).
    tile_size : int
    min_side : int, default WRITE_BLOCK_PIXELS
        Smallest ``y``/``x`` chunk: 1 gives one frame per chunk.

    Returns
    -------
    dict
        ``time``/``band``: 1 when frames walk that axis, -1 (all) when a frame
        holds every step; ``y``/``x``: the smallest multiple of the tile size
        of at least ``min_side``.
    """
    side = tile_size * -(-max(1, min_side) // tile_size)
    return {"time": -1 if "t" in frame_axes else 1, "band": -1 if "b" in frame_axes else 1,
            "y": side, "x": side}
