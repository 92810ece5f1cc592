"""Real loopback servers for the test suite: a ranged HTTP file server and an S3 server.

Both bind 127.0.0.1 on an ephemeral port, run in a background thread of the test
process and record every request they answer, so tests can assert on how many
requests (and which byte ranges) a reader issued. Nothing here is a mock: the
clients under test (librumi's Karu transport, fsspec, boto3) speak real HTTP to
them over real sockets.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import email.utils
import hmac
import os
import random
import re
import shutil
import socket
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Literal
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:
    from collections.abc import Callable

    from werkzeug.serving import BaseWSGIServer

__all__ = [
    "S3_ENV_TO_UNSET",
    "Faults",
    "RangeHTTPServer",
    "RecordedRequest",
    "S3Server",
    "copy_into",
    "iter_ranges",
    "parse_range",
    "write_sample",
]

LOOPBACK = "127.0.0.1"
_CHUNK = 256 * 1024
_RANGE_RE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*")


@dataclass(frozen=True)
class RecordedRequest:
    """One request answered by a loopback server.

    Attributes
    ----------
    method : str
        HTTP method, e.g. ``"GET"``.
    path : str
        Decoded URL path without the query string, e.g. ``"/a.rumi"`` or
        ``"/bucket/key"``.
    range : str or None
        The raw ``Range`` header, or ``None`` when the request had none.
    status : int
        Status code sent back.
    bytes_sent : int
        Body bytes written (0 for ``HEAD`` and for error pages).
    query : str
        Raw query string (S3 listings put their parameters there).
    headers : dict of str to str
        Request headers, names lower-cased.
    arrived : float
        ``time.monotonic()`` when the server began handling the request
        (before any ``delay``): which requests were in flight together.
    peer : int
        The client's port: which connection carried the request.
    """

    method: str
    path: str
    range: str | None
    status: int
    bytes_sent: int
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    arrived: float = field(default=0.0, repr=False, compare=False)
    peer: int = field(default=0, repr=False, compare=False)


class Faults:
    """Seeded random faults a :class:`RangeHTTPServer` injects into its answers.

    Each request draws from one seeded generator (in arrival order): with
    probability ``rate`` it fails, as a ``503 Service Unavailable`` or as a
    response whose body is cut after half of its announced ``Content-Length``
    (the connection is then closed, as when a proxy or a server dies mid-body),
    chosen with equal odds among ``kinds``; a ``"reset"`` (opt-in) aborts the
    connection before any answer (a TCP RST, as a dying load balancer sends). Requests are
    recorded as usual: a reset with status 0,
    503 with its status, a cut body with the bytes actually sent.

    Parameters
    ----------
    rate : float, default 0.3
        Probability that a request fails.
    seed : int, default 0
    kinds : tuple of {"503", "cut", "reset"}, default ("503", "cut")
    """

    KINDS = ("503", "cut")
    #: Every kind a server can inject ("reset" only when asked for).
    ALL_KINDS = ("503", "cut", "reset")

    def __init__(self, rate: float = 0.3, seed: int = 0,
                 kinds: tuple[str, ...] = KINDS) -> None:
        unknown = set(kinds) - set(self.ALL_KINDS)
        if unknown or not kinds:
            raise ValueError(f"fault kinds must be among {self.ALL_KINDS}, got {kinds!r}")
        self.rate = float(rate)
        self.kinds = tuple(kinds)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.injected = dict.fromkeys(self.ALL_KINDS, 0)

    def draw(self) -> str | None:
        """Return the fault to inject into the next answer, or ``None``."""
        with self._lock:
            if self._rng.random() >= self.rate:
                return None
            kind = self.kinds[self._rng.randrange(len(self.kinds))]
            self.injected[kind] += 1
            return kind


class _RequestLog:
    """Thread-safe append-only log shared by server threads and the test thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []
        self.connections = 0

    def add(self, item: RecordedRequest) -> None:
        with self._lock:
            self._items.append(item)

    def amend(self, old: RecordedRequest, new: RecordedRequest) -> None:
        with self._lock:
            for i in range(len(self._items) - 1, -1, -1):
                if self._items[i] is old:
                    self._items[i] = new
                    return

    def connected(self) -> None:
        with self._lock:
            self.connections += 1

    def select(self, path: str | None, method: str | None) -> list[RecordedRequest]:
        with self._lock:
            items = list(self._items)
        if path is not None:
            wanted = "/" + path.lstrip("/")
            items = [r for r in items if r.path == wanted]
        if method is not None:
            items = [r for r in items if r.method == method.upper()]
        return items

    def reset(self) -> None:
        with self._lock:
            self._items.clear()
            self.connections = 0

    def bytes_served(self) -> int:
        with self._lock:
            return sum(r.bytes_sent for r in self._items)


def parse_range(header: str | None, size: int) -> tuple[int, int] | Literal[False] | None:
    """Resolve a single-range ``Range`` header against a representation size.

    Parameters
    ----------
    header : str or None
        The ``Range`` header value, e.g. ``"bytes=0-99"``, ``"bytes=100-"`` or
        ``"bytes=-20"``.
    size : int
        Length of the full representation in bytes.

    Returns
    -------
    tuple of int, None or False
        ``(first, last)`` inclusive byte positions for a satisfiable range;
        ``None`` when the header is absent or not understood, in which case
        RFC 9110 section 14.2 lets the server ignore it and send the whole
        body; ``False`` when the range is well formed but unsatisfiable (416).
    """
    if header is None:
        return None
    match = _RANGE_RE.fullmatch(header)
    if match is None:
        # Multi-range and other units are legal to ignore; a 200 with the full
        # body is what a plain static server does, and the log still shows it.
        return None
    first_text, last_text = match.groups()
    if not first_text and not last_text:
        return None
    if not first_text:
        suffix = int(last_text)
        if suffix == 0 or size == 0:
            return False
        return max(0, size - suffix), size - 1
    first = int(first_text)
    if last_text and int(last_text) < first:
        return None  # syntactically invalid per RFC 9110: ignore the header
    last = int(last_text) if last_text else size - 1
    if first >= size:
        return False
    return first, min(last, size - 1)


class _RangeHandler(BaseHTTPRequestHandler):
    """Static file handler with byte ranges; configured through ``server.owner``."""

    # HTTP/1.1 keeps connections open, which is what real object stores and CDNs
    # do and what connection-reuse bugs in a client need to be exposed to.
    protocol_version = "HTTP/1.1"
    server_version = "RumiTestHTTP/1.0"
    # Small ranged responses otherwise stall ~40 ms on Nagle + delayed ACK,
    # which no real object store does and which would swamp request timings.
    disable_nagle_algorithm = True
    server: _OwnedHTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.owner.opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner.closed(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        # The request log replaces stderr chatter that would drown pytest output.
        pass

    def do_GET(self) -> None:
        self._serve(send_body=True)

    def do_HEAD(self) -> None:
        self._serve(send_body=False)

    def _record(self, status: int, sent: int) -> RecordedRequest:
        # Called before end_headers(): once the response is on the wire the client
        # may return and the test assert on the log, so the entry must already exist.
        parts = urlsplit(self.path)
        item = RecordedRequest(
            method=self.command,
            path=unquote(parts.path),
            range=self.headers.get("Range"),
            status=status,
            bytes_sent=sent,
            query=parts.query,
            headers={k.lower(): v for k, v in self.headers.items()},
            arrived=getattr(self, "_arrived", 0.0),
            peer=int(self.client_address[1]),
        )
        self.server.owner.log.add(item)
        return item

    def _fail(self, status: HTTPStatus, extra: Mapping[str, str] | None = None) -> None:
        body = f"{status.value} {status.phrase}\n".encode() if self.command != "HEAD" else b""
        self.send_response(status)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        # Content-Length on every error keeps the keep-alive connection usable.
        self.send_header("Content-Length", str(len(body)) if body else "0")
        self._record(status.value, 0)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _serve(self, *, send_body: bool) -> None:
        self._arrived = time.monotonic()
        owner = self.server.owner
        if owner.delay:
            time.sleep(owner.delay)
        if owner.auth is not None and not owner.authorized(self.headers.get("Authorization")):
            self._fail(HTTPStatus.UNAUTHORIZED, {"WWW-Authenticate": 'Basic realm="rumi"'})
            return
        url_path = unquote(urlsplit(self.path).path)
        failure = owner.failure_for(url_path)
        if failure is not None:
            self._fail(HTTPStatus(failure))
            return
        target = owner.resolve(url_path)
        if target is None:
            self._fail(HTTPStatus.NOT_FOUND)
            return
        fault = owner.faults.draw() if owner.faults is not None else None
        if fault == "503":
            self._fail(HTTPStatus.SERVICE_UNAVAILABLE)
            return
        if fault == "reset":
            self._record(0, 0)
            # SO_LINGER 0: close() sends a RST instead of a FIN, as a crashed peer does.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        with target.open("rb") as fh:
            stat = os.fstat(fh.fileno())
            self._send_file(fh, stat, send_body=send_body, cut=fault == "cut")

    def _send_file(self, fh: BinaryIO, stat: os.stat_result, *, send_body: bool,
                   cut: bool = False) -> None:
        size = stat.st_size
        etag = f'"{stat.st_mtime_ns:x}-{size:x}"'
        validators = {
            "ETag": etag,
            "Last-Modified": email.utils.formatdate(stat.st_mtime, usegmt=True),
            "Accept-Ranges": "bytes",
        }
        if_match = self.headers.get("If-Match")
        if (
            if_match is not None
            and if_match.strip() != "*"
            and etag not in [tag.strip() for tag in if_match.split(",")]
        ):
            self._fail(HTTPStatus.PRECONDITION_FAILED, validators)
            return
        resolved = parse_range(self.headers.get("Range"), size)
        if resolved is False:
            self._fail(
                HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE,
                {**validators, "Content-Range": f"bytes */{size}"},
            )
            return
        if resolved is None:
            status, first, length = HTTPStatus.OK, 0, size
        else:
            first, last = resolved
            status, length = HTTPStatus.PARTIAL_CONTENT, last - first + 1
        self.send_response(status)
        for name, value in validators.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        if status == HTTPStatus.PARTIAL_CONTENT:
            self.send_header("Content-Range", f"bytes {first}-{first + length - 1}/{size}")
        recorded = self._record(status.value, length if send_body else 0)
        self.end_headers()
        sent = 0
        if send_body:
            fh.seek(first)
            # A cut body stops after half of what Content-Length announced and
            # drops the connection: the client must notice the short read.
            stop = length // 2 if cut else length
            if cut:
                self.close_connection = True
            try:
                while sent < stop:
                    chunk = fh.read(min(_CHUNK, stop - sent))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                # A client may abandon a transfer (cancelled read); log what got out.
                self.close_connection = True
            if sent != length:
                partial = dataclasses.replace(recorded, bytes_sent=sent)
                self.server.owner.log.amend(recorded, partial)


class _OwnedHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows the ``RangeHTTPServer`` it belongs to."""

    daemon_threads = True
    # socketserver listens with a backlog of 5: a burst of more new connections (Karu
    # opens one per concurrent range of a read_many across many files) had its SYNs
    # dropped, and the client's TCP retried them after its 1 s initial RTO: a 1 s stall
    # no object store shows (benchmarks/karu_profile.py --backlog 0 shows it).
    request_queue_size = 1024
    owner: RangeHTTPServer


class _LoopbackServer:
    """Context-manager and address plumbing shared by the loopback servers."""

    _server: Any
    _thread: threading.Thread | None
    log: _RequestLog

    def _serve(self) -> Any:
        """Serve from a daemon thread named after the class and port; return self."""
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def start(self) -> Any:
        raise TypeError(f"{type(self).__name__} does not define start()")

    def stop(self) -> None:
        """Stop serving, close the listening socket and join the thread."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._closed()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def _closed(self) -> None:
        """Run once the listening socket is closed, before the thread is joined."""

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """Port the server listens on (only valid once started)."""
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.server_address[1])

    def requests(self, path: str | None = None, method: str | None = None) -> list[RecordedRequest]:
        """Return a snapshot of recorded requests, oldest first.

        Parameters
        ----------
        path : str, optional
            Keep only requests for this path (leading slash optional).
        method : str, optional
            Keep only requests with this method.

        Returns
        -------
        list of RecordedRequest
        """
        return self.log.select(path, method)

    def reset(self) -> None:
        """Forget every recorded request (and connection count; S3 buckets are kept)."""
        self.log.reset()

    @property
    def bytes_served(self) -> int:
        """Total body bytes sent since start or the last :meth:`reset`."""
        return self.log.bytes_served()


class RangeHTTPServer(_LoopbackServer):
    """Serve a directory over HTTP/1.1 with byte ranges on 127.0.0.1.

    Supports ``GET`` and ``HEAD``; ``Range: bytes=a-b``, ``bytes=a-`` and
    ``bytes=-n`` (206 with ``Content-Range``); 416 for unsatisfiable ranges; 404
    for missing files; ``ETag``, ``Last-Modified`` and ``If-Match`` (412).
    Multi-range requests are answered with the whole file (200), as RFC 9110
    allows. Every request is recorded.

    Parameters
    ----------
    directory : str or os.PathLike
        Root directory to serve. Paths escaping it are answered with 404.
    auth : tuple of (str, str), optional
        Require HTTP basic auth with this ``(user, password)``; other requests
        get 401.
    fail : iterable of str, optional
        URL paths (e.g. ``"/broken.rumi"``) answered with 500; see also
        :meth:`fail`.
    delay : float, optional
        Seconds to sleep before answering each request, to widen race windows
        or to stand for the latency of a distant object store.
    faults : Faults, optional
        Seeded random failures (503s, bodies cut in half); see also
        :meth:`inject_faults`.

    Examples
    --------
    >>> with RangeHTTPServer(tmp_path) as http:
    ...     meta = rumi.info(source=http.url("a.rumi"))
    ...     assert all(r.status == 206 for r in http.requests("a.rumi"))
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        auth: tuple[str, str] | None = None,
        fail: Iterable[str] = (),
        delay: float = 0.0,
        faults: Faults | None = None,
    ) -> None:
        self.root = Path(directory).resolve()
        self.auth = auth
        self.delay = delay
        self.faults = faults
        self.log = _RequestLog()
        self._failures: dict[str, int] = {}
        self._failures_lock = threading.Lock()
        for path in fail:
            self.fail(path)
        self._server: _OwnedHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> RangeHTTPServer:
        """Bind an ephemeral loopback port and serve from a daemon thread.

        Returns
        -------
        RangeHTTPServer
            ``self``, so ``server = RangeHTTPServer(d).start()`` works.
        """
        if self._server is not None:
            raise RuntimeError("server already started")
        server = _OwnedHTTPServer((LOOPBACK, 0), _RangeHandler)
        server.owner = self
        self._server = server
        return self._serve()

    def _closed(self) -> None:
        # Handler threads sit in keep-alive reads for as long as a client pools the
        # connection; closing their sockets ends them and shows clients a dead server.
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def opened(self, sock: socket.socket) -> None:
        """Track a newly accepted connection (called by the handler)."""
        self.log.connected()
        with self._open_lock:
            self._open.add(sock)

    def closed(self, sock: socket.socket) -> None:
        """Forget a finished connection (called by the handler)."""
        with self._open_lock:
            self._open.discard(sock)

    # -- addresses -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` without a trailing slash."""
        return f"http://{LOOPBACK}:{self.port}"

    def url(self, name: str | os.PathLike[str] = "") -> str:
        """Return the URL of ``name``, a path relative to the served directory.

        Parameters
        ----------
        name : str or os.PathLike
            Relative path such as ``"a.rumi"`` or ``"sub/b.rumi"``.

        Returns
        -------
        str
            Percent-encoded URL, e.g. ``http://127.0.0.1:41234/a.rumi``.
        """
        rel = Path(name).as_posix().lstrip("/") if str(name) else ""
        return f"{self.base_url}/{quote(rel)}"

    # -- behaviour switches -------------------------------------------------------------

    def fail(self, path: str, status: int = 500) -> None:
        """Answer every request for ``path`` with ``status`` until :meth:`heal`.

        Parameters
        ----------
        path : str
            URL path relative to the root, with or without a leading slash.
        status : int, default 500
            Status code to send (any 4xx/5xx).
        """
        with self._failures_lock:
            self._failures["/" + path.lstrip("/")] = status

    def heal(self, path: str | None = None) -> None:
        """Stop failing ``path``, or every path (and every random fault) when ``None``."""
        with self._failures_lock:
            if path is None:
                self._failures.clear()
                self.faults = None
            else:
                self._failures.pop("/" + path.lstrip("/"), None)

    def inject_faults(self, rate: float = 0.3, seed: int = 0,
                      kinds: tuple[str, ...] = Faults.KINDS) -> Faults:
        """Fail a seeded random share of requests (503s, cut bodies) until :meth:`heal`.

        Parameters
        ----------
        rate : float, default 0.3
        seed : int, default 0
        kinds : tuple of {"503", "cut", "reset"}

        Returns
        -------
        Faults
            Counts the faults injected (``.injected``).
        """
        self.faults = Faults(rate, seed, kinds)
        return self.faults

    def failure_for(self, url_path: str) -> int | None:
        """Status code configured to fail ``url_path``, else ``None``."""
        with self._failures_lock:
            return self._failures.get(url_path)

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header matches the configured basic auth."""
        if self.auth is None:
            return True
        if header is None or not header.startswith("Basic "):
            return False
        expected = base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode()
        return hmac.compare_digest(header[len("Basic ") :].strip(), expected)

    def resolve(self, url_path: str) -> Path | None:
        """Map a decoded URL path to a regular file under the root, or ``None``."""
        candidate = (self.root / url_path.lstrip("/")).resolve()
        if not candidate.is_relative_to(self.root) or not candidate.is_file():
            return None
        return candidate

    # -- request log -------------------------------------------------------------------

    @property
    def connections(self) -> int:
        """TCP connections accepted since start or the last :meth:`reset`."""
        return self.log.connections


# ---------------------------------------------------------------------------------------
# S3
# ---------------------------------------------------------------------------------------

#: Variables that could point a client at real AWS or at credentials other than the
#: test server's; a fixture should delete them before applying ``S3Server.env``.
#: ``AWS_S3_ENDPOINT`` matters most: Karu ranks it (GDAL's spelling, set on many geo
#: workstations) above ``AWS_ENDPOINT_URL_S3``, which it ranks above ``AWS_ENDPOINT_URL``.
S3_ENV_TO_UNSET: tuple[str, ...] = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_S3_ENDPOINT",
    "AWS_HTTPS",
    "AWS_VIRTUAL_HOSTING",
    "AWS_NO_SIGN_REQUEST",
    "AWS_REQUEST_PAYER",
)


class _RecordingApp:
    """WSGI middleware that logs each request and the response bytes it produced."""

    def __init__(self, app: Callable[..., Any], log: _RequestLog) -> None:
        self.app = app
        self.log = log

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        status_holder: list[int] = [0]

        def recording_start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
            status_holder[0] = int(status.split(" ", 1)[0])
            return start_response(status, headers, exc_info)

        body = self.app(environ, recording_start_response)
        chunks = list(body)
        close = getattr(body, "close", None)
        if close is not None:
            close()
        method = environ.get("REQUEST_METHOD", "")
        headers = {
            key[5:].replace("_", "-").lower(): str(value)
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        self.log.add(
            RecordedRequest(
                method=method,
                path=environ.get("PATH_INFO", ""),
                range=environ.get("HTTP_RANGE"),
                status=status_holder[0],
                bytes_sent=0 if method == "HEAD" else sum(len(c) for c in chunks),
                query=environ.get("QUERY_STRING", ""),
                headers=headers,
            )
        )
        return chunks


class S3Server(_LoopbackServer):
    """Moto's S3 in server mode on 127.0.0.1, with a request log.

    The WSGI app and request handler are the ones ``moto.server.ThreadedMotoServer``
    uses; the server is assembled here instead so that a recording middleware can
    sit in front of moto and the bound ephemeral port is known.

    Moto keeps its state in process-global backends, so two ``S3Server`` objects in
    one process see the same buckets; :meth:`reset_state` empties them.

    Parameters
    ----------
    region : str, default "us-east-1"
        Region advertised to clients.
    access_key, secret_key : str
        Dummy credentials; moto accepts any, but clients refuse to sign without.

    Examples
    --------
    >>> with S3Server() as s3:
    ...     s3.create_bucket("bkt")
    ...     s3.upload("bkt", "/tmp/a.rumi")
    ...     for name in S3_ENV_TO_UNSET:
    ...         monkeypatch.delenv(name, raising=False)
    ...     for name, value in s3.env.items():
    ...         monkeypatch.setenv(name, value)
    ...     rumi.info(source="s3://bkt/a.rumi")
    """

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        access_key: str = "testing",
        secret_key: str = "testing",
    ) -> None:
        self.region = region
        self.access_key = access_key
        self.secret_key = secret_key
        self.log = _RequestLog()
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> S3Server:
        """Bind an ephemeral loopback port and serve moto from a daemon thread.

        Returns
        -------
        S3Server
            ``self``.
        """
        if self._server is not None:
            raise RuntimeError("server already started")
        # Imported lazily so that collecting tests does not require moto.
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class QuietHandler(MotoRequestHandler):
            # The request log replaces werkzeug's per-request stderr line.
            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                pass

        app = _RecordingApp(DomainDispatcherApplication(create_backend_app), self.log)
        self._server = make_server(LOOPBACK, 0, app, threaded=True, request_handler=QuietHandler)
        return self._serve()

    def stop(self) -> None:
        """Stop serving, close the socket, join the thread and forget the client."""
        super().stop()
        self._client = None

    # -- configuration for clients ---------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """Environment that points librumi's Karu transport *and* botocore/s3fs here.

        Returns
        -------
        dict of str to str
            Apply with ``monkeypatch.setenv`` after deleting :data:`S3_ENV_TO_UNSET`.

        Notes
        -----
        Karu needs only ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``) plus the
        key pair: it accepts a plain ``http://`` endpoint, signs for ``us-east-1``
        unless ``AWS_REGION`` says otherwise, and addresses buckets path-style on a
        custom endpoint unless ``AWS_VIRTUAL_HOSTING=TRUE``. Without the key pair it
        refuses to send anything (``AWS_NO_SIGN_REQUEST=YES`` gets a 403 from moto's
        private buckets). It rereads these variables each time a source is opened.
        botocore (so s3fs) reads the same ``AWS_ENDPOINT_URL``; both ``_S3`` and
        plain spellings are set because Karu ranks ``_S3`` higher and either could
        otherwise be shadowed by a stale value. ``AWS_EC2_METADATA_DISABLED`` keeps
        botocore from probing the link-local metadata service, and pointing the
        config files at ``/dev/null`` keeps a developer's ``~/.aws`` out of the tests.
        """
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    @property
    def storage_options(self) -> dict[str, Any]:
        """``storage_options`` for fsspec/s3fs that need no environment at all.

        Returns
        -------
        dict
            Pass as ``fsspec.filesystem("s3", **opts)`` or ``storage_options=opts``.
        """
        return {
            "key": self.access_key,
            "secret": self.secret_key,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": self.region},
        }

    # -- data ------------------------------------------------------------------------

    def client(self) -> Any:
        """Return a boto3 S3 client bound to this server (created once)."""
        if self._client is None:
            import boto3

            self._client = boto3.client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=self.region,
                aws_access_key_id=self.access_key,
                aws_secret_access_key=self.secret_key,
            )
        return self._client

    def create_bucket(self, bucket: str) -> str:
        """Create ``bucket`` if it does not exist yet and return its name."""
        client = self.client()
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)
        return bucket

    def upload(
        self,
        bucket: str,
        *files: str | os.PathLike[str],
        prefix: str = "",
        create: bool = True,
    ) -> list[str]:
        """Upload local files into ``bucket`` under ``prefix`` + their base name.

        Parameters
        ----------
        bucket : str
            Target bucket.
        *files : str or os.PathLike
            Local files to upload.
        prefix : str, optional
            Key prefix such as ``"scenes/"``.
        create : bool, default True
            Create the bucket first if missing.

        Returns
        -------
        list of str
            ``s3://bucket/key`` URLs of the uploaded objects, in argument order.
        """
        if create:
            self.create_bucket(bucket)
        urls = []
        for local in files:
            key = prefix + Path(local).name
            self.client().upload_file(os.fspath(local), bucket, key)
            urls.append(f"s3://{bucket}/{key}")
        return urls

    def put_bytes(self, bucket: str, key: str, data: bytes, *, create: bool = True) -> str:
        """Store ``data`` at ``s3://bucket/key`` and return that URL."""
        if create:
            self.create_bucket(bucket)
        self.client().put_object(Bucket=bucket, Key=key, Body=data)
        return f"s3://{bucket}/{key}"

    def reset_state(self) -> None:
        """Delete every bucket and object moto holds in this process."""
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        self._client = None

    # -- request log -------------------------------------------------------------------


def copy_into(directory: str | os.PathLike[str], *files: str | os.PathLike[str]) -> list[Path]:
    """Copy ``files`` into ``directory`` (created if needed) and return the new paths."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(f, target / Path(f).name)) for f in files]


def iter_ranges(requests: Iterable[RecordedRequest]) -> Iterator[tuple[int, int]]:
    """Yield the ``(first, last)`` of each request carrying a simple ``bytes=a-b`` range."""
    for request in requests:
        match = _RANGE_RE.fullmatch(request.range or "")
        if match and match.group(1) and match.group(2):
            yield int(match.group(1)), int(match.group(2))


def write_sample(path: str | os.PathLike[str], seed: int = 0) -> bytes:
    """Write a T=3, B=4, 300x700 uint16 Rumi file with partial edge tiles.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file.
    seed : int, default 0
        Seed of the random pixel values.

    Returns
    -------
    bytes
        The header returned by ``rumi.write``.
    """
    import numpy as np

    from rumi_xarray.write.to_rumi import write_array

    arr = np.random.default_rng(seed).integers(0, 3000, (3, 4, 300, 700)).astype(np.uint16)
    return write_array(path, arr, bands=["B1", "B2", "B3", "B4"],
                       time=["2024-01-01", "2024-02-01", "2024-03-01"],
                       transform=(10, 0, 500000, 0, -10, 4000000), crs=32633, tile_size=256)
