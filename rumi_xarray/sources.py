"""Resolve what a user passes as a source into something librumi reads."""

from __future__ import annotations

import os
from typing import Any


def resolve(obj: Any, storage_options: dict[str, Any] | None = None) -> str | bytes:
    """Return a path/URL string or the file's bytes.

    Parameters
    ----------
    obj : str, os.PathLike, bytes-like
        What the user gave.
    storage_options : dict, optional
        fsspec options (for protocols librumi cannot reach).

    Returns
    -------
    str or bytes
    """
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    try:
        path = os.fspath(obj)
    except TypeError:
        raise TypeError(
            f"cannot open {type(obj).__name__!r} as a Rumi source: expected a path, "
            f"a URL or bytes") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if "://" not in path:
        path = os.path.abspath(os.path.expanduser(path))
    return path
