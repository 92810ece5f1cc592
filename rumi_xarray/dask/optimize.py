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
default :func:`dask.array.optimization.optimize`, or the user's), then folds
every remaining chain ``getter -> getitem -> getitem ...`` inside a fused
task into one ``getter`` call with the composed index (dask's own public
:func:`~dask.array.optimization.fuse_slice`), but only where the chain's
read is of a Rumi array; every other task of every graph is returned as
dask made it. A chunk shared by several consumers is not in such a chain
(dask fuses linear chains only), so it is still read once, whole.

:func:`install` sets the hook the first time a Rumi array is sized in a
process that has imported dask (xarray does that when it chunks a
variable), never at import. Arrays stay plain ``dask.array.Array`` objects;
their names, keys and chunks do not change. Under dask's array query
planning the collection's ``__dask_optimize__`` is a no-op that this hook
does not reach (array-expr lowers expressions itself): there, selections do
not reach the read at all, and read groups default to 16 MiB instead.
"""

from __future__ import annotations

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

    from rumi_xarray.dask.sizes import query_planning

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
