"""Keep credentials out of reprs, errors and logs.

URLs may carry userinfo (``https://user:secret@host``) or signed query strings
(``?X-Amz-Signature=...``); neither is ever shown.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


def redact(source: str) -> str:
    """Return ``source`` without userinfo, query string or fragment.

    Parameters
    ----------
    source : str
        A path or URL.

    Returns
    -------
    str
        Local paths unchanged; URLs with ``user:password@``, ``?query`` and
        ``#fragment`` replaced by ``***`` markers.
    """
    if "://" not in source:
        return source
    try:
        parts = urlsplit(source)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "***" if parts.query else ""
    fragment = "***" if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def redact_text(text: str) -> str:
    """Redact every URL found inside a free-form message.

    Parameters
    ----------
    text : str
        A message, e.g. from librumi, that may quote a URL.

    Returns
    -------
    str
    """
    return _URL.sub(lambda m: redact(m.group(0)), text)
