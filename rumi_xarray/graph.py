"""Grouped dask reads: one key per chunk, one ``read_many`` per group of chunks.

:class:`GroupedReadLayer` is a :class:`dask.highlevelgraph.Layer` that stays
symbolic until dask culls it. Its :meth:`~GroupedReadLayer.cull` runs once
dask knows which chunks a computation needs; only then are the reads planned
(:func:`rumi_xarray.reads.plan`): neighbouring needed chunks become one
"read group" task (one native call, one Karu submission) and every chunk a
cheap task that slices or assembles its block from its groups' results.
Opening a cube of a million frames therefore builds no task at all.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
from collections.abc import Iterator, Mapping, Set
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask._task_spec import Task, TaskRef
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph, Layer

from rumi_xarray import grid as grid_mod
from rumi_xarray import reads, whole
from rumi_xarray.array import RumiBackendArray

#: dask config key bounding the decoded bytes of one grouped read.
CONFIG_GROUP_BYTES = "rumi.group-bytes"


def group_bytes() -> int:
    """Return the configured decoded-bytes budget of one read group.

    Set with ``dask.config.set({"rumi.group-bytes": "256MiB"})``; the default
    is 128 MiB.

    Returns
    -------
    int
    """
    value = dask.config.get(CONFIG_GROUP_BYTES, reads.DEFAULT_GROUP_BYTES)
    return int(dask.utils.parse_bytes(value) if isinstance(value, str) else value)


class GroupedReadLayer(Layer):
    """Symbolic layer of a Rumi-backed dask array with grouped reads.

    Parameters
    ----------
    name : str
        The dask array name; chunk keys are ``(name, *block_index)``.
    array : RumiBackendArray
        What to read (cube, squeezed time, single band).
    chunks : tuple of tuple of int
        Normalized chunks over ``array.dims``.
    budget : int
        Decoded bytes per read group.
    needed : frozenset of tuple, optional
        Block indices this (culled) layer must produce; ``None`` means all.
    whole : bool, default False
        The array itself is being computed: decode into one result buffer
        (:mod:`rumi_xarray.whole`) instead of reading groups.
    """

    # Our tasks are task-spec objects; without this the base class would
    # materialise every task just to check for legacy tuples.
    has_legacy_tasks = False

    def __init__(self, name: str, array: RumiBackendArray,
                 chunks: tuple[tuple[int, ...], ...], budget: int,
                 needed: frozenset[tuple[int, ...]] | None = None,
                 annotations: Mapping[str, Any] | None = None, whole: bool = False) -> None:
        super().__init__(annotations=annotations)
        self.name = name
        self.array = array
        self.chunks = chunks
        self.budget = budget
        self.needed = needed
        self.whole = whole
        self._starts = [grid_mod.chunk_starts(c) for c in chunks]

    # -- symbolic interface -------------------------------------------------

    def is_materialized(self) -> bool:
        """Return whether the tasks have been built."""
        return "_tasks" in self.__dict__

    def _blocks(self) -> Iterator[tuple[int, ...]]:
        if self.needed is not None:
            return iter(sorted(self.needed))
        return itertools.product(*(range(len(c)) for c in self.chunks))

    def get_output_keys(self) -> Set[Any]:
        """Return the chunk keys, without building tasks."""
        return {(self.name, *b) for b in self._blocks()}

    def cull(self, keys: set[Any], all_hlg_keys: Any) -> tuple[Layer, Mapping[Any, set[Any]]]:
        """Keep only the chunks in ``keys``; reads are planned for those alone.

        Parameters
        ----------
        keys : set
            Keys needed downstream (of any layer).
        all_hlg_keys : collection
            Unused: this layer depends on no other.

        Returns
        -------
        layer : GroupedReadLayer
        deps : dict
            No external dependencies for any kept key.
        """
        wanted = frozenset(
            k[1:] for k in keys
            if isinstance(k, tuple) and k and k[0] == self.name and len(k) == len(self.chunks) + 1
        )
        if self.needed is not None:
            wanted &= self.needed
        culled = GroupedReadLayer(self.name, self.array, self.chunks, self.budget,
                                  needed=wanted, annotations=self.annotations,
                                  whole=self.whole and len(wanted) == self.n_blocks())
        return culled, {(self.name, *b): set() for b in wanted}

    def n_blocks(self) -> int:
        """Return how many chunks the whole array has."""
        return math.prod(len(c) for c in self.chunks)

    def as_whole(self) -> GroupedReadLayer:
        """Return this layer in whole-array mode (see :mod:`rumi_xarray.whole`)."""
        return GroupedReadLayer(self.name, self.array, self.chunks, self.budget,
                                needed=self.needed, annotations=self.annotations, whole=True)

    def get_dependencies(self, key: Any, all_hlg_keys: Any) -> set[Any]:
        """Return no external dependencies: chunks depend only on read groups."""
        return set()

    # -- Mapping interface (materialises) -----------------------------------

    @functools.cached_property
    def _planned(self) -> tuple[list[tuple[int, ...]], list[reads.Request], reads.Plan]:
        blocks = list(self._blocks())
        requests = [self.request(b) for b in blocks]
        itemsize = self.array.dtype.itemsize
        total = sum(len(r.times) * len(r.bands) * r.height * r.width for r in requests) * itemsize
        budget = balanced_budget(total, self.budget, parallelism())
        return blocks, requests, reads.plan(self.array.cube, requests, budget=budget)

    def plan(self) -> reads.Plan:
        """Return the planned native calls of the chunks this layer must produce."""
        return self._planned[2]

    @functools.cached_property
    def _tasks(self) -> dict[Any, Task]:
        if self.whole:
            return self._whole_tasks()
        blocks, requests, p = self._planned
        # Group keys depend on the plan: a scheduler that still holds groups
        # of an earlier, differently culled computation must not reuse them.
        group = f"{self.name}-read-{tokenize(p.calls)}"
        tasks: dict[Any, Task] = {}
        for i, call in enumerate(p.calls):
            tasks[(group, i)] = Task((group, i), reads.execute, self.array.cube, call)
        drop = self.squeezed_axes()
        dtype = self.array.dtype
        for block, request, parts in zip(blocks, requests, p.parts, strict=True):
            used = sorted({part.call for part in parts})
            local = {c: j for j, c in enumerate(used)}
            relabelled = tuple(dataclasses.replace(part, call=local[part.call]) for part in parts)
            key = (self.name, *block)
            tasks[key] = Task(key, assemble_block, request, relabelled, dtype, drop,
                              *[TaskRef((group, c)) for c in used])
        return tasks

    def _whole_tasks(self) -> dict[Any, Task]:
        """One task decoding the whole result, and chunk tasks that are views of it."""
        fill = (f"{self.name}-whole",)
        tasks: dict[Any, Task] = {fill: Task(fill, whole.fill, self.array)}
        drop = self.squeezed_axes()
        buffer_axis = {"time": 0, "band": 1, "y": 2, "x": 3}
        for block in self._blocks():
            index = [slice(None)] * 4
            for dim, i, starts, sizes in zip(self.array.dims, block, self._starts, self.chunks,
                                             strict=True):
                index[buffer_axis[dim]] = slice(int(starts[i]), int(starts[i]) + sizes[i])
            key = (self.name, *block)
            tasks[key] = Task(key, whole.block_of, TaskRef(fill), tuple(index), drop)
        return tasks

    def __getitem__(self, key: Any) -> Task:
        return self._tasks[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._tasks)

    def __len__(self) -> int:
        return len(self._tasks)

    # -- geometry -----------------------------------------------------------

    def squeezed_axes(self) -> tuple[int, ...]:
        """Return the ``(t, b, y, x)`` axes that are not dimensions of the array."""
        axes = []
        if not self.array.has_time:
            axes.append(0)
        if self.array.band is not None:
            axes.append(1)
        return tuple(axes)

    def request(self, block: tuple[int, ...]) -> reads.Request:
        """Return the read request of one chunk.

        Parameters
        ----------
        block : tuple of int
            Block index over the array's dimensions.

        Returns
        -------
        reads.Request
        """
        spans = {}
        for dim, i, starts, sizes in zip(self.array.dims, block, self._starts, self.chunks,
                                         strict=True):
            spans[dim] = (int(starts[i]), int(sizes[i]))
        t0, tn = spans.get("time", (0, 1))
        if "band" in spans:
            b0, bn = spans["band"]
            bands = tuple(range(b0, b0 + bn))
        else:
            bands = (int(self.array.band),)  # type: ignore[arg-type]
        (y0, yn), (x0, xn) = spans["y"], spans["x"]
        return reads.Request(times=tuple(range(t0, t0 + tn)), bands=bands,
                             row=y0, col=x0, height=yn, width=xn)


#: Below this many decoded bytes per group, splitting a computation's reads
#: across threads costs more (plans, requests) than it gains.
MIN_PARALLEL_GROUP = 16 * 2**20


def parallelism() -> int:
    """Return how many dask threads will run the reads.

    The threads of the default ``distributed`` client's workers when there is
    one, else dask's ``num_workers`` setting, else the CPU count.
    """
    try:
        from distributed import default_client

        return max(1, sum(default_client().nthreads().values()))
    except (ImportError, ValueError):
        pass
    return int(dask.config.get("num_workers", None) or os.cpu_count() or 1)


def balanced_budget(total: int, budget: int, threads: int) -> int:
    """Return a group budget that keeps every thread busy on large computations.

    Groups stay under ``budget``; when the work is large enough
    (``MIN_PARALLEL_GROUP`` per thread or more) there are at least as many
    groups as threads, in multiples of the thread count, so that no worker
    idles while another reads the last group.

    Parameters
    ----------
    total : int
        Decoded bytes of every needed chunk.
    budget : int
        Configured upper bound per group.
    threads : int

    Returns
    -------
    int
    """
    if threads <= 1 or total < threads * MIN_PARALLEL_GROUP:
        return budget
    groups = threads * math.ceil(math.ceil(total / max(budget, 1)) / threads)
    return min(budget, max(1, math.ceil(total / groups)))


def assemble_block(request: reads.Request, parts: tuple[reads.Part, ...], dtype: np.dtype,
                   drop: tuple[int, ...], *results: np.ndarray) -> np.ndarray:
    """Build one chunk from the results of its read groups (a dask task).

    Parameters
    ----------
    request : reads.Request
    parts : tuple of reads.Part
        Call indices refer to positions in ``results``.
    dtype : numpy.dtype
    drop : tuple of int
        ``(t, b, y, x)`` axes to squeeze.
    *results : numpy.ndarray
        Outputs of the chunk's read groups.

    Returns
    -------
    numpy.ndarray
    """
    block = reads.assemble(request, parts, list(results), dtype)
    return block.squeeze(axis=drop) if drop else block


def grouped_array(array: RumiBackendArray, chunks: Any = None, *, budget: int | None = None,
                  name: str | None = None) -> da.Array:
    """Return a dask array over ``array`` whose chunks are read in groups.

    Parameters
    ----------
    array : RumiBackendArray
    chunks : dict, int, str, tuple, optional
        As for ``xarray.open_dataset``; ``{}`` is one chunk per frame.
    budget : int, optional
        Decoded bytes per read group (default: :func:`group_bytes`).
    name : str, optional
        dask name; by default a deterministic token of the sources and chunks.

    Returns
    -------
    dask.array.Array
    """
    dims = array.dims
    preferred = grid_mod.preferred_chunks(array.cube.grid, dims)
    normalized = grid_mod.align_chunks({} if chunks is None else chunks, array.shape, dims,
                                       preferred, array.dtype, source=array.cube.name)
    budget = group_bytes() if budget is None else int(budget)
    if name is None:
        cube = array.cube
        name = "rumi-" + tokenize(
            [(s.source, s.header) for s in cube.scenes], cube.steps, array.band,
            array.has_time, normalized)
    layer = GroupedReadLayer(name, array, normalized, budget)
    graph = HighLevelGraph({name: layer}, {name: set()})
    meta = np.empty((0,) * len(dims), dtype=array.dtype)
    return GroupedArray(graph, name, normalized, meta=meta)


class GroupedArray(da.Array):
    """A dask array of grouped Rumi reads that loads itself without a final copy.

    Computing it directly (``.values``, ``.load()``, ``.compute()``) decodes
    into one result buffer (:mod:`rumi_xarray.whole`); anything derived from it
    (slices, reductions) is a plain dask array and reads in groups.
    """

    __slots__ = ()

    __dask_optimize__ = staticmethod(whole.optimize)

    def __dask_postcompute__(self) -> tuple[Any, tuple[Any, ...]]:
        return whole.finalize, (self.chunks,)
