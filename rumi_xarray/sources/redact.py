"""Keep credentials out of reprs, errors and logs, and name sources as users typed them.

URLs may carry userinfo (``https://user:secret@host``) or signed query strings
(``?X-Amz-Signature=...``); neither is ever shown. librumi's transport names
objects by GDAL-style virtual paths (``/vsis3/bucket/key``) the user never
typed: messages show them as URLs again (``s3://bucket/key``), and an object
store's XML error document is shortened to its code and message.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from rumi_xarray.sources.schemes import VSI_CURL, VSI_STORES, written_as_url

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")
#: GDAL virtual file system prefixes librumi's transport uses -> URL schemes (the
#: same table table :func:`~rumi_xarray.sources.location.locate` maps them by).
_VSI_PATH = re.compile(r"/(" + "|".join(VSI_STORES) + r")(?:_streaming)?/(?=\S)")
_VSICURL = re.compile(r"/" + VSI_CURL + r"(?:_streaming)?/(?=[A-Za-z][A-Za-z0-9+.\-]*://)")
#: An S3-style XML error document: keep its code and message.
_XML_ERROR = re.compile(r"<\?xml[^>]*>\s*<Error>(.*?)(?:</Error>|$)", re.DOTALL)
_XML_FIELD = re.compile(r"<(Code|Message)>(.*?)</\1>", re.DOTALL)


_USERINFO = "userinfo"
#: "user:password@" at the start of a URL's authority, even with an unencoded "/" in
#: the password (which urlsplit would take for the start of the path).
_USER_PASSWORD = re.compile(r"[^/@?#]*:[^@?#]*@")


def _mask_userinfo(source: str) -> str:
    """Replace whatever may be userinfo by a placeholder before the URL is parsed.

    Passwords with unencoded ``/``, ``?`` or ``#`` do not parse as userinfo;
    where it is ambiguous (an ``@`` after ``?`` or ``#`` but before any
    ``/``), the whole authority is hidden: showing too little is safe,
    showing part of a password is not.
    """
    scheme, rest = source.split("://", 1)
    if "@" not in rest:
        return source
    match = _USER_PASSWORD.match(rest)
    if match:
        return f"{scheme}://{_USERINFO}@{rest[match.end():]}"
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        return f"{scheme}://{_USERINFO}@{rest[authority.rindex('@') + 1:]}"
    head = rest.split("/", 1)[0]
    if "@" in head:
        return f"{scheme}://{_USERINFO}@(hidden){rest[len(head):]}"
    return source


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
    if not written_as_url(source):
        return source
    source = _mask_userinfo(source)
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


_REPEAT = re.compile(r"(?<!\S)(\S+: )\1+")


def redact_text(text: str) -> str:
    """Redact every URL found inside a free-form message, naming objects by URL.

    Parameters
    ----------
    text : str
        A message, e.g. from librumi, that may quote a URL, a GDAL-style
        virtual path (``/vsis3/bucket/key`` becomes ``s3://bucket/key``) or an
        object store's XML error document (shortened to ``Code: Message``).

    Returns
    -------
    str
    """
    text = _VSICURL.sub("", text)
    text = _VSI_PATH.sub(lambda m: VSI_STORES[m.group(1)], text)
    text = _XML_ERROR.sub(_xml_summary, text)
    # librumi redacts with its own marker: one style, so repeats can be seen as such.
    text = _URL.sub(_redact_match, text.replace("<redacted>", "***"))
    # "could not open URL: URL: cause" names the same source twice in a row.
    return _REPEAT.sub(r"\1", text)


def _redact_match(match: re.Match[str]) -> str:
    # Punctuation ending a sentence or a "url: cause" prefix is not the URL's.
    url = match.group(0)
    stripped = url.rstrip(":,;.)")
    return redact(stripped) + url[len(stripped):]


def _xml_summary(match: re.Match[str]) -> str:
    fields = dict(_XML_FIELD.findall(match.group(1)))
    parts = [fields[k].strip() for k in ("Code", "Message") if fields.get(k)]
    return ": ".join(parts) if parts else "(error document)"
