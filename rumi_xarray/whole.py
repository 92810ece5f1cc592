"""Whole-array loads without the final copy: decode straight into the result.

When a Rumi-backed dask array is computed *itself* (``.values``, ``.load()``)
rather than feeding a reduction, dask would read the chunks and then copy
them all into a new array (``concatenate3``): for a full load that copy
costs as much as a third of the read. Here the reads are planned as slabs of
the result (ranges of time steps, bands or rows, which are contiguous in
``(time, band, y, x)``), librumi decodes each slab straight into one shared
result buffer, every chunk is a view of it, and the finalize step returns the
buffer after checking, pointer by pointer, that every chunk really is its
view in place. Anything else (a scheduler in other processes, a chunk that
came back as a copy) falls back to dask's concatenation: the result is the
same, only slower.
"""

from __future__ import annotations

import itertools
import math
import threading
import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np
from dask.array.core import concatenate3
from dask.array.optimization import optimize as dask_optimize
from dask.core import flatten

from rumi_xarray import reads
from rumi_xarray.array import RumiBackendArray

# Process-local result buffers by plan token: every slab task of one compute
# in this process writes into the same buffer; it lives as long as a view.
_BUFFERS: weakref.WeakValueDictionary[str, np.ndarray] = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


def buffer(token: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Return this process's result buffer for ``token``, allocating it once."""
    with _LOCK:
        found = _BUFFERS.get(token)
        if found is None or found.shape != shape:
            found = np.empty(shape, dtype=dtype)
            _BUFFERS[token] = found
        return found


def full_shape(array: RumiBackendArray) -> tuple[int, int, int, int]:
    """Return the result buffer's ``(time, band, y, x)`` shape."""
    t, b, y, x = array.cube.shape
    return (t if array.has_time else 1, 1 if array.band is not None else b, y, x)


def slab_axis(array: RumiBackendArray) -> int:
    """Return the buffer axis slabs split: time, else band, else rows."""
    t, b, _, _ = full_shape(array)
    return 0 if t > 1 else 1 if b > 1 else 2


def slab_bounds(array: RumiBackendArray, chunks: tuple[tuple[int, ...], ...],
                budget: int, threads: int) -> list[tuple[int, int]]:
    """Split the slab axis at chunk boundaries into balanced slabs.

    Boundaries are chunk boundaries (so every chunk lies in one slab) and,
    for cubes of several scenes, scene boundaries (so one ``read_many`` reads
    whole scenes). There are at least as many slabs as threads when the axis
    allows, and each stays near ``budget`` decoded bytes.

    Parameters
    ----------
    array : RumiBackendArray
    chunks : tuple of tuple of int
        Chunks over ``array.dims``.
    budget : int
    threads : int

    Returns
    -------
    list of (start, stop)
    """
    shape = full_shape(array)
    axis = slab_axis(array)
    dims = array.dims
    name = ("time", "band", "y")[axis]
    sizes = chunks[dims.index(name)] if name in dims else (shape[axis],)
    edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
    if axis == 0 and len(array.cube.scenes) > 1:
        per_scene = array.cube.grid.time_count
        edges = [e for e in edges if e % per_scene == 0]
    total = math.prod(shape) * array.dtype.itemsize
    wanted = max(math.ceil(total / max(budget, 1)), threads)
    wanted = min(len(edges) - 1, threads * math.ceil(wanted / threads))
    # Pick the boundary nearest each ideal cut.
    length = shape[axis]
    cuts = sorted({min(edges, key=lambda e, i=i: abs(e - i * length / wanted))
                   for i in range(1, wanted)} - {0, length})
    bounds = [0, *cuts, length]
    return list(itertools.pairwise(bounds))


def slab_call(array: RumiBackendArray, axis: int, start: int, stop: int) -> reads.Call:
    """Return the one native call that decodes a slab.

    Parameters
    ----------
    array : RumiBackendArray
    axis : int
        0 time, 1 band, 2 rows of the ``(time, band, y, x)`` buffer.
    start, stop : int
        The slab's range along ``axis``.

    Returns
    -------
    reads.Call
    """
    cube = array.cube
    grid = cube.grid
    bands = (array.band,) if array.band is not None else tuple(range(grid.bands))
    if axis == 0:
        segments = cube.segments(np.arange(start, stop, dtype=np.int64))
        scenes = tuple(s for s, _, _ in segments)
        return reads.Call(scenes=scenes, rows=(0,) * len(scenes), cols=(0,) * len(scenes),
                          times=tuple(segments[0][1]),  # equal for every scene of a slab
                          bands=bands, height=grid.height, width=grid.width)
    scene, local, _ = cube.segments(np.arange(full_shape(array)[0], dtype=np.int64))[0]
    if axis == 1:
        return reads.Call(scenes=(scene,), rows=(0,), cols=(0,), times=tuple(local),
                          bands=bands[start:stop], height=grid.height, width=grid.width)
    return reads.Call(scenes=(scene,), rows=(start,), cols=(0,), times=tuple(local),
                      bands=bands, height=stop - start, width=grid.width)


def fill_slab(array: RumiBackendArray, token: str, axis: int, start: int, stop: int
              ) -> np.ndarray:
    """Decode one slab into this process's result buffer; return the slab view.

    Parameters
    ----------
    array : RumiBackendArray
    token : str
        Identifies the result buffer of this compute.
    axis, start, stop : int
        The slab, as for :func:`slab_call`.

    Returns
    -------
    numpy.ndarray
        The 4-D slab, a view of the shared buffer.
    """
    out = buffer(token, full_shape(array), array.cube.grid.dtype)
    index: list[slice] = [slice(None)] * 4
    index[axis] = slice(start, stop)
    slab = out[tuple(index)]
    call = slab_call(array, axis, start, stop)
    dst = slab.reshape(len(call.scenes), len(call.times), len(call.bands), call.height,
                       call.width)
    reads.execute(array.cube, call, out=dst)
    return slab


def block_of(slab: np.ndarray, index: tuple[slice, ...], drop: tuple[int, ...]) -> np.ndarray:
    """Return one chunk as a view of its slab (a dask task)."""
    block = slab[index]
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
    starts = [np.concatenate([[0], np.cumsum(c)[:-1]]).astype(int) for c in chunks]
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
