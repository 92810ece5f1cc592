"""Compress the frames of a dask array in parallel dask tasks, in bounded batches.

Works the same with dask's legacy graphs and its array query planning: frames
are produced by ``map_blocks`` over the array rechunked to whole frames (a
no-op when it is already frame-aligned, as Rumi-backed arrays are), and
computed by plain slicing and ``dask.compute``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np

#: Frames are computed in batches holding about this many decoded bytes of
#: source chunks: dask's scheduler may otherwise start many source chunks
#: before their frames are compressed (measured: 1.7x the array in memory).
BATCH_BYTES = 64 * 2**20


def compress_frames(data: Any, starts: Sequence[tuple[int, int, int, int]],
                    frame_shape: tuple[int, int, int, int],
                    compress: Callable[[np.ndarray], bytes],
                    advance: Callable[[int], None]) -> list[bytes]:
    """Return the compressed payload of every frame of a ``(t, b, y, x)`` dask array.

    Parameters
    ----------
    data : dask.array.Array
        Four axes ``(time, band, y, x)``.
    starts : sequence of (t, b, y, x)
        First sample of each frame, in the file's frame order.
    frame_shape : tuple of int
        Extent of an interior frame; edge frames are clipped.
    compress : callable
        Block ``(t, b, h, w)`` of one frame -> payload bytes (picklable).
    advance : callable
        Called with the number of frames finished: as each frame is compressed
        under dask's local schedulers, after each batch otherwise (a
        ``distributed`` client reports progress on its dashboard).

    Returns
    -------
    list of bytes
        Payloads in the order of ``starts``.
    """
    frames = data.rechunk(frame_shape)
    counted = _Counted(compress, advance)
    payloads = da.map_blocks(_compress_block, frames, counted, dtype=object,
                             chunks=tuple((1,) * len(c) for c in frames.chunks),
                             meta=np.empty((0,) * 4, dtype=object))
    out: list[bytes] = [b""] * len(starts)
    for batch in _batches(data, starts):
        picks = [payloads[tuple(slice(s // n, s // n + 1)
                                for s, n in zip(starts[i], frame_shape, strict=True))]
                 for i in batch]
        before = counted.done
        values = dask.compute(*picks)
        for i, value in zip(batch, values, strict=True):
            out[i] = value.reshape(-1)[0]
        advance(len(batch) - (counted.done - before))
    return out


class _Counted:
    """``compress`` that reports each frame to ``advance`` as it is compressed.

    dask's local schedulers call it in this process, so the bar advances
    frame by frame within a batch. (Task keys cannot be counted instead: dask
    fuses the payload tasks into the slicing ones under new names.) Copies
    pickled to other processes report nothing; the batch's remainder is
    reported when the batch ends.
    """

    def __init__(self, compress: Callable[[np.ndarray], bytes],
                 advance: Callable[[int], None] | None) -> None:
        self.compress = compress
        self.advance = advance
        self.done = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"compress": self.compress}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["compress"], None)  # type: ignore[misc]

    def __call__(self, block: np.ndarray) -> bytes:
        payload = self.compress(block)
        if self.advance is not None:
            with self._lock:
                self.done += 1
                self.advance(1)
        return payload


def _compress_block(block: np.ndarray, compress: Callable[[np.ndarray], bytes]) -> np.ndarray:
    result = np.empty((1, 1, 1, 1), dtype=object)
    result[0, 0, 0, 0] = compress(np.asarray(block))
    return result


def _batches(data: Any, starts: Sequence[tuple[int, int, int, int]]) -> Iterator[list[int]]:
    """Yield frame indices in batches of whole source chunks, ~BATCH_BYTES each.

    Frames are grouped by the source chunk holding their first sample, so a
    source chunk is computed once (only frames straddling chunk boundaries
    read their neighbours again); a source chunk is never split across
    batches, since that would compute it again.
    """
    bounds = [np.cumsum(c) for c in data.chunks]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, start in enumerate(starts):
        chunk = tuple(int(np.searchsorted(b, v, side="right"))
                      for b, v in zip(bounds, start, strict=True))
        groups.setdefault(chunk, []).append(i)
    itemsize = np.dtype(data.dtype).itemsize
    batch: list[int] = []
    held = 0
    for chunk in sorted(groups):
        if batch and held >= BATCH_BYTES:
            yield batch
            batch, held = [], 0
        batch.extend(groups[chunk])
        held += itemsize * math.prod(int(c[i]) for c, i in zip(data.chunks, chunk, strict=True))
    if batch:
        yield batch
