"""What this process's dask is configured to do: chunk size, query planning, numpy conversion.

Facts only, read from dask (or, before dask is imported, from the environment
variables it reads itself); nothing here decides a chunk. How rumi_xarray
chooses its chunks from these facts is :mod:`rumi_xarray.dask.chunks`.
"""

from __future__ import annotations

import os
import sys


def chunk_size() -> int | None:
    """Return dask's ``array.chunk-size`` in bytes, or None when dask is not in use.

    dask is not imported for this: a process that has not imported it has
    not configured it either.

    Returns
    -------
    int or None
    """
    if "dask" not in sys.modules:
        return None
    import dask
    from dask.utils import parse_bytes

    value = dask.config.get("array.chunk-size", None)
    if value is None:
        return None
    return int(parse_bytes(value)) if isinstance(value, str) else int(value)


def query_planning() -> bool:
    """Return whether dask arrays will use dask's array query planning (array-expr).

    Read without importing dask when it is not imported yet: dask reads its
    configuration from the same environment variable when it is.

    Returns
    -------
    bool
    """
    if "dask.array" in sys.modules:
        import dask.array

        return bool(dask.array.array_expr_enabled())
    if "dask" in sys.modules:
        import dask

        return bool(dask.config.get("array.query-planning", None))
    text = os.environ.get("DASK_ARRAY__QUERY_PLANNING", "")
    return text.strip().lower() in ("true", "1", "yes", "on")


def converts_to_numpy() -> bool:
    """Return whether ``numpy.asarray`` of a dask array computes it.

    Under dask's array query planning (dask 2025.4 to at least 2026.8) the
    array collection has no ``__array__``, so ``numpy.asarray`` and xarray's
    ``.values`` wrap the lazy array in a 0-d object array instead of computing
    it (dask/dask#11922). Users must then call ``.compute()`` or ``.load()``.

    Returns
    -------
    bool
    """
    import dask.array

    return hasattr(dask.array.Array, "__array__")
