"""Where a source lives: the one place that tells local paths, URLs and in-memory data apart.

Every module that needs to know whether a source is a local file (to stat
it, hash its tree, write it, suggest ``convert``), a URL librumi's own
transport (Karu) reads, a URL only fsspec reaches, file content in memory or
an open file object asks :func:`locate`; no module tests strings for ``://``.

GDAL virtual paths, as users of GDAL workflows type them, are URLs under
another name: ``/vsicurl/https://host/x.rumi`` is ``https://host/x.rumi`` and
``/vsis3/bucket/key`` is ``s3://bucket/key``. :func:`locate` maps them to those
URLs, so they are read, cached, named and redacted as the URLs they stand for.
GDAL's other virtual file systems (``/vsimem/``, ``/vsizip/``, ``/vsisubfile/``...)
name things that only exist inside GDAL or need an archive reader: they are
refused with :class:`~rumi_xarray.errors.RumiUnsupportedError`, naming the path
and what to pass instead. The tables of schemes and prefixes are in
:mod:`rumi_xarray.sources.schemes`.

Standard library only, as are the modules it imports (``errors``, ``redact``,
``schemes``), so ``model/`` may use it; nothing here opens a file or the network.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal, NamedTuple

from rumi_xarray.errors import RumiSourceTypeError, RumiUnsupportedError
from rumi_xarray.sources.redact import redact
from rumi_xarray.sources.schemes import (
    NATIVE_SCHEMES,
    VSI_CURL,
    VSI_REFUSED,
    VSI_STORES,
    written_as_url,
)

#: ``/vsiNAME/`` or ``/vsiNAME_streaming/`` at the start of a path.
_VSI = re.compile(r"/(vsi[a-z0-9]*?)(_streaming)?/")

Kind = Literal["local", "native", "fsspec", "bytes", "file"]


class Source(NamedTuple):
    """Where one source lives, and what to hand the reader that reaches it (immutable).

    A named tuple rather than a frozen dataclass: it is built for every source
    of a catalog, and a tuple is built several times faster.

    Parameters
    ----------
    kind : {"local", "native", "fsspec", "bytes", "file"}
        ``"local"``: a path on this machine. ``"native"``: a URL librumi's own
        transport reads (:data:`NATIVE_SCHEMES`). ``"fsspec"``: a URL (or an
        fsspec chain ``a::b://...``) only fsspec reaches. ``"bytes"``: the
        file's content in memory. ``"file"``: an open binary file object.
    target : str or None
        Paths and URLs: what to open. A local path as given with ``~``
        expanded, made absolute; a URL as given, or the URL a GDAL virtual
        path stands for. ``None`` for bytes and file objects.
    scheme : str or None
        A URL's scheme, lower case (the first protocol of an fsspec chain);
        ``None`` for everything else.
    given : str or None
        The path or URL as the user wrote it (``os.fspath`` of a path-like);
        ``None`` for bytes and file objects.
    """

    kind: Kind
    target: str | None = None
    scheme: str | None = None
    given: str | None = None

    @property
    def local(self) -> bool:
        """Whether this is a path on this machine (one that can be stat'ed, listed, written)."""
        return self.kind == "local"

    @property
    def url(self) -> bool:
        """Whether this is a URL (read by librumi's transport or by fsspec)."""
        return self.kind in ("native", "fsspec")

    @property
    def in_memory(self) -> bool:
        """Whether this is file content in memory or an open file object."""
        return self.kind in ("bytes", "file")


def locate(obj: Any) -> Source:
    """Return where ``obj`` lives.

    Parameters
    ----------
    obj : str, os.PathLike, bytes-like, binary file object or range source
        A path or URL (``str``, ``pathlib.Path``, any ``os.PathLike``), a GDAL
        virtual path (``/vsicurl/https://...``, ``/vsis3/bucket/key``...), the
        file's content (``bytes``, ``bytearray``, ``memoryview``), an object
        with ``read()`` and ``seek()``, or an object that carries its own
        :class:`Source` as ``.location`` (the range sources of
        :mod:`rumi_xarray.sources.transport`).

    Returns
    -------
    Source

    Raises
    ------
    RumiSourceTypeError
        ``obj`` is none of these (also a ``TypeError``).
    RumiUnsupportedError
        A GDAL virtual path of a file system that maps to no URL
        (``/vsimem/``, ``/vsizip/``...), or ``/vsicurl/`` of something that is
        not an ``http(s)`` URL.
    """
    if type(obj) is str:  # the common case, first: catalogs locate every row
        return locate_text(obj)
    carried = getattr(obj, "location", None)
    if isinstance(carried, Source):
        return carried
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return Source("bytes")
    if hasattr(obj, "read") and hasattr(obj, "seek"):
        return Source("file")
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
    return locate_text(path)


def locate_text(text: str) -> Source:
    """Return where the path or URL ``text`` lives (:func:`locate` for strings).

    Parameters
    ----------
    text : str

    Returns
    -------
    Source

    Raises
    ------
    RumiUnsupportedError
        ``text`` is a GDAL virtual path that maps to no URL.
    """
    url = _vsi_url(text)
    if url is not None:
        return _url(url, given=text)
    if written_as_url(text) or len(chain_parts(text)) > 1:
        return _url(text, given=text)
    return Source("local", os.path.abspath(os.path.expanduser(text)), None, text)


def chain_parts(text: str) -> list[str]:
    """Return the URLs of an fsspec chain (``simplecache::s3://b/k``): one for a plain URL.

    ``::`` inside brackets is an IPv6 address (``http://[::1]/x``), not a link.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of str
    """
    if "::" not in text:
        return [text]
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(text):
        char = text[i]
        depth += char == "["
        depth -= char == "]" and depth > 0
        if depth == 0 and text.startswith("::", i):
            parts.append(text[start:i])
            start = i = i + 2
            continue
        i += 1
    return [*parts, text[start:]]


def _url(url: str, given: str) -> Source:
    # An fsspec chain ("simplecache::s3://...") is fsspec's, whatever its last protocol.
    chain = chain_parts(url)
    if len(chain) > 1:
        return Source("fsspec", url, chain[0].split("://", 1)[0].lower(), given)
    scheme = url.split("://", 1)[0].lower()
    return Source("native" if scheme in NATIVE_SCHEMES else "fsspec", url, scheme, given)


def _vsi_url(text: str) -> str | None:
    """Return the URL a GDAL virtual path stands for; ``None`` for anything else."""
    match = _VSI.match(text) if text.startswith("/vsi") else None
    if match is None:
        return None
    name, rest = match.group(1), text[match.end():]
    if name == VSI_CURL:
        if re.match(r"https?://", rest, re.IGNORECASE):
            return rest
        raise _unsupported(text, f"/{VSI_CURL}/ reads http(s) URLs only")
    if name in VSI_STORES and rest:
        return VSI_STORES[name] + rest
    if name in VSI_STORES:
        raise _unsupported(text, f"/{name}/ needs a bucket or container and a key")
    if name not in VSI_REFUSED:
        return None  # a local directory that happens to start with "vsi"
    raise _unsupported(text, f"GDAL's /{name}/ virtual file system has no URL equivalent")


def _unsupported(path: str, why: str) -> RumiUnsupportedError:
    read = ", ".join(f"/{name}/" for name in (VSI_CURL, *VSI_STORES))
    err = RumiUnsupportedError(
        f"{redact(path)}: {why}. Pass a local path, a URL (http(s)://, s3://, gs://, "
        f"az://, abfs://, hf://, or any URL fsspec reads, such as zip:// or memory://), "
        f"the file's bytes or an open file object (GDAL's {read} paths are read as the "
        f"URLs they name)")
    err.source = redact(path)
    return err
