"""Resolve what a user passes as a source into something librumi reads."""

from __future__ import annotations

from typing import Any

from rumi_xarray.sources import location, transport


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
        Paths (absolute, ``~`` expanded) and URLs librumi reads itself stay
        strings, GDAL virtual paths become the URLs they name; fsspec-only
        URLs and file objects become range-read sources (see
        :func:`rumi_xarray.sources.location.locate`).

    Raises
    ------
    RumiSourceTypeError
        ``obj`` is none of these (also a ``TypeError``).
    RumiUnsupportedError
        A GDAL virtual path that names no URL (``/vsimem/``, ``/vsizip/``...).
    """
    if isinstance(obj, transport.RangeSource):
        return obj
    where = location.locate(obj)
    if where.kind == "bytes":
        return bytes(obj)
    if where.kind == "file":
        return transport.FileObjectSource(obj)
    assert where.target is not None  # paths and URLs have one
    if where.kind == "fsspec":
        return transport.FsspecSource(where.target, storage_options)
    return where.target
