"""Find the Rumi array, and the selection on it, under xarray's lazy wrappers.

xarray wraps a backend array in lazily indexed adapters (``LazilyIndexedArray``
for selections, copy-on-write and CF-decoding wrappers); all of them expose
the wrapped array as ``.array`` and index lazily. This is the one place that
walks that chain.
"""

from __future__ import annotations

from typing import Any

from xarray.core import indexing

from rumi_xarray.backend.array import RumiBackendArray


def find_backend(data: Any) -> tuple[RumiBackendArray, indexing.ExplicitIndexer | None] | None:
    """Return the Rumi array under ``data`` and the (composed) key selected on it.

    Parameters
    ----------
    data : object
        A variable's ``_data``, or what indexing it lazily returned.

    Returns
    -------
    tuple or None
        ``(array, key)``: ``key`` is the ``LazilyIndexedArray`` key closest to
        the array (xarray composes successive selections into it), ``None``
        when the array is not indexed. ``None`` overall when ``data`` is not
        Rumi-backed.
    """
    inner = data
    key = None
    while inner is not None and not isinstance(inner, RumiBackendArray):
        if isinstance(inner, indexing.LazilyIndexedArray | indexing.LazilyVectorizedIndexedArray):
            key = inner.key
        inner = getattr(inner, "array", None)
    if inner is None:
        return None
    return inner, key

