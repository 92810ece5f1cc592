"""Chains of selections on a Rumi dask array reach the read (legacy dask graphs).

Why this exists: ``dask.array.optimization.optimize`` (dask 2025.1 to at
least 2026.8) fuses at most ONE indexing step into a chunk's read. Its
``_optimize_slices`` walks each fused task's inner graph once, in order:
fusing ``getitem(getter(x, chunk), a)`` into ``getter(x, chunk + a)`` turns
the ``getitem`` into an ``Alias``, and a second ``getitem(..., b)`` that
refers to it is then no longer recognised (nor does the walk continue past
a ``TaskRef``). So ``var.sel(band="B04").isel(time=3, y=..., x=...)`` on a
variable opened with ``chunks={}`` reads every frame of band B04's chunk
and slices the 100x100 chip out afterwards (96 frames instead of one),
while the same selection in one ``isel`` reads one frame. No graph that
xarray's ``from_array`` can emit avoids it: the chain of ``getitem`` tasks
comes from dask's own slicing.

The fix is dask's public optimisation hook for arrays, ``array_optimize``:
:func:`optimize` runs the optimizer that was configured before (dask's
default :func:`dask.array.optimization.optimize`, or the user's), then
rewrites the Rumi reads of the optimized graph, and only those (every other
task of every graph is returned as dask made it):

- :func:`fuse_rumi_reads` folds every remaining chain ``getter -> getitem ->
  getitem ...`` inside a fused task into one ``getter`` call with the
  composed index (dask's own public :func:`~dask.array.optimization.fuse_slice`);
- :func:`split_shared_reads` gives the selections sharing one chunk read
  (dask fuses linear chains only) their own reads when together they select
  at most half of the chunk;
- :func:`group_rumi_reads` makes the chunk reads that tile a box inside one
  read group one read of that box (tile-sized user chunks).

:func:`install` sets the hook the first time a Rumi array is sized in a
process that has imported dask (xarray does that when it chunks a
variable), never at import. Arrays stay plain ``dask.array.Array`` objects;
their names, keys and chunks do not change. Under dask's array query
planning the collection's ``__dask_optimize__`` is a no-op that this hook
does not reach (array-expr lowers expressions itself): there, selections do
not reach the read at all, and read groups default to 16 MiB instead.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
import threading
from collections.abc import Callable, Mapping
from typing import Any

from dask.array.chunk import getitem as chunk_getitem
from dask.array.core import getter, getter_inline, getter_nofancy
from dask.array.optimization import fuse_slice
from dask.task_spec import Alias, DataNode, GraphNode, Task, TaskRef

from rumi_xarray.dask.graphs import subgraph

#: Functions that read a chunk from the array ``from_array`` wrapped.
_READS = (getter, getter_nofancy, getter_inline)
#: Functions that index what an earlier task returned (dask's slicing of a chunk).
_INDEXES = (*_READS, chunk_getitem)

_lock = threading.Lock()
_base: Callable[..., Any] | None = None


def installed() -> bool:
    """Return whether :func:`optimize` is dask's array optimizer now."""
    import dask

    return dask.config.get("array_optimize", None) is optimize


def install() -> None:
    """Make :func:`optimize` dask's array optimizer, keeping the one configured before.

    Idempotent and thread-safe. A user's own ``array_optimize`` set before
    keeps running first; one set afterwards replaces this one (and chained
    selections then read what dask's optimizer fuses).
    """
    global _base
    import dask

    from rumi_xarray.dask.config import query_planning

    if query_planning():  # array-expr collections never call array_optimize
        return
    with _lock:
        current = dask.config.get("array_optimize", None)
        if current is optimize:
            return
        _base = current if callable(current) else None
        dask.config.set(array_optimize=optimize)


def optimize(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    """Optimize an array graph as dask does, then fuse selection chains into Rumi reads.

    Parameters
    ----------
    dsk : Mapping or HighLevelGraph
    keys : list
    **kwargs
        Passed to the base optimizer.

    Returns
    -------
    Mapping or HighLevelGraph
    """
    from dask.array.optimization import optimize as dask_optimize

    base = _base or dask_optimize
    out = base(dsk, keys, **kwargs)
    if isinstance(out, dict):  # not a HighLevelGraph: low-level fusion ran
        fuse_rumi_reads(out)
        if split_shared_reads(out, keys):
            fuse_rumi_reads(out)  # chains behind the split reads
        group_rumi_reads(out)
    return out


def fuse_rumi_reads(dsk: dict[Any, Any]) -> int:
    """Fold chains of indexing tasks into the Rumi read they start from, in place.

    Parameters
    ----------
    dsk : dict
        An optimized low-level graph (keys to ``GraphNode``).

    Returns
    -------
    int
        How many chains were folded.
    """
    folded = 0
    for node in dsk.values():
        if not isinstance(node, Task):
            continue
        inner = subgraph(node)
        if inner is None:
            continue
        graph, names, inputs = inner
        outside = dict(zip(names, inputs, strict=True))
        changed = False
        for key in list(graph):
            fused = _fold(graph, key, outside, dsk)
            if fused is not None:
                graph[key] = fused
                changed = True
                folded += 1
        if changed:
            _prune(graph, node.args[1])
    return folded


def _index(value: Any) -> Any:
    return value.value if isinstance(value, DataNode) else value


def _producer(graph: Mapping[Any, Any], ref: Any) -> tuple[Any, Any] | None:
    """Return ``(key, task)`` producing ``ref`` inside ``graph``, through aliases."""
    if not isinstance(ref, TaskRef | Alias):
        return None
    key = ref.key if isinstance(ref, TaskRef) else ref.target
    for _ in range(64):  # alias chains are short; never loop forever
        node = graph.get(key)
        if isinstance(node, Alias) and node.target != key:
            key = node.target
            continue
        return (key, node) if isinstance(node, Task) else None
    return None


def _fold(graph: Mapping[Any, Any], key: Any, outside: Mapping[Any, Any],
          dsk: Mapping[Any, Any]) -> Task | None:
    """Return one read task equal to the chain ending at ``graph[key]``, or None."""
    task = graph[key]
    if not isinstance(task, Task) or task.func not in _INDEXES or len(task.args) not in (2, 4):
        return None
    index = _index(task.args[1])
    root: Task | None = None
    steps = 0
    current = task
    while True:
        found = _producer(graph, current.args[0])
        if found is None:
            break
        _, below = found
        if below.func not in _INDEXES or len(below.args) not in (2, 4):
            break
        try:
            index = fuse_slice(_index(below.args[1]), index)
        except (NotImplementedError, TypeError, IndexError):
            return None
        current = below
        steps += 1
        if below.func in _READS:
            root = below
            break
    if root is None or steps < 1 or not _reads_rumi(root.args[0], graph, outside, dsk):
        return None
    return Task(key, root.func, root.args[0], index, *root.args[2:])


def _reads_rumi(source: Any, graph: Mapping[Any, Any], outside: Mapping[Any, Any],
                dsk: Mapping[Any, Any]) -> bool:
    """Return whether a read's array argument is (xarray's adapter over) a Rumi array."""
    value = source
    for _ in range(8):
        if isinstance(value, TaskRef | Alias):
            ref = value.key if isinstance(value, TaskRef) else value.target
            if ref in graph:
                value = graph[ref]
            elif ref in outside:
                value = outside[ref]
            elif ref in dsk:
                value = dsk[ref]
            else:
                return False
        elif isinstance(value, DataNode):
            value = value.value
        elif isinstance(value, GraphNode):
            return False
        else:
            return _backed_by_rumi(value)
    return False


def _backed_by_rumi(value: Any) -> bool:
    """Return whether ``value`` is, or wraps (xarray adapters' ``.array``), a Rumi array.

    Recognised by the class attribute ``rumi_backend_array`` rather than by
    importing the backend, which imports this module.
    """
    for _ in range(32):  # xarray's wrapper chains are a handful deep
        if value is None:
            return False
        if getattr(type(value), "rumi_backend_array", False):
            return True
        value = getattr(value, "array", None)
    return False


def _prune(graph: dict[Any, Any], out_key: Any) -> None:
    """Drop inner tasks the output no longer needs (the inner graph runs every task)."""
    needed: set[Any] = set()
    stack = [out_key]
    while stack:
        key = stack.pop()
        if key in needed or key not in graph:
            continue
        needed.add(key)
        node = graph[key]
        stack.extend(getattr(node, "dependencies", ()) or ())
    for key in [k for k in graph if k not in needed]:
        del graph[key]


# --- a chunk read shared by selections becomes their own reads --------------------------

#: A shared chunk read is split when its consumers' selections add up to at most
#: this fraction of the chunk (else reading the chunk once is the cheaper plan).
SPLIT_FRACTION = 0.5


def split_shared_reads(dsk: dict[Any, Any], keys: Any = ()) -> int:
    """Give each selection of a shared Rumi chunk read its own read, in place.

    ``red = v.sel(band="B04"); nir = v.sel(band="B08")`` and ``(nir - red) /
    (nir + red)`` share each chunk's read: dask fuses only linear chains, so
    the chunk is read whole and both bands are sliced out of it. When every
    consumer of such a read only selects from it and together they select at
    most :data:`SPLIT_FRACTION` of it, each consumer reads its own selection
    instead (and :func:`group_rumi_reads` then joins the reads that tile a box
    back into one). A consumer using the whole chunk (``a + 1``) keeps the
    shared read: each frame is then still decoded once.

    Parameters
    ----------
    dsk : dict
    keys : list, optional
        The keys the computation returns: a read among them is needed whole.

    Returns
    -------
    int
        How many shared reads were split.
    """
    from dask.core import flatten

    wanted = set(flatten(keys)) if keys else set()
    users: dict[Any, list[Any]] = {}
    for key, node in dsk.items():
        for dep in getattr(node, "dependencies", ()) or ():
            users.setdefault(dep, []).append(key)
    split = 0
    for rkey, rnode in list(dsk.items()):
        consumers = users.get(rkey, [])
        if rkey in wanted or len(consumers) < 2 or not isinstance(rnode, Task):
            continue
        if rnode.func not in _READS or len(rnode.args) not in (2, 4) or \
                not isinstance(rnode.args[0], TaskRef):
            continue
        array = dsk.get(rnode.args[0].key)
        if not isinstance(array, DataNode) or not _backed_by_rumi(array.value):
            continue
        shape: tuple[int, ...] = tuple(getattr(array.value, "shape", ()))
        base = _index(rnode.args[1])
        whole = _window(base, shape)
        if whole is None:
            continue
        plans = [_split_consumer(dsk[c], rkey, rnode, base, shape) for c in consumers]
        if any(p is None for p in plans):
            continue
        selected = sum(v for p in plans if p is not None for v in p[1])
        if selected > SPLIT_FRACTION * _volume(whole):
            continue
        for c, plan in zip(consumers, plans, strict=True):
            assert plan is not None
            dsk[c] = plan[0]
        del dsk[rkey]
        split += 1
    return split


def _volume(window: tuple[tuple[int, int], ...]) -> int:
    out = 1
    for a, b in window:
        out *= b - a
    return out


def _split_consumer(node: Any, rkey: Any, read: Task, base: Any, shape: tuple[int, ...]
                    ) -> tuple[Task, list[int]] | None:
    """Return ``node`` reading its own selections of ``read``, and their sizes; or None."""
    extra = [_index(a) for a in read.args[2:]]
    array_ref = read.args[0]

    def own_read(key: Any, index: Any, ref: Any) -> tuple[Task, int] | None:
        try:
            fused = fuse_slice(base, _index(index))
        except (NotImplementedError, TypeError, IndexError):
            return None
        window = _window(fused, shape)
        if window is None:
            return None
        return Task(key, read.func, ref, fused, *extra), _volume(window)

    if not isinstance(node, Task):
        return None
    inner = subgraph(node)
    if inner is None:
        if node.func not in _INDEXES or len(node.args) != 2 or \
                not (isinstance(node.args[0], TaskRef) and node.args[0].key == rkey):
            return None
        made = own_read(node.key, node.args[1], array_ref)
        return None if made is None else (made[0], [made[1]])
    graph, names, inputs = dict(inner[0]), inner[1], inner[2]
    bound = [n for n, v in zip(names, inputs, strict=True)
             if isinstance(v, TaskRef) and v.key == rkey]
    if len(bound) != 1:
        return None
    name = bound[0]
    outside = dict(zip(names, inputs, strict=True))
    sizes = []
    for ikey, inode in graph.items():
        if name not in (getattr(inode, "dependencies", ()) or ()):
            continue
        if not isinstance(inode, Task) or inode.func not in _INDEXES or \
                len(inode.args) != 2 or inode.args[0] != TaskRef(name):
            return None  # the chunk is used whole (or otherwise) inside: keep it shared
        index = inode.args[1]
        if isinstance(index, TaskRef):
            index = outside.get(index.key, index)
        made = own_read(ikey, index, TaskRef(array_ref.key))
        if made is None:
            return None
        graph[ikey] = made[0]
        sizes.append(made[1])
    kept = [(n, v) for n, v in zip(names, inputs, strict=True) if n != name]
    if array_ref.key not in {n for n, _ in kept}:
        kept.append((array_ref.key, TaskRef(array_ref.key)))
    return (Task(node.key, node.func, graph, node.args[1], tuple(n for n, _ in kept),
                 *(v for _, v in kept)), sizes)


# --- neighbouring chunk reads of one read group become one read -----------------------


class _Read:
    """One Rumi chunk read found in a graph, where it is and what window it reads."""

    def __init__(self, key: Any, task: Task, outer: Any | None, ref: Any, index: Any,
                 extra: list[Any], window: tuple[tuple[int, int], ...]) -> None:
        self.index = index
        self.extra = extra
        self.key = key  # the read task's key (inner key when inside a fused task)
        self.task = task
        self.outer = outer  # key of the fused task holding it, None at top level
        self.ref = ref  # the array argument, valid at top level
        self.window = window


def group_rumi_reads(dsk: dict[Any, Any]) -> int:
    """Make the chunk reads that tile part of one Rumi read group one read, in place.

    Explicit chunks smaller than the file's read group (``chunks={"time": 1,
    "band": 1, "y": 512, "x": 512}``, as rioxarray and stackstac users write
    them) make one native call, and so one request, per chunk. Here every set
    of at least two reads of one array, all inside one read group
    (``encoding["preferred_chunks"]``), whose windows tile a box exactly (so
    nothing is read that was not asked for) becomes one read task of that box
    plus one slicing task per chunk: one native call, one transport
    submission, the box bounded by the read group's bytes and freed by dask
    once its slices are taken. Keys the graph outputs are kept; the box is a
    new key. It is a graph rewrite, so it behaves the same under every
    scheduler (a distributed worker reads the box and slices it).

    Parameters
    ----------
    dsk : dict
        An optimized low-level graph.

    Returns
    -------
    int
        How many group reads were made.
    """
    found: dict[tuple[Any, ...], list[_Read]] = {}
    arrays: dict[int, Any] = {}  # id of an adapter -> the Rumi array under it (or None)
    for key, node in list(dsk.items()):
        if not isinstance(node, Task):
            continue
        inner = subgraph(node)
        if inner is None:
            if len(node.args) >= 2:
                _collect(found, key, node, None, node.args[0], _index(node.args[1]),
                         [_index(a) for a in node.args[2:]], dsk, arrays)
            continue
        graph, names, inputs = inner
        outside = dict(zip(names, inputs, strict=True))
        for ikey, inode in graph.items():
            if isinstance(inode, Task) and len(inode.args) >= 2:
                # Blockwise fusion passes the array, the index (and asarray, lock)
                # as inputs of the fused task: look them up outside.
                args = [outside.get(a.key, a) if isinstance(a, TaskRef) else a
                        for a in inode.args]
                if any(isinstance(a, TaskRef) and a.key in graph for a in args):
                    continue  # reads something computed inside: not a source read
                _collect(found, ikey, inode, key, args[0], _index(args[1]),
                         [_index(a) for a in args[2:]], dsk, arrays)
    made = 0
    for (_, _, gid), reads in found.items():
        box = _tiled_box(reads)
        if box is None:
            continue
        first = reads[0]
        name = f"rumi-read-group-{_key_name(first.ref)}"
        gkey = (name, *gid)
        index = tuple(slice(a, b) for a, b in box)
        # The chunk reads' own getter, asarray and lock, as from_array set them.
        dsk[gkey] = Task(gkey, first.task.func, first.ref, index, *first.extra)
        for read in reads:
            rel = _relative(read, box)
            # A view, not a copy (dask's chunk getitem copies small slices): the
            # views tile the box exactly, so together they hold just its memory.
            take = chunk_getitem if all(isinstance(k, int) for k in rel) else operator.getitem
            slicer = Task(read.key, take, TaskRef(gkey), rel)
            if read.outer is None:
                dsk[read.key] = slicer
            else:
                dsk[read.outer] = _with_input(dsk[read.outer], read.key, slicer)
        made += 1
    return made


def _key_name(ref: Any) -> str:
    key = ref.key if isinstance(ref, TaskRef) else id(ref)
    return str(key[0] if isinstance(key, tuple) else key)


def _collect(found: dict[tuple[Any, ...], list[_Read]], key: Any, task: Task,
             outer: Any | None, ref: Any, index: Any, extra: list[Any],
             dsk: Mapping[Any, Any], arrays: dict[int, Any]) -> None:
    if task.func not in _READS or len(task.args) not in (2, 4):
        return
    if any(isinstance(a, GraphNode) for a in extra):
        return
    if not isinstance(ref, TaskRef | DataNode):
        return
    value: Any = ref
    if isinstance(value, TaskRef):
        value = dsk.get(value.key)
    if not isinstance(value, DataNode):
        return
    if id(value.value) not in arrays:  # one walk per adapter, not per chunk
        arrays[id(value.value)] = _plain_rumi_array(value.value)
    array = arrays[id(value.value)]
    if array is None or array.read_group is None:
        return
    window = _window(index, array.shape)
    if window is None:
        return
    group = array.read_group
    gid = tuple(_group_of(a, g) for (a, _), g in zip(window, group, strict=True))
    if any(_group_of(b - 1, g) != i for (_, b), g, i in zip(window, group, gid, strict=True)):
        return  # spans two read groups
    found.setdefault((id(value.value), len(task.args), gid), []).append(
        _Read(key, task, outer, ref, index, extra, window))


def _group_of(position: int, group: int | tuple[int, ...]) -> int:
    """Return the read group holding ``position``: groups of one size, or listed sizes."""
    if isinstance(group, int):
        return position // group
    # Scenes of different numbers of steps: one group per scene along time.
    return bisect.bisect_right(list(itertools.accumulate(group)), position)


def _plain_rumi_array(value: Any) -> Any:
    """Return the Rumi array under xarray's adapters when nothing selects on the way."""
    from xarray.core import indexing

    for _ in range(32):
        if value is None:
            return None
        if getattr(type(value), "rumi_backend_array", False):
            return value
        if isinstance(value, indexing.LazilyVectorizedIndexedArray):
            return None
        if isinstance(value, indexing.LazilyIndexedArray) and not all(
                isinstance(k, slice) and k == slice(None) for k in value.key.tuple):
            return None  # a selection made before chunking: coordinates differ
        value = getattr(value, "array", None)
    return None


def _window(index: Any, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...] | None:
    """Return ``(start, stop)`` per dimension of an index of ints and unit slices."""
    if not isinstance(index, tuple) or len(index) != len(shape):
        return None
    out = []
    for k, n in zip(index, shape, strict=True):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step != 1 or stop <= start:
                return None
            out.append((start, stop))
        elif isinstance(k, int) and not isinstance(k, bool) and 0 <= k < n:
            out.append((k, k + 1))
        else:
            return None
    return tuple(out)


def _tiled_box(reads: list[_Read]) -> tuple[tuple[int, int], ...] | None:
    """Return the box the reads' windows tile exactly (no gap, no overlap), or None."""
    import numpy as np

    windows = sorted({r.window for r in reads})
    if len(windows) < 2:
        return None
    ndim = len(windows[0])
    box = tuple((min(w[d][0] for w in windows), max(w[d][1] for w in windows))
                for d in range(ndim))
    # Cover the box with the grid the windows' edges make and count how often
    # each grid cell is covered: exactly once everywhere means they tile it.
    edges = [sorted({e for w in windows for e in w[d]}) for d in range(ndim)]
    if math.prod(len(e) - 1 for e in edges) > 2**20:
        return None  # a grid this fine is no chunk grid: leave the reads apart
    where = [{e: i for i, e in enumerate(dim)} for dim in edges]
    counts = np.zeros(tuple(len(e) - 1 for e in edges), dtype=np.int32)
    for w in windows:
        counts[tuple(slice(where[d][a], where[d][b]) for d, (a, b) in enumerate(w))] += 1
    return box if bool((counts == 1).all()) else None


def _relative(read: _Read, box: tuple[tuple[int, int], ...]) -> tuple[Any, ...]:
    """Return the read's index into the box's block (integers stay integers)."""
    out: list[Any] = []
    for k, (start, stop), (a, _) in zip(read.index, read.window, box, strict=True):
        out.append(start - a if not isinstance(k, slice) else slice(start - a, stop - a))
    return tuple(out)


def _with_input(fused: Task, inner_key: Any, node: Task) -> Task:
    """Return the fused task with ``graph[inner_key]`` replaced (its inputs recomputed)."""
    found = subgraph(fused)
    assert found is not None
    # A copy: blockwise fusion gives every chunk's task the same inner dict (the
    # chunks differ by their inputs). The read it held is replaced under its
    # key, so nothing is left to prune.
    graph, names, inputs = dict(found[0]), found[1], found[2]
    graph[inner_key] = node
    gkey = node.args[0].key
    if gkey in names:
        return Task(fused.key, fused.func, graph, *fused.args[1:])
    # The fused task's function runs ``graph`` with ``names`` bound to its
    # inputs (as dask's Task.fuse builds it): the group read is one more.
    return Task(fused.key, fused.func, graph, fused.args[1], (*names, gkey), *inputs,
                TaskRef(gkey))
