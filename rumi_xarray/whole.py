"""Whole-array loads without the final copy: decode straight into the result.

When a Rumi-backed dask array is computed *itself* (``.values``, ``.load()``)
rather than feeding a reduction, dask would read the chunks and then copy
them all into a new array (``concatenate3``): for a full load that copy
costs as much as a third of the read. Here one native call decodes the whole
result into one buffer (:func:`whole_call`), every chunk is a view of it,
and the finalize step returns the buffer after checking, pointer by pointer,
that every chunk really is its view in place. Anything else (a scheduler in
other processes, a chunk that came back as a copy) falls back to dask's
concatenation: the result is the same, only slower.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from dask.array.core import concatenate3
from dask.array.optimization import optimize as dask_optimize
from dask.core import flatten

from rumi_xarray import reads
from rumi_xarray.array import RumiBackendArray
from rumi_xarray.grid import chunk_starts


def full_shape(array: RumiBackendArray) -> tuple[int, int, int, int]:
    """Return the result buffer's ``(time, band, y, x)`` shape."""
    t, b, y, x = array.cube.shape
    return (t if array.has_time else 1, 1 if array.band is not None else b, y, x)


def whole_call(array: RumiBackendArray) -> reads.Call:
    """Return the one native call that decodes the whole result.

    One call, as ``rumi.read`` of the file makes: librumi parallelizes
    decoding inside it, whereas splitting the result into time slabs made a
    remote plane-layout file (frames ordered by cell, then time) fetch
    interleaved ranges that its transport coalesced into the whole file once
    per slab.

    Parameters
    ----------
    array : RumiBackendArray

    Returns
    -------
    reads.Call
    """
    cube = array.cube
    grid = cube.grid
    bands = (array.band,) if array.band is not None else tuple(range(grid.bands))
    segments = cube.segments(np.arange(cube.shape[0], dtype=np.int64))
    scenes = tuple(s for s, _, _ in segments)
    return reads.Call(scenes=scenes, rows=(0,) * len(scenes), cols=(0,) * len(scenes),
                      times=tuple(segments[0][1]),  # equal for every scene of a cube
                      bands=bands, height=grid.height, width=grid.width)


def fill(array: RumiBackendArray) -> np.ndarray:
    """Decode the whole result into a new ``(time, band, y, x)`` buffer (a dask task).

    Parameters
    ----------
    array : RumiBackendArray

    Returns
    -------
    numpy.ndarray
    """
    out = np.empty(full_shape(array), dtype=array.cube.grid.dtype)
    call = whole_call(array)
    reads.execute(array.cube, call, out=out.reshape(
        len(call.scenes), len(call.times), len(call.bands), call.height, call.width))
    return out


def block_of(whole: np.ndarray, index: tuple[slice, ...], drop: tuple[int, ...]) -> np.ndarray:
    """Return one chunk as a view of the result buffer (a dask task)."""
    block = whole[index]
    return block.squeeze(axis=drop) if drop else block


def finalize(results: Any, chunks: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """Return the shared buffer when every block is its view in place, else concatenate.

    Parameters
    ----------
    results : nested lists of numpy.ndarray
        Blocks in dask's order.
    chunks : tuple of tuple of int

    Returns
    -------
    numpy.ndarray
    """
    blocks = list(flatten(results)) if isinstance(results, list) else [results]
    shape = tuple(sum(c) for c in chunks)
    root = blocks[0].base if isinstance(blocks[0], np.ndarray) else None
    if root is not None and root.size == math.prod(shape) and root.flags.c_contiguous:
        whole = root.reshape(shape)
        if _all_in_place(blocks, whole, chunks):
            return whole
    return concatenate3(results)


def _all_in_place(blocks: list[np.ndarray], whole: np.ndarray,
                  chunks: tuple[tuple[int, ...], ...]) -> bool:
    base = whole.__array_interface__["data"][0]
    starts = [chunk_starts(c) for c in chunks]
    positions = np.ndindex(*(len(c) for c in chunks))
    for block, index in zip(blocks, positions, strict=True):
        if not isinstance(block, np.ndarray) or (
                block.base is not whole.base and block.base is not whole):
            return False
        expected = base + sum(int(starts[d][i]) * whole.strides[d] for d, i in enumerate(index))
        if block.__array_interface__["data"][0] != expected:
            return False
        if block.shape != tuple(chunks[d][i] for d, i in enumerate(index)):
            return False
        if any(n > 1 and s != ws for n, s, ws in zip(block.shape, block.strides,
                                                         whole.strides, strict=True)):
            return False
    return True


def optimize(dsk: Any, keys: Iterable[Any], **kwargs: Any) -> Any:
    """Switch the array's own read layer to whole mode, then optimize as dask does.

    Only when the array itself is computed (its graph is the read layer and
    dask's finalize step); on a distributed client the chunks would travel
    between processes anyway, so groups are kept there.
    """
    from rumi_xarray.graph import GroupedReadLayer

    # This hook runs only when a GroupedArray is computed: the graph is then
    # its read layer plus dask's finalize step, unless the array was derived.
    own = {name for name, layer in dsk.layers.items() if isinstance(layer, GroupedReadLayer)}
    itself = all(name.startswith("finalize-") for name in dsk.layers if name not in own)
    if itself and not distributed_default():
        layers = dict(dsk.layers)
        for name in own:
            if layers[name].needed is None:
                layers[name] = layers[name].as_whole()
        dsk = type(dsk)(layers, dsk.dependencies)
    return dask_optimize(dsk, keys, **kwargs)


def distributed_default() -> bool:
    """Return whether a ``distributed`` client is the default scheduler."""
    try:
        from distributed import default_client

        default_client()
    except (ImportError, ValueError):
        return False
    return True
