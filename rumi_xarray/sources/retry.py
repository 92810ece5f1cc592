"""Karu's retry policy for the remote reads librumi does not make itself.

librumi's transport (Karu) retries a request that failed transiently (a 5xx,
408 or 429 answer, a reset connection, a body cut short) up to
``KARU_MAX_ATTEMPTS`` attempts in all (8 by default; ``KARU_MAX_RETRIES``
sets the retries, one fewer), waiting between attempts with an exponential
backoff (0.25 s doubling, capped at 8 s, stretched by a random share of up to
half); a 404 or 403 is answered at once. Measured against rumi-eo 0.26.1 on
a loopback server that always answers 503: 8 attempts over ~33 s by default, 3 over
~1 s with ``KARU_MAX_ATTEMPTS=3``.

The metadata read through fsspec (a remote sidecar, the footers and row
groups of a catalog or stac-geoparquet table) follow the same policy from the
same environment variables, so one setting governs every remote read, and
what still fails after the last attempt is raised as a typed error
(:func:`retrying`) naming what was being read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import time
from collections.abc import Callable
from typing import TypeVar

from rumi_xarray.errors import RumiError, RumiIOError, with_context

T = TypeVar("T")

#: Karu's attempts per request when neither environment variable is set.
DEFAULT_ATTEMPTS = 8
#: First wait, in seconds; each further wait doubles it, up to :data:`MAX_DELAY`.
BASE_DELAY = 0.25
#: Longest wait between two attempts, in seconds (before the random stretch).
MAX_DELAY = 8.0
#: HTTP statuses worth another attempt (as Karu retries them).
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
#: OS error codes of a connection that failed on the way (not of a missing file).
RETRY_ERRNOS = frozenset({errno.ECONNRESET, errno.ECONNABORTED, errno.ECONNREFUSED,
                          errno.EPIPE, errno.ETIMEDOUT, errno.EAGAIN, errno.EHOSTUNREACH,
                          errno.ENETUNREACH, errno.ENETRESET})
#: Exception class names (of aiohttp, urllib3, botocore, http.client) that mean a
#: connection or a body failed on the way: the same request may well succeed again.
TRANSIENT_NAMES = frozenset({
    "ClientPayloadError", "ClientConnectionError", "ClientOSError",
    "ServerDisconnectedError", "ServerTimeoutError", "ContentLengthError",
    "TransferEncodingError", "IncompleteRead", "ProtocolError", "ReadTimeoutError",
    "ConnectTimeoutError", "EndpointConnectionError", "ConnectionClosedError",
    "ResponseStreamingError", "RemoteDisconnected", "ChunkedEncodingError",
})


def attempts() -> int:
    """Return the attempts a remote read gets, as Karu counts them from the environment.

    Read at every call, so dask workers follow their own environment.

    Returns
    -------
    int
        ``KARU_MAX_ATTEMPTS``, else ``KARU_MAX_RETRIES + 1``, else
        :data:`DEFAULT_ATTEMPTS` (at least 1).

    Examples
    --------
    >>> import os
    >>> os.environ["KARU_MAX_ATTEMPTS"] = "3"
    >>> attempts()
    3
    >>> del os.environ["KARU_MAX_ATTEMPTS"]
    """
    for name, extra in (("KARU_MAX_ATTEMPTS", 0), ("KARU_MAX_RETRIES", 1)):
        text = os.environ.get(name, "").strip()
        if text:
            try:
                return max(1, int(text) + extra)
            except ValueError:
                continue  # Karu ignores what it cannot read; so do we
    return DEFAULT_ATTEMPTS


def _status(exc: BaseException) -> int | None:
    """Return the HTTP status an exception carries (aiohttp, requests, botocore), if any."""
    for name in ("status", "status_code", "code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore's ClientError
        value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return value if isinstance(value, int) else None
    value = getattr(response, "status_code", None) or getattr(response, "status", None)
    return value if isinstance(value, int) else None


def transient(exc: BaseException) -> bool:
    """Return whether a read that raised ``exc`` may succeed if made again.

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    bool
        True for what Karu retries (5xx, 408, 425, 429, resets, cut bodies,
        timeouts), in ``exc`` or in the exceptions it was raised from; False for
        a missing or forbidden object, a 4xx, and errors of our own.

    Examples
    --------
    >>> transient(ConnectionResetError(104, "reset"))
    True
    >>> transient(FileNotFoundError("gone"))
    False
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RumiError) and current is exc:
            return False  # our own verdict (a changed table, a bad footer): final
        if isinstance(current, (FileNotFoundError, PermissionError, IsADirectoryError,
                                NotADirectoryError)):
            # fsspec's HTTP filesystem reports any failed HEAD (a 503 too) as a missing
            # file, raised from what the server answered: that answer decides.
            cause = current.__cause__ or current.__context__
            return cause is not None and transient(cause)
        status = _status(current)
        if status is not None:
            return status in RETRY_STATUSES
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        if any(k.__name__ in TRANSIENT_NAMES for k in type(current).__mro__):
            return True
        if isinstance(current, OSError) and current.errno in RETRY_ERRNOS:
            return True
        current = current.__cause__ or current.__context__
    return False


def delay(attempt: int, exc: BaseException | None = None) -> float:
    """Return the wait before attempt ``attempt + 1`` (0-based ``attempt`` just failed).

    A ``Retry-After`` of a few seconds sent with a 429 or 503 is honoured, as Karu
    honours it.

    Parameters
    ----------
    attempt : int
    exc : BaseException, optional
        What the failed attempt raised.

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> 0.25 <= delay(0) <= 0.375
    True
    """
    wait = min(MAX_DELAY, BASE_DELAY * 2 ** attempt) * (1 + random.random() / 2)
    headers = getattr(exc, "headers", None)
    after = headers.get("Retry-After") if headers is not None and hasattr(headers, "get") \
        else None
    if after is not None:
        with contextlib.suppress(TypeError, ValueError):  # an HTTP date: the backoff stands
            wait = max(wait, min(MAX_DELAY, float(after)))
    return wait


def call(read: Callable[[], T]) -> T:
    """Return ``read()``, made again after transient failures as Karu would.

    Parameters
    ----------
    read : callable
        One complete read (it must be safe to make again).

    Returns
    -------
    object
        What ``read`` returned.

    Raises
    ------
    Exception
        What the last attempt raised, or a non-transient failure at once.

    Examples
    --------
    >>> call(lambda: 42)
    42
    """
    limit = attempts()
    attempt = 0
    while True:
        try:
            return read()
        except Exception as exc:
            attempt += 1
            if attempt >= limit or not transient(exc):
                raise
            time.sleep(delay(attempt - 1, exc))


def retrying(read: Callable[[], T], context: str, *, source: str | None = None,
             kind: type[RumiError] | None = None) -> T:
    """Return ``read()`` retried as Karu retries; raise a typed error naming ``context``.

    Parameters
    ----------
    read : callable
        One complete read (safe to make again).
    context : str
        What is being read, credential-free (``"catalog.parquet row group 3"``).
    source : str, optional
        Credential-free name kept as the error's ``source``.
    kind : type, optional
        The error class (by default the one matching what failed:
        :class:`~rumi_xarray.errors.RumiFileNotFoundError` for a missing object,
        :class:`~rumi_xarray.errors.RumiIOError` for transport failures...).

    Returns
    -------
    object
        What ``read`` returned.

    Raises
    ------
    RumiError
        After the last attempt, or at once when the failure is not transient;
        errors already typed (``RumiError``) pass unchanged.

    Examples
    --------
    >>> retrying(lambda: b"ok", "a sidecar")
    b'ok'
    """
    try:
        return call(read)
    except RumiError:
        raise
    except Exception as exc:
        again = transient(exc)
        tried = f" (after {attempts()} attempts)" if again else ""
        if again and isinstance(exc, FileNotFoundError):
            kind = kind or RumiIOError  # a 503 fsspec called missing: not a missing file
        raise with_context(exc, context + tried, source=source, kind=kind) from exc

