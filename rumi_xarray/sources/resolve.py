"""Resolve what a user passes as a source into something librumi reads.

``storage_options`` are never dropped: a URL librumi's transport (Karu) reads
itself, such as ``s3://``, is read through fsspec when options are given, since
Karu takes its settings only from process-wide environment variables
(``AWS_*``, ``KARU_*``), which one open cannot set for itself without changing
every other read of the process (and of its threads). The options are checked
against the fsspec filesystem's keywords first, because fsspec filesystems
swallow unknown keywords silently (``region=`` would be ignored by s3fs).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any

from rumi_xarray.errors import argument_error
from rumi_xarray.sources import location, redact, transport

#: Schemes whose fsspec filesystem hands every keyword it does not name to each request
#: (``headers=``, ``auth=``...): any key may be meant, so none is refused.
_FORWARDS_EVERY_KEYWORD = frozenset({"http", "https"})
#: Keywords every fsspec filesystem takes (instance and listings caches), beyond its own.
_FSSPEC_COMMON = frozenset({"skip_instance_cache", "use_listings_cache",
                            "listings_expiry_time", "max_paths"})


def resolve(obj: Any, storage_options: dict[str, Any] | None = None
            ) -> str | bytes | transport.RangeSource:
    """Return a path/URL string or the file's bytes.

    Parameters
    ----------
    obj : str, os.PathLike, bytes-like or binary file object
        What the user gave.
    storage_options : dict, optional
        fsspec options. For a URL librumi reads itself (``s3://``, ``gs://``,
        ``az://``, ``hf://``, ``http(s)://``), giving any makes the read go
        through that scheme's fsspec filesystem (s3fs for ``s3://``) with them:
        the options win over the environment, which librumi's own transport
        would read instead (botocore still takes from ``AWS_*`` variables what
        the options leave unsaid). Without them such URLs are read by librumi
        with its ``AWS_*``/``KARU_*`` environment.

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
    RumiArgumentError
        ``storage_options`` for a URL librumi reads itself hold a key its fsspec
        filesystem does not take, or that filesystem's package is not installed.

    Examples
    --------
    >>> from rumi_xarray.sources.resolve import resolve
    >>> resolve("https://example.com/scene.rumi")  # librumi reads it itself
    'https://example.com/scene.rumi'
    >>> resolve("s3://bucket/scene.rumi", storage_options={"regoin": "eu-west-1"})
    Traceback (most recent call last):
    ...
    rumi_xarray.errors.RumiArgumentError: s3://bucket/scene.rumi: storage_options key 'regoin' ...
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
    if where.kind == "native" and storage_options:
        assert where.scheme is not None  # URLs have one
        checked = checked_options(where.target, where.scheme, storage_options)
        return transport.FsspecSource(where.target, checked)
    return where.target


def checked_options(url: str, scheme: str, storage_options: Mapping[str, Any]
                    ) -> dict[str, Any]:
    """Return ``storage_options`` as a dict once the fsspec filesystem of ``scheme`` takes them.

    Parameters
    ----------
    url : str
        The URL they are for (named, redacted, in errors).
    scheme : str
        Its scheme (``s3``, ``gs``...).
    storage_options : mapping
        The user's options; their values are never shown.

    Returns
    -------
    dict

    Raises
    ------
    RumiArgumentError
        A key the filesystem does not take, or its package is not installed.

    Examples
    --------
    >>> checked_options("s3://bucket/x.rumi", "s3", {"anon": True})
    {'anon': True}
    """
    name = redact.redact(url)
    try:
        accepted = _keywords(scheme)
    except ImportError as exc:
        raise argument_error(
            f"{name}: storage_options were given, and librumi's own transport takes its "
            f"settings only from environment variables, so this URL is read through fsspec, "
            f"which needs a package that is not installed ({exc}). Install it (for s3:// "
            f"`pip install \"rumi-xarray[s3]\"`), or drop storage_options and set the "
            f"AWS_*/GCS_*/AZURE_* variables librumi reads", "storage_options",
            name) from None
    if accepted is not None:
        unknown = sorted(str(k) for k in storage_options if k not in accepted)
        if unknown:
            hint = (" (the region goes in client_kwargs={'region_name': ...})"
                    if scheme in ("s3", "s3a") and any("region" in k for k in unknown) else "")
            raise argument_error(
                f"{name}: storage_options key {', '.join(map(repr, unknown))} is not one "
                f"{scheme}:// takes through fsspec{hint}; it takes "
                f"{', '.join(sorted(accepted))}", "storage_options", name)
    return dict(storage_options)


@functools.cache
def _keywords(scheme: str) -> frozenset[str] | None:
    """Return the keywords the fsspec filesystem of ``scheme`` takes; None: any."""
    import fsspec

    cls = fsspec.get_filesystem_class(scheme)
    if scheme in _FORWARDS_EVERY_KEYWORD:
        return None
    names = set(_FSSPEC_COMMON)
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        names.update(p.name for p in inspect.signature(init).parameters.values()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                     and p.name != "self")
    return frozenset(names)

