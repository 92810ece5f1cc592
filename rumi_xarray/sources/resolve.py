"""Resolve what a user passes as a source into something librumi reads."""

from __future__ import annotations

import os
from typing import Any

from rumi_xarray.errors import RumiSourceTypeError
from rumi_xarray.sources import transport


def resolve(obj: Any, storage_options: dict[str, Any] | None = None
            ) -> str | bytes | transport.RangeSource:
    """Return a path/URL string or the file's bytes.

    Parameters
    ----------
    obj : str, os.PathLike, bytes-like or binary file object
        What the user gave.
    storage_options : dict, optional
        fsspec options (for protocols librumi cannot reach).

    Returns
    -------
    str, bytes or RangeSource
        Paths and URLs librumi reads itself stay strings; fsspec-only URLs
        and file objects become range-read sources.

    Raises
    ------
    RumiSourceTypeError
        ``obj`` is none of these (also a ``TypeError``).
    """
    if isinstance(obj, transport.RangeSource):
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    if hasattr(obj, "read") and hasattr(obj, "seek"):
        return transport.FileObjectSource(obj)
    try:
        path = os.fspath(obj)
    except TypeError:
        # Only plain numbers are echoed: other objects (dicts, lists...) may
        # hold credentials, so only their type is named.
        shown = (f"{obj!r} ({type(obj).__name__})"
                 if obj is None or isinstance(obj, (int, float, complex))
                 else f"a {type(obj).__name__} object")
        raise RumiSourceTypeError(
            f"cannot open {shown} as a Rumi source: "
            f"expected a path (str or os.PathLike), a URL, bytes, or a binary file "
            f"object with read() and seek()") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if transport.needs_fsspec(path):
        return transport.FsspecSource(path, storage_options)
    if "://" not in path:
        path = os.path.abspath(os.path.expanduser(path))
    return path
