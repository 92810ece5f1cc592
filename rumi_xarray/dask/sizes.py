"""Byte sizes as dask spells them (``"128MiB"``), and dask's configured chunk size."""

from __future__ import annotations

import os
import sys


def parse_bytes(text: str) -> int:
    """Return the number of bytes in ``text`` (``"64MiB"``, ``"1e6"``, ``"2 GB"``).

    Parameters
    ----------
    text : str

    Returns
    -------
    int

    Raises
    ------
    ValueError
    """
    from dask.utils import parse_bytes as dask_parse_bytes

    return int(dask_parse_bytes(text))


def dask_chunk_bytes(default: int) -> int:
    """Return dask's ``array.chunk-size`` when dask is in use, else ``default``.

    dask is not imported for this: a process that has not imported it has
    not configured it either.

    Parameters
    ----------
    default : int

    Returns
    -------
    int
    """
    if "dask" not in sys.modules:
        return default
    import dask

    value = dask.config.get("array.chunk-size", None)
    if value is None:
        return default
    return parse_bytes(value) if isinstance(value, str) else int(value)


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

