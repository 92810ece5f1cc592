"""Native calls for block requests, how their results assemble, how a call splits.

A *request* is a block of the cube: time steps, bands and one window.
:func:`batch_requests` splits requests by scene, merges what different
requests need from the same scene window (so a pixel time series in one file
is one read of all its time steps, not one per step), and batches
equal-sized windows into ``read_many`` calls bounded by a decoded-bytes
budget: an :class:`Assembly`. It never asks for a (time, band, window) that
no request needs. :func:`split_call` is the one rule that cuts a large call
into slices for a progress bar (only with ``progress=True``). Pure: :mod:`rumi_xarray.native`
runs the calls.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rumi_xarray.model.cube import Cube

#: Budget that never splits a call: one request is one call when it can be.
UNBOUNDED = 2**62

#: Calls decoding more than this many bytes run in slices when a progress bar
#: is shown (:func:`split_call`), so the bar can advance...
READ_BAR_BYTES = 256 * 2**20
#: ... in slices of at least this many decoded bytes...
READ_STEP_BYTES = 32 * 2**20
#: ... and in at most this many slices (each slice is one native call).
READ_MAX_STEPS = 64


@dataclass(frozen=True)
class Block:
    """Time steps x bands x one window ``(row, col, height, width)``."""

    times: tuple[int, ...]
    bands: tuple[int, ...]
    row: int
    col: int
    height: int
    width: int

    def nbytes(self, itemsize: int) -> int:
        """Return the decoded size of the block's planes, in bytes."""
        return len(self.times) * len(self.bands) * self.height * self.width * itemsize


@dataclass(frozen=True)
class Request(Block):
    """One block of the cube to produce: cube time steps x bands x window."""


@dataclass(frozen=True)
class Call:
    """One native read: equal windows of several scenes, shared times/bands."""

    scenes: tuple[int, ...]
    rows: tuple[int, ...]
    cols: tuple[int, ...]
    times: tuple[int, ...]
    bands: tuple[int, ...]
    height: int
    width: int

    @property
    def samples_per_item(self) -> int:
        """Return the decoded size of one item, in samples."""
        return len(self.times) * len(self.bands) * self.height * self.width

    def nbytes(self, itemsize: int) -> int:
        """Return the decoded bytes of the whole call (every item)."""
        return len(self.scenes) * self.samples_per_item * itemsize

    def frames(self, cube: Cube) -> int:
        """Return the frames this call decodes."""
        # Every scene of a call shares one frame layout (read_many needs it).
        g = cube.scene_grid(self.scenes[0]) if self.scenes else cube.grid
        return sum(g.frames_touched(len(self.times), len(self.bands), r, c, self.height,
                                    self.width) for r, c in zip(self.rows, self.cols, strict=True))


@dataclass(frozen=True)
class Part:
    """Where one piece of a request's output comes from.

    ``out[t_out][:, b_out] = result_of_call[item][t_src][:, b_src]``.
    """

    call: int
    item: int
    t_out: tuple[int, ...]
    t_src: tuple[int, ...]
    b_out: tuple[int, ...]
    b_src: tuple[int, ...]


@dataclass(frozen=True)
class Assembly:
    """Calls to run and, per request, the parts that assemble its block."""

    calls: tuple[Call, ...]
    parts: tuple[tuple[Part, ...], ...]


def batch_requests(cube: Cube, requests: list[Request], budget: int = UNBOUNDED) -> Assembly:
    """Return the native calls that produce ``requests``, and how each assembles.

    Parameters
    ----------
    cube : Cube
    requests : list of Request
    budget : int
        Upper bound on the decoded bytes of one call (a single window may
        exceed it; it is then read alone).

    Returns
    -------
    Assembly
    """
    # 1. What each (scene, window) needs: band -> local time steps.
    needs: dict[tuple[int, int, int, int, int], dict[int, set[int]]] = defaultdict(
        lambda: defaultdict(set))
    for req in requests:
        window = (req.row, req.col, req.height, req.width)
        for scene, local, _ in cube.segments(np.asarray(req.times, dtype=np.int64)):
            per_band = needs[(scene, *window)]
            for b in req.bands:
                per_band[b].update(local)

    # 2. Bands needing the same time steps share one piece, so the product
    #    times x bands of every piece is exactly what was asked for. Pieces of
    #    scenes with another frame layout (a ragged cube) never share a call.
    pieces: dict[tuple[Any, ...], list[tuple[int, int, int]]] = defaultdict(list)
    where: dict[tuple[int, int, int, int, int, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for (scene, row, col, h, w), per_band in needs.items():
        by_times: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for b, ts in per_band.items():
            by_times[tuple(sorted(ts))].append(b)
        layout = cube.layout(scene)
        for times, band_list in by_times.items():
            sorted_bands = tuple(sorted(band_list))
            pieces[(times, sorted_bands, h, w, layout)].append((row, col, scene))
            for b in band_list:
                where[(scene, row, col, h, w, b)] = (times, sorted_bands)

    # 3. Batch equal keys, neighbours first, under the budget.
    itemsize = cube.grid.dtype.itemsize
    calls: list[Call] = []
    index: dict[tuple[int, int, int, tuple[int, ...], tuple[int, ...], int, int],
                tuple[int, int]] = {}
    for (times, bands, h, w, _), items in sorted(pieces.items(), key=lambda kv: kv[0][:4]):
        items.sort()
        per_item = len(times) * len(bands) * h * w * itemsize
        size = max(1, budget // max(per_item, 1))
        # Even batches: 64 windows at 21 per call become 4 x 16, not 21+21+21+1.
        size = math.ceil(len(items) / math.ceil(len(items) / size))
        for start in range(0, len(items), size):
            batch = items[start:start + size]
            for k, (row, col, scene) in enumerate(batch):
                index[(scene, row, col, times, bands, h, w)] = (len(calls), k)
            calls.append(Call(scenes=tuple(s for _, _, s in batch),
                              rows=tuple(r for r, _, _ in batch),
                              cols=tuple(c for _, c, _ in batch),
                              times=times, bands=bands, height=h, width=w))

    # 4. For every request, the parts of calls that fill it.
    all_parts: list[tuple[Part, ...]] = []
    for req in requests:
        parts: list[Part] = []
        segs = cube.segments(np.asarray(req.times, dtype=np.int64))
        for scene, local, t_out in segs:
            groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = defaultdict(list)
            for bo, b in enumerate(req.bands):
                groups[where[(scene, req.row, req.col, req.height, req.width, b)]].append(bo)
            for (piece_times, piece_bands), b_outs in groups.items():
                call, item = index[(scene, req.row, req.col, piece_times, piece_bands,
                                    req.height, req.width)]
                t_pos = {t: i for i, t in enumerate(piece_times)}
                b_pos = {b: i for i, b in enumerate(piece_bands)}
                parts.append(Part(call=call, item=item, t_out=tuple(t_out),
                                  t_src=tuple(t_pos[t] for t in local),
                                  b_out=tuple(b_outs),
                                  b_src=tuple(b_pos[req.bands[bo]] for bo in b_outs)))
        all_parts.append(tuple(parts))
    return Assembly(calls=tuple(calls), parts=tuple(all_parts))


def _axis(values: tuple[int, ...]) -> slice | np.ndarray:
    """Return a slice when the positions are a contiguous run (a view, no copy)."""
    if values and values == tuple(range(values[0], values[0] + len(values))):
        return slice(values[0], values[0] + len(values))
    return np.asarray(values, dtype=np.intp)


def assemble(request: Request, parts: tuple[Part, ...], calls: tuple[Call, ...],
             results: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """Build a request's ``(time, band, y, x)`` block from call results.

    Without a copy whenever possible: one part whose times and bands are
    contiguous runs is a view of its call's result, and a catalog window read
    by one ``read_many`` whose items are the scenes in the result's time
    order is that call's buffer, reshaped.

    Parameters
    ----------
    request : Request
    parts : tuple of Part
        From :func:`batch_requests`.
    calls : tuple of Call
        The calls the parts refer to, indexed by ``Part.call``.
    results : list of numpy.ndarray
        One result per call, indexed by ``Part.call``.
    dtype : numpy.dtype

    Returns
    -------
    numpy.ndarray
    """
    shape = (len(request.times), len(request.bands), request.height, request.width)
    if len(parts) == 1:
        p = parts[0]
        src = results[p.call][p.item]
        if (p.t_out == tuple(range(shape[0])) and p.b_out == tuple(range(shape[1]))):
            t, b = _axis(p.t_src), _axis(p.b_src)
            if isinstance(t, slice) and isinstance(b, slice):
                return src[t, b]
    elif _one_buffer(request, parts, calls):
        return results[parts[0].call].reshape(shape)
    out = np.empty(shape, dtype=dtype)
    for p in parts:
        src = results[p.call][p.item]
        block = src[np.ix_(p.t_src, p.b_src)]
        out[np.ix_(p.t_out, p.b_out)] = block
    return out


def _one_buffer(request: Request, parts: tuple[Part, ...], calls: tuple[Call, ...]) -> bool:
    """Return whether the parts are one call's items, whole, in the result's time order."""
    if len({p.call for p in parts}) != 1:
        return False
    call = calls[parts[0].call]
    n_t, n_b = len(call.times), len(request.bands)
    ordered = sorted(parts, key=lambda p: p.t_out[0] if p.t_out else -1)
    whole_t, whole_b = tuple(range(n_t)), tuple(range(n_b))
    return (len(ordered) == len(call.scenes) and len(request.times) == n_t * len(ordered)
            and call.bands == tuple(request.bands)
            and all(p.item == k and p.t_src == whole_t and p.b_src == whole_b
                    and p.b_out == whole_b and p.t_out == tuple(range(k * n_t, (k + 1) * n_t))
                    for k, p in enumerate(ordered)))


# --- slices of a large call (progress bars) ----------------------------------------


def split_call(cube: Cube, call: Call, *, progress: bool) -> list[Call]:
    """Return the native calls that run ``call``: itself, or slices of it.

    One call (``call`` itself) unless ``progress`` (the ``progress`` option
    is set to true: :func:`rumi_xarray.progress.sliced_reads`) and the call
    decodes more than :data:`READ_BAR_BYTES`; then slices along an axis
    whose frames are not shared between slices (scenes, then time steps or
    bands that frames do not hold, then rows of tiles), so no frame is
    decoded twice, the total work is the same and the bar can advance after
    each. The one rule both the read and ``explain()`` use: the setting is
    an argument, never read from the terminal here.

    Parameters
    ----------
    cube : Cube
    call : Call
    progress : bool
        Whether large reads run in slices for a progress bar.

    Returns
    -------
    list of Call
    """
    g = cube.scene_grid(call.scenes[0])
    total = call.nbytes(g.dtype.itemsize)
    if not progress or total <= READ_BAR_BYTES:
        return [call]
    wanted = max(2, min(READ_MAX_STEPS, total // READ_STEP_BYTES))
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
