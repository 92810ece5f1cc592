"""Read a dask array's graph: which array reads its computation will run.

``explain()`` must tell what a dask-backed variable will read, after dask has
culled the graph and fused selections into the reads (legacy graphs fuse a
slice of a chunk into the chunk's ``getter`` call, so a chip reads only its
window). It therefore asks dask to optimize the graph exactly as ``compute``
would and collects every ``getter`` task left, with the object it reads and
the key it passes: the same calls the computation will make.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dask.array.core import getter, getter_inline, getter_nofancy
from dask.task_spec import Alias, DataNode, GraphNode, Task, TaskRef

_GETTERS = (getter, getter_inline, getter_nofancy)


def optimized_graph(array: Any) -> dict[Any, Any]:
    """Return the low-level graph ``compute`` would run for a dask array.

    Parameters
    ----------
    array : dask.array.Array

    Returns
    -------
    dict
    """
    import dask
    from dask.core import flatten
    from dask.optimization import cull

    if hasattr(array, "expr"):  # dask's array query planning (array-expr) mode
        optimized = array.optimize()
    else:
        (optimized,) = dask.optimize(array)
    # Array-expr graphs are culled by the scheduler, not by optimize: cull here.
    graph, _ = cull(dict(optimized.__dask_graph__()), list(flatten(optimized.__dask_keys__())))
    return dict(graph)


def getter_calls(array: Any) -> list[tuple[Any, Any]]:
    """Return ``(source object, key)`` of every array read a dask array's compute runs.

    Parameters
    ----------
    array : dask.array.Array

    Returns
    -------
    list of tuple
        The object ``dask.array.from_array`` wrapped (for xarray variables,
        xarray's indexing adapter) and the index passed to it.
    """
    graph = optimized_graph(array)
    top = _Scope({key: (node, None) for key, node in graph.items()}, None)
    found = []
    for node in graph.values():
        for task, scope in _tasks(node, top):
            if task.func in _GETTERS and len(task.args) >= 2:
                found.append((_resolve(task.args[0], scope), _resolve(task.args[1], scope)))
    return found


class _Scope:
    """Keys visible inside a (fused) task: its subgraph's, then its parents'."""

    def __init__(self, entries: dict[Any, tuple[Any, _Scope | None]],
                 parent: _Scope | None) -> None:
        self.entries = entries
        self.parent = parent

    def find(self, key: Any) -> tuple[Any, _Scope] | None:
        scope: _Scope | None = self
        while scope is not None:
            if key in scope.entries:
                node, home = scope.entries[key]
                return node, home or scope
            scope = scope.parent
        return None


def subgraph(task: Task) -> tuple[dict[Any, Any], tuple[Any, ...], tuple[Any, ...]] | None:
    """Return ``(inner graph, input keys, inputs)`` of a fused task, or None.

    dask fuses tasks into one that runs an inner graph: its arguments are the
    inner graph, the output key, the inner names of its inputs and the inputs.
    """
    args = task.args
    if (len(args) >= 3 and isinstance(args[0], dict) and isinstance(args[2], tuple)
            and len(args[2]) == len(args) - 3
            and all(isinstance(v, GraphNode) for v in args[0].values())):
        return args[0], args[2], tuple(args[3:])
    return None


def _tasks(node: Any, scope: _Scope) -> Iterator[tuple[Task, _Scope]]:
    """Yield every task nested in a graph node, with the scope its references resolve in."""
    stack: list[tuple[Any, _Scope]] = [(node, scope)]
    while stack:
        item, here = stack.pop()
        if isinstance(item, Task):
            inner = subgraph(item)
            if inner is not None:
                graph, names, inputs = inner
                child = _Scope({}, here)
                child.entries.update({k: (v, child) for k, v in graph.items()})
                child.entries.update({k: (v, here) for k, v in zip(names, inputs, strict=True)})
                stack.extend((v, child) for v in graph.values())
                continue
            yield item, here
            stack.extend((a, here) for a in item.args)
            stack.extend((a, here) for a in (item.kwargs or {}).values())
        elif isinstance(item, DataNode):
            continue
        elif isinstance(item, GraphNode):
            stack.extend((a, here) for a in getattr(item, "args", ()) or ())
        elif isinstance(item, (list, tuple)):
            stack.extend((a, here) for a in item)


def _resolve(value: Any, scope: _Scope) -> Any:
    """Return the value behind a reference or data node (the array, the index)."""
    for _ in range(32):  # references chain through aliases, never in a loop this long
        if isinstance(value, TaskRef | Alias):
            key = value.key if isinstance(value, TaskRef) else value.target
            found = scope.find(key)
            if found is None:
                break
            value, scope = found
        elif isinstance(value, DataNode):
            value = value.value
        else:
            break
    return value
