"""Where a catalog may send a reader: hrefs resolved against their catalog, and refused.

Catalog tables and STAC Items (JSON files, stac-geoparquet archives, Items in
memory) name their files by href. Every door that follows an href asks
:meth:`Hrefs.follow`, the one place that

- resolves a relative href against the catalog's own location (the folder of
  the table or Items file, or the folder a table folder is), as a path of files
  or a URL: never against a process's working directory, and never reading
  ``#`` or ``?`` in a folder's name as a fragment or a query;
- refuses, for a catalog read from a remote location (any URL but ``file://``
  and ``memory://``), hrefs to local files (``file://``, absolute paths, fsspec
  chains through local file systems), to hosts that are loopback, link-local,
  private or otherwise not global (IP literals in every spelling curl accepts,
  ``localhost`` and ``*.internal`` names), and to schemes outside
  :data:`REMOTE_SCHEMES`, unless the caller's allow-list (the ``allowed_hrefs``
  option, parsed by :func:`parse_allowed`) names them;
- refuses hrefs holding a NUL byte from any catalog, and control characters
  from remote ones.

A catalog on the local disk or in memory, and a path or URL the caller passes
directly, are the caller's own: their hrefs are resolved, not restricted.
Host names are judged as written, never looked up (a lookup costs a round trip
and its answer can change before the read); network controls are the answer to
names that resolve to private addresses.

The :class:`Hrefs` of a catalog is built once, where it is opened, with the
allow-list of that moment, and travels with the cube to every dask worker:
a worker resolves and judges a row exactly as the client would.

Standard library only; nothing here opens a file or the network.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

from rumi_xarray.errors import RumiHrefError, RumiUnsupportedError
from rumi_xarray.sources.location import chain_parts, locate_text
from rumi_xarray.sources.redact import redact

__all__ = ["REMOTE_SCHEMES", "Hrefs", "parse_allowed"]

#: Schemes an href from a remote catalog may use without the caller's leave: object
#: stores and web servers. Local (``file``, ``local``), in-process (``memory``) and
#: caching or archive file systems of fsspec are not among them.
REMOTE_SCHEMES = frozenset({"http", "https", "s3", "s3a", "gs", "gcs", "az", "abfs",
                            "abfss", "adl", "hf"})
#: Catalog locations read as the caller's own (not remote): their hrefs are trusted.
_LOCAL_SCHEMES = frozenset({"file", "local", "memory"})
#: Host names that name this machine or a cloud's internal services.
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost",
                          "ip6-loopback"})
_LOCAL_SUFFIXES = (".localhost", ".internal", ".local")


@dataclass(frozen=True)
class Allowed:
    """The caller's allow-list, parsed: what a remote catalog may reach beyond the rules.

    Attributes
    ----------
    everything : bool
        ``"*"``: every href of every catalog is followed.
    schemes : frozenset of str
        ``"file:"``-style entries (``file`` also allows local paths).
    hosts : tuple of (str, int or None)
        Host names or addresses, with a port when one was given.
    networks : tuple of ipaddress networks
        ``"10.0.0.0/8"``-style entries.
    prefixes : tuple of str
        URL prefixes (``"http://127.0.0.1:8080/data/"``) and absolute local path
        prefixes (``"/data/scenes/"``).
    """

    everything: bool = False
    schemes: frozenset[str] = frozenset()
    hosts: tuple[tuple[str, int | None], ...] = ()
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    prefixes: tuple[str, ...] = ()


def parse_allowed(entries: str | Iterable[str] | None) -> tuple[str, ...]:
    """Return an allow-list as the ``allowed_hrefs`` option stores it (checked entries).

    Parameters
    ----------
    entries : str, iterable of str or None
        Entries, or one string of them separated by commas (as the environment
        variable gives them): ``"*"`` (everything), a scheme followed by a colon
        (``"file:"``, ``"memory:"``), a host (``"127.0.0.1"``,
        ``"data.example.org"``, ``"[::1]"``) optionally with a port
        (``"localhost:8080"``), a network (``"10.0.0.0/8"``), a URL prefix
        (``"http://127.0.0.1:8080/data/"``) or an absolute local path prefix
        (``"/data/scenes/"``).

    Returns
    -------
    tuple of str

    Raises
    ------
    ValueError
        An entry is none of these.

    Examples
    --------
    >>> parse_allowed("file:, 127.0.0.1:8080")
    ('file:', '127.0.0.1:8080')
    """
    if entries is None:
        return ()
    if isinstance(entries, str):
        entries = entries.split(",")
    found = []
    for entry in entries:
        if not isinstance(entry, str):
            raise ValueError(f"allow-list entries are strings, got {entry!r}")
        text = entry.strip()
        if text:
            _entry(text, Allowed())  # raises for what is none of the forms
            found.append(text)
    return tuple(found)


def _allowed(entries: tuple[str, ...]) -> Allowed:
    result = Allowed()
    for text in entries:
        result = _entry(text, result)
    return result


def _entry(text: str, into: Allowed) -> Allowed:
    """Return ``into`` with one entry added (raising ``ValueError`` for a malformed one)."""
    if "\x00" in text:
        raise ValueError(f"allow-list entry {text!r} holds a NUL byte")
    if text == "*":
        return Allowed(True, into.schemes, into.hosts, into.networks, into.prefixes)
    if "://" in text or text.startswith(("/", "~")):
        prefix = _normal_url(text) if "://" in text else _normal_path(text)
        return Allowed(into.everything, into.schemes, into.hosts, into.networks,
                       (*into.prefixes, prefix))
    if text.endswith(":") and text[:-1].replace("+", "").replace("-", "").replace(
            ".", "").isalnum():
        return Allowed(into.everything, into.schemes | {text[:-1].lower()}, into.hosts,
                       into.networks, into.prefixes)
    if "/" in text:
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ValueError(f"allow-list entry {text!r} is not a network such as "
                             f"10.0.0.0/8") from None
        return Allowed(into.everything, into.schemes, into.hosts, (*into.networks, network),
                       into.prefixes)
    try:
        parts = urlsplit(f"//{text}")
        host, port = parts.hostname, parts.port
        more = bool(parts.path or parts.query or parts.fragment or parts.username)
    except ValueError:  # a port that is not a number, an unclosed "["
        host, port, more = None, None, True
    if host and _address(_host_key(host)) is None and not all(
            c.isalnum() or c in "-._" for c in host):
        host = None
    if not host or more:
        raise ValueError(
            f"allow-list entry {text!r} is none of: '*', a scheme ('file:'), a host "
            f"('127.0.0.1', 'localhost:8080'), a network ('10.0.0.0/8'), a URL prefix "
            f"('http://127.0.0.1:8080/data/') or a local path prefix ('/data/')")
    return Allowed(into.everything, into.schemes, (*into.hosts, (_host_key(host), port)),
                   into.networks, into.prefixes)


@dataclass(frozen=True)
class Hrefs:
    """How the hrefs of one catalog resolve, and where they may lead (immutable, picklable).

    Build it with :meth:`of_catalog` where the catalog is opened; hand it to
    whatever follows the catalog's hrefs, in this process or a dask worker.

    Attributes
    ----------
    base : str or None
        The folder relative hrefs resolve against: an absolute local path, or
        a URL ending in ``/``; ``None`` for a catalog in memory (relative hrefs
        resolve against the working directory of the process that opens it).
    remote : bool
        The catalog was read from a remote location: its hrefs are restricted.
    allowed : tuple of str
        The caller's allow-list when the catalog was opened (:func:`parse_allowed`).
    """

    base: str | None = None
    remote: bool = False
    allowed: tuple[str, ...] = ()

    @classmethod
    def of_catalog(cls, location: str | None, *, folder: bool = False,
                   allowed: str | Iterable[str] | None = ()) -> Hrefs:
        """Return the rules for the hrefs of a catalog read from ``location``.

        Parameters
        ----------
        location : str or None
            Path or URL of the catalog file (or folder, with ``folder=True``);
            ``None`` for a catalog in memory.
        folder : bool, default False
            ``location`` is a folder (a partitioned table): relative hrefs
            resolve inside it rather than beside it.
        allowed : str or iterable of str, optional
            The caller's allow-list (the ``allowed_hrefs`` option).

        Returns
        -------
        Hrefs

        Examples
        --------
        >>> Hrefs.of_catalog("/data/catalog.parquet").follow("a/b.rumi", "row 0")
        '/data/a/b.rumi'
        >>> Hrefs.of_catalog("https://host/x/items.json").follow("b.rumi", "item 'b'")
        'https://host/x/b.rumi'
        """
        entries = parse_allowed(allowed)
        if location is None:
            return cls(None, False, entries)
        where = locate_text(location)
        if not where.url:
            assert where.target is not None
            path = where.target
            return cls(path if folder else os.path.dirname(path), False, entries)
        assert where.target is not None and where.scheme is not None
        url = chain_parts(where.target)[-1]  # an fsspec chain: its target file system
        scheme = url.split("://", 1)[0].lower()
        if scheme in ("file", "local"):
            path = _file_url_path(url)
            return cls(path if folder else os.path.dirname(path), False, entries)
        parts = urlsplit(url)
        path = parts.path if folder else parts.path.rsplit("/", 1)[0]
        base = f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}/"
        return cls(base, scheme not in _LOCAL_SCHEMES, entries)

    def follow(self, href: object, where: str) -> str:
        """Return the path or URL an href names, or refuse it.

        Parameters
        ----------
        href : object
            The href (or a table's path cell) as the catalog holds it.
        where : str
            The Item or row it comes from, for messages (``"STAC item 'x'"``,
            ``"catalog row 3 of s3://b/cat.parquet"``).

        Returns
        -------
        str
            An absolute local path or a URL (GDAL virtual paths as the URLs
            they name are left for :func:`~rumi_xarray.sources.location.locate`).

        Raises
        ------
        RumiHrefError
            The href is empty or not text, holds a NUL byte (or, from a remote
            catalog, a control character), or leads where a remote catalog may
            not send a reader; the message names ``where`` and the href.

        Examples
        --------
        >>> Hrefs.of_catalog("https://host/items.json").follow("/etc/passwd", "item 'a'")
        Traceback (most recent call last):
        ...
        rumi_xarray.errors.RumiHrefError: item 'a': href '/etc/passwd' is refused: ...
        """
        if isinstance(href, bytes):
            href = os.fsdecode(href)
        if not isinstance(href, str) or not href.strip():
            raise _refusal(where, repr(href)[:80], "is not a path or URL")
        refuse_nul(href, where)
        if self.remote and any(ord(c) < 0x20 or c == "\x7f" for c in href):
            raise _refusal(where, href, "holds a control character")
        target = self._resolve(href, where)
        if self.remote:
            why = self._refused(target)
            if why:
                raise _refusal(where, href, why, target)
        return target

    def _resolve(self, href: str, where: str) -> str:
        try:
            found = locate_text(href)
        except RumiUnsupportedError as exc:
            raise _refusal(where, href, "names a GDAL virtual file system that maps to no URL"
                           ) from exc
        if found.url:
            assert found.target is not None
            return found.target
        if os.path.isabs(href) or href.startswith("~"):
            # From a remote catalog, judged below as the local path it is (and refused
            # unless allowed); never read as a path on the catalog's host.
            return os.path.abspath(os.path.expanduser(href))
        if self.base is None:
            return os.path.abspath(href)
        if "://" in self.base:
            # A relative URL reference: "?" and "#" in it are the href's own query and
            # fragment; the base is a folder, never a document with a fragment.
            return urljoin(self.base, href)
        return os.path.normpath(os.path.join(self.base, href))

    def _refused(self, target: str) -> str:
        """Return why a remote catalog may not send a reader to ``target`` ('' if it may)."""
        allowed = _allowed(self.allowed)
        if allowed.everything:
            return ""
        if "://" not in target:  # a local path
            if "file" in allowed.schemes or _has_prefix(_normal_path(target),
                                                        allowed.prefixes):
                return ""
            return "a remote catalog may not point at local files"
        schemes = [part.split("://", 1)[0].lower() for part in chain_parts(target)]
        if len(schemes) > 1 and not set(schemes) <= allowed.schemes:
            return ("a remote catalog may not chain file systems (fsspec '::' URLs): they "
                    "may reach local files or caches")
        scheme = schemes[0]
        if _has_prefix(_normal_url(target), allowed.prefixes):
            return ""
        if scheme in ("file", "local"):
            if scheme in allowed.schemes:
                return ""
            return "a remote catalog may not point at local files"
        if scheme not in REMOTE_SCHEMES and scheme not in allowed.schemes:
            return (f"a remote catalog may not use the scheme {scheme}:// (followed: "
                    f"{', '.join(sorted(REMOTE_SCHEMES))})")
        if scheme not in ("http", "https"):
            return ""  # object stores: the host is a bucket, the endpoint is the caller's
        try:
            parts = urlsplit(target)
            host, port = parts.hostname, parts.port
        except ValueError:
            return "the URL cannot be parsed"
        if not host:
            return "the URL names no host"
        key = _host_key(host)
        if any(h == key and (p is None or p == port) for h, p in allowed.hosts):
            return ""
        address = _address(key)
        if address is not None:
            if any(address in network for network in allowed.networks
                   if network.version == address.version):
                return ""
            if not address.is_global or address.is_multicast:
                kind = ("link-local" if address.is_link_local else
                        "loopback" if address.is_loopback else
                        "private" if address.is_private else "not global")
                return f"a remote catalog may not point at a {kind} address ({address})"
            return ""
        if key in _LOCAL_NAMES or key.endswith(_LOCAL_SUFFIXES):
            return f"a remote catalog may not point at the local or internal host {key!r}"
        return ""


def refuse_nul(href: str, where: str) -> None:
    r"""Raise the policy's refusal when an href holds a NUL byte (no path or URL does).

    The one NUL check of every catalog's hrefs: :meth:`Hrefs.follow` and the cell
    checks of catalog rows (``rumi_xarray.catalogs.table.check_row``) both use it.

    Parameters
    ----------
    href : str
    where : str
        The Item or row it comes from, for messages.

    Raises
    ------
    RumiHrefError
        The href holds a NUL byte.

    Examples
    --------
    >>> refuse_nul("a.rumi", "catalog row 0")
    >>> refuse_nul("a\x00.rumi", "catalog row 0")
    Traceback (most recent call last):
    ...
    rumi_xarray.errors.RumiHrefError: catalog row 0: href 'a\\x00.rumi' is refused: holds a NUL byte
    """
    if "\x00" in href:
        raise _refusal(where, href, "holds a NUL byte")


def _refusal(where: str, href: str, why: str, target: str | None = None) -> RumiHrefError:
    shown = redact(href.replace("\x00", "\\x00"))
    resolved = "" if target is None or target == href else f" (resolved to {redact(target)})"
    err = RumiHrefError(f"{where}: href {shown!r}{resolved} is refused: {why}. Allow hrefs "
                        f"you trust with rx.set_options(allowed_hrefs=[...])"
                        if "may not" in why else f"{where}: href {shown!r} is refused: {why}")
    err.source = shown
    err.href = shown
    err.where = where
    return err


def _host_key(host: str) -> str:
    """Return a host as compared: lower case, without brackets or a trailing dot."""
    return host.strip("[]").rstrip(".").lower()


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Return the address a host literal names, in any spelling curl accepts ('0x7f.1')."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        if not host or not all(c in "0123456789abcdefx." for c in host):
            return None
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))  # parses, no lookup
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _file_url_path(url: str) -> str:
    rest = url.split("://", 1)[1]
    if rest.startswith("localhost/"):
        rest = rest[len("localhost"):]
    return os.path.abspath(unquote(rest.split("?", 1)[0].split("#", 1)[0]))


def _normal_path(path: str) -> str:
    return os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def _normal_url(url: str) -> str:
    """Return a URL with its scheme and host in lower case and its dot segments removed."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    path = parts.path
    decoded = unquote(path)
    if ".." in decoded.split("/") or "." in decoded.split("/"):
        path = posixpath.normpath(decoded) + ("/" if decoded.endswith("/") else "")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}{query}"


def _has_prefix(target: str, prefixes: tuple[str, ...]) -> bool:
    for prefix in prefixes:
        if target == prefix or (target.startswith(prefix) and (
                prefix.endswith(("/", os.sep)) or target[len(prefix)] in "/?#")):
            return True
    return False
