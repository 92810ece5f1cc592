"""The exceptions rumi_xarray raises, and the one helper that adds context to them.

Every error is a :class:`RumiError`, so ``except rumi_xarray.RumiError`` catches
anything this package raises on purpose. Each class also derives from the
builtin type users already catch (``OSError``, ``ValueError``, ``KeyError``...),
so code written against librumi's plain exceptions keeps working.

Errors carry what librumi's own messages lack, as attributes and in the text:
the (credential-free) source, the selection being read and the catalog row.
:class:`RumiIOError` keeps ``errno`` and ``filename`` of the ``OSError`` it
wraps.
"""

from __future__ import annotations

import errno as errno_codes

#: The error classes (``rumi_xarray`` re-exports exactly these). The helpers below
#: (``argument_error``, ``input_error``, ``os_error``, ``with_context``) are for the package.
__all__ = [
    "RumiArgumentError",
    "RumiArgumentTypeError",
    "RumiCRSMismatchError",
    "RumiCatalogError",
    "RumiCatalogKeyError",
    "RumiChecksumError",
    "RumiError",
    "RumiFileChangedError",
    "RumiFileNotFoundError",
    "RumiFormatError",
    "RumiHrefError",
    "RumiIOError",
    "RumiIngestError",
    "RumiIntegrityError",
    "RumiInternalError",
    "RumiMemoryError",
    "RumiMissingDependencyError",
    "RumiSelectionError",
    "RumiSettingsError",
    "RumiSettingsValueError",
    "RumiSourceTypeError",
    "RumiUnsupportedError",
    "RumiVerificationError",
    "RumiWriteError",
    "RumiWriteTypeError",
    "RumiWriteValueError",
]


class RumiError(Exception):
    """Base class of every error rumi_xarray raises on purpose.

    Attributes
    ----------
    source : str or None
        The file or URL involved, credentials removed.
    selection : str or None
        The time/band/window selection being read, as text.
    row : int or None
        The catalog row the source came from.
    """

    source: str | None = None
    selection: str | None = None
    row: int | str | None = None


class RumiIOError(RumiError, OSError):
    """Reading or decoding failed (transport, missing file, corrupt frame).

    ``errno`` and ``filename`` are those of the ``OSError`` it wraps, when
    there was one; ``str()`` is the message alone.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RumiFileNotFoundError(RumiIOError, FileNotFoundError):
    """A file, object or URL does not exist."""


class RumiFileChangedError(RumiIOError):
    """The file changed after it was opened; reopen it to read the new content."""


class RumiChecksumError(RumiIOError):
    """A frame failed its checksum: the file's bytes changed after it was written."""


class RumiFormatError(RumiError, ValueError):
    """The bytes are not a (valid) Rumi file, or a header does not index the file."""


class RumiIntegrityError(RumiFormatError):
    """What a file's labels, its sidecar or a catalog row say differs from what was recorded.

    librumi checks frames only; rumi_xarray records digests of the labels (in
    the sidecar), of the sidecar and of each catalog row when it writes them,
    and raises this, naming the file or row, when one no longer matches.
    """


class RumiSelectionError(RumiError, IndexError):
    """A selection falls outside the array."""


class RumiCatalogError(RumiError, ValueError):
    """A catalog, STAC item or catalog row cannot be used."""


class RumiCatalogKeyError(RumiCatalogError, KeyError):
    """A catalog lacks a column (or a STAC item an asset or field) it needs."""

    def __str__(self) -> str:
        # KeyError quotes its argument; the message is a sentence.
        return str(self.args[0]) if self.args else ""


class RumiHrefError(RumiCatalogError):
    """An href of a catalog (a STAC Item's asset, a table's path) is refused.

    It holds a NUL byte, or a catalog read from a remote location points at a
    local file, at a loopback, link-local or private address, or at a scheme it
    may not use, and the ``allowed_hrefs`` option does not allow it. Raised
    before anything is opened or connected to; ``href`` is the href (credentials
    removed) and ``where`` the Item or row it comes from.
    """

    href: str | None = None
    where: str | None = None


class RumiArgumentError(RumiError, ValueError):
    """A keyword's value (or an object passed) cannot be used; ``keyword`` names it.

    Raised for open keywords (``nodata=``, ``band_as_variable=``...), accessor
    use on data that is not Rumi's, and command-line arguments, naming the file.
    """

    keyword: str | None = None


class RumiArgumentTypeError(RumiArgumentError, TypeError):
    """A keyword's value is of a type it cannot have (also a ``TypeError``)."""


class RumiCRSMismatchError(RumiError, ValueError):
    """Data in different CRSs were aligned or combined (``xr.open_mfdataset``, ``xr.concat``...).

    xarray would outer-join their x/y grids and label the result with one CRS;
    reprojecting onto one grid (``rx.open_stac``) is what combines them.
    """


class RumiUnsupportedError(RumiError, NotImplementedError):
    """librumi does not support what the file or the call asks for."""


class RumiMemoryError(RumiError, MemoryError):
    """librumi could not allocate memory for a read."""


class RumiMissingDependencyError(RumiError, ImportError):
    """A feature needs an optional dependency that is not installed; ``extra`` names the extra.

    ``pip install 'rumi-xarray[<extra>]'`` installs what is missing (``missing``
    lists the import names not found).
    """

    extra: str | None = None
    missing: tuple[str, ...] = ()


class RumiSettingsError(RumiError, RuntimeError):
    """A process-wide setting cannot be applied (librumi pinned it already)."""


class RumiVerificationError(RumiSettingsError):
    """A read is refused: checksum verification is asked for but cannot be had.

    librumi fixes its verification setting at the first decoded frame of a
    process; when that frame was decoded without verification (a direct
    ``rumi.read`` before rumi_xarray's first read), reads through rumi_xarray
    stop with this error instead of returning unverified samples, until the
    user accepts them (``rx.set_options(verify=False)``).
    """


class RumiIngestError(RumiError, RuntimeError):
    """Some outputs of :func:`rumi_xarray.ingest` failed; the others are written and catalogued.

    Attributes
    ----------
    report : rumi_xarray.ingestion.IngestReport
        What the run did, ``report.failed`` naming each failed output and why.
    """

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report

    def __reduce__(self) -> tuple[type, tuple[str, object]]:
        return (type(self), (str(self), self.report))


class RumiInternalError(RumiError, RuntimeError):
    """librumi failed internally or in an unexpected state (not a settings problem)."""


class RumiSettingsValueError(RumiSettingsError, ValueError):
    """An option name or value (``set_options`` or its environment variable) is invalid.

    A ``ValueError`` as well, as invalid option values always were.
    """


class RumiSourceTypeError(RumiError, TypeError):
    """What was passed as a source is neither a path, a URL, bytes nor a file object."""


class RumiWriteError(RumiError, OSError):
    """Writing a Rumi file (or its sidecar) failed."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RumiWriteValueError(RumiError, ValueError):
    """What a write was given cannot be stored (an option, labels, values).

    Raised before anything is written, so not an ``OSError`` (code that
    retries on I/O errors must not retry these); a ``ValueError``, as such
    errors always were. ``filename`` names the destination.
    """

    filename: str | None = None


class RumiWriteTypeError(RumiError, TypeError):
    """What a write was given is of a type Rumi cannot store (not xarray, a sample dtype).

    Raised before anything is written; a ``TypeError``, as such errors always
    were. ``filename`` names the destination.
    """

    filename: str | None = None


def argument_error(text: str, keyword: str, source: str | None = None, *,
                   cls: type[RumiArgumentError] = RumiArgumentError) -> RumiArgumentError:
    """Return an argument error naming the keyword (``keyword``) and the source it was for.

    Parameters
    ----------
    text : str
        The whole message.
    keyword : str
        The keyword (or argument) whose value cannot be used.
    source : str, optional
        The file or cube it was given for (``source``).
    cls : type, optional
        :class:`RumiArgumentError` or :class:`RumiArgumentTypeError`.

    Returns
    -------
    RumiArgumentError
    """
    err = cls(text)
    err.keyword = keyword
    if source is not None:
        err.source = source
    return err


def input_error(cls: type[RumiWriteValueError] | type[RumiWriteTypeError], text: str,
                filename: str) -> RumiError:
    """Return a write-input error naming its destination (``filename``, ``source``).

    Parameters
    ----------
    cls : type
        :class:`RumiWriteValueError` or :class:`RumiWriteTypeError`.
    text : str
    filename : str

    Returns
    -------
    RumiError
    """
    err = cls(text)
    err.filename = filename
    err.source = filename
    return err


#: Builtin type -> the rumi_xarray type that also derives from it.
_BY_BUILTIN: tuple[tuple[type[BaseException], type[RumiError]], ...] = (
    (KeyError, RumiCatalogKeyError),
    (IndexError, RumiSelectionError),
    (NotImplementedError, RumiUnsupportedError),
    (MemoryError, RumiMemoryError),
    (FileNotFoundError, RumiFileNotFoundError),
    (OSError, RumiIOError),
    (ValueError, RumiFormatError),
    (RuntimeError, RumiInternalError),
)


def with_context(exc: BaseException, context: str, *, source: str | None = None,
                 selection: str | None = None, row: int | str | None = None,
                 kind: type[RumiError] | None = None, opaque: bool = False) -> RumiError:
    """Return ``exc`` as a :class:`RumiError` with ``context`` in front of its message.

    The caller raises the result ``from exc``, so the original traceback stays
    attached. Credentials are removed from the message.

    Parameters
    ----------
    exc : BaseException
        What librumi, fsspec or the OS raised.
    context : str
        What was being done, e.g. ``"s3://b/a.rumi (catalog row 3): reading
        time=[0], bands=all, window=(0, 0, 512, 512)"``.
    source : str, optional
        Credential-free source name, kept as an attribute.
    selection : str, optional
        Selection text, kept as an attribute.
    row : int, optional
        Catalog row, kept as an attribute.
    kind : type, optional
        The class to raise; by default the rumi_xarray class matching the
        builtin type of ``exc`` (``OSError`` -> :class:`RumiIOError`...), or
        ``exc``'s own class when it already is a :class:`RumiError`.
    opaque : bool, default False
        The source was reached through a catalog, not named by the caller: say
        what failed (not found, not a Rumi file, a failed read...) without
        the message of ``exc``, which may quote the file's first bytes or its
        size. The caller raises the result ``from None`` then, so the original
        message is not printed with it either.

    Returns
    -------
    RumiError
    """
    from rumi_xarray.sources.redact import redact_text

    if isinstance(exc, RumiError):
        # Already has its context: keep the inner message, add ours in front.
        source = source or exc.source
        selection = selection or exc.selection
        row = exc.row if row is None else row
    message = _summary(exc) if opaque else redact_text(_message(exc))
    text = f"{context}: {message}" if message else context
    cls = kind or _kind_of(exc)
    new = cls(text)
    if isinstance(new, OSError):
        code = getattr(exc, "errno", None)
        if code is None and isinstance(exc, FileNotFoundError):
            code = errno_codes.ENOENT
        new.errno = code
        new.strerror = (None if opaque else getattr(exc, "strerror", None)) or message
        new.filename = (None if opaque else getattr(exc, "filename", None)) or source
    new.source = source
    new.selection = selection
    new.row = row
    return new


def os_error(cls: type[RumiError], code: int | None, text: str,
             filename: str | None = None) -> RumiError:
    """Return an ``OSError``-derived rumi_xarray error with ``errno`` and ``filename`` set.

    Parameters
    ----------
    cls : type
        :class:`RumiIOError`, :class:`RumiFileNotFoundError` or
        :class:`RumiWriteError`.
    code : int or None
        ``errno`` value.
    text : str
        The whole message (``str()`` of the error).
    filename : str, optional

    Returns
    -------
    RumiError
    """
    err = cls(text)
    assert isinstance(err, OSError)
    err.errno = code
    err.strerror = text
    err.filename = filename
    err.source = filename
    return err


def _summary(exc: BaseException) -> str:
    """Say what kind of failure ``exc`` is, quoting nothing it says (no bytes, no sizes)."""
    if isinstance(exc, RumiError) and not isinstance(exc, (RumiIOError, RumiFormatError)):
        return " ".join(str(exc).split())  # our own messages quote no content
    if isinstance(exc, FileNotFoundError):
        return "no such file or object"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, RumiChecksumError) or "checksum mismatch" in str(exc).lower():
        return "a frame failed its checksum"
    if isinstance(exc, MemoryError):
        return "out of memory"
    if isinstance(exc, ValueError):
        return "not a Rumi file, or not the file its header indexes"
    if isinstance(exc, OSError):
        code = exc.errno
        name = errno_codes.errorcode.get(code, "") if isinstance(code, int) else ""
        return f"reading failed{f' ({name})' if name else ''}"
    return f"reading failed ({type(exc).__name__})"


def _kind_of(exc: BaseException) -> type[RumiError]:
    if isinstance(exc, RumiError):
        return type(exc)
    for builtin, ours in _BY_BUILTIN:
        if isinstance(exc, builtin):
            return ours
    return RumiIOError


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        text = str(exc.strerror)
    elif isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])
    else:
        text = str(exc)
    return " ".join(text.split())



def user_stacklevel() -> int:
    """Return the ``stacklevel`` of the caller's first frame outside the libraries.

    Pass it to ``warnings.warn`` from the function that warns: the warning
    then points at the user's line that opened or wrote the data, not at the
    xarray, dask or rumi_xarray code between it and the warning.

    Returns
    -------
    int
    """
    import sys
    from types import FrameType

    frame: FrameType | None = sys._getframe(2)  # the frame calling warnings.warn is level 1
    level = 2
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in (
            "rumi_xarray", "xarray", "dask", "importlib"):
        frame = frame.f_back
        level += 1
    return level
