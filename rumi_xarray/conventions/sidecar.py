"""The sidecar ``<file>.aux.json``: the facts a Rumi file has no field for, beside it.

The Rumi format has no field for nodata, scale, offset and units
(:class:`~rumi_xarray.conventions.facts.Facts`), nor for a CRS that is not
exactly an EPSG one. They live beside the file in a JSON sidecar (as GDAL
keeps such facts in ``.aux.xml`` for formats that lack them), written by
``to_rumi``/``convert`` and read when a file is opened or catalogued: a local
file's sidecar with a stat and a read, a remote one with one GET (through
fsspec, with the source's options), started early enough to overlap the
file's own metadata reads (:func:`prefetch`).

A sidecar is strict JSON: ``{"format": "rumi-xarray-sidecar", "version": 2,
...}`` with the facts spelled as :meth:`Facts.to_json
<rumi_xarray.conventions.facts.Facts.to_json>` spells them, plus
``crs_wkt`` and ``geotransform`` (:data:`GEOREF_FACTS`) where needed.

The source's own attributes (GDAL tags, netCDF globals) live under one key,
``attributes`` (:mod:`rumi_xarray.conventions.attributes`), covered by the
same content digest.

A file written with overviews (``to_rumi(..., overviews=...)``) records them
under ``overviews`` (:class:`Overviews`): the resampling and, per level, its
factor, its file (a plain name in the same folder, itself a Rumi file), its
shape, its labels' digest and its external header, so a reader opening a level
of a remote file needs no listing and no read of the level's metadata.

Version 2 adds what protects the answer (:mod:`rumi_xarray.conventions.digests`):
``labels_digest``, the digest of the file's labels (band texts, times,
georeferencing: its trailer, which librumi's frame checksums do not cover),
checked against the file at every open that reads the sidecar; and
``digest``, the digest of every other key, checked when the sidecar is read,
so an edited sidecar raises instead of changing decoded values. Version 1
sidecars (no digests) still read, their facts range-checked as open keywords
are.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pandas as pd

from rumi_xarray import options
from rumi_xarray.conventions.attributes import KEY as ATTRIBUTES
from rumi_xarray.conventions.attributes import Attributes
from rumi_xarray.conventions.digests import digest, labels_digest
from rumi_xarray.conventions.facts import COLUMNS as FACT_COLUMNS
from rumi_xarray.conventions.facts import Facts, column_differences
from rumi_xarray.errors import (
    RumiCatalogError,
    RumiError,
    RumiFormatError,
    RumiIntegrityError,
    RumiIOError,
    argument_error,
    with_context,
)
from rumi_xarray.model.overviews import RESAMPLINGS, check_file_name
from rumi_xarray.sources import retry
from rumi_xarray.sources.location import locate
from rumi_xarray.sources.redact import redact
from rumi_xarray.sources.transport import FsspecSource

#: Suffix appended to the Rumi file's name.
SIDECAR_SUFFIX = ".aux.json"
#: The sidecar key holding the overview levels (:class:`Overviews`).
OVERVIEWS = "overviews"
#: Format marker and version written into every sidecar.
SIDECAR_FORMAT = "rumi-xarray-sidecar"
SIDECAR_VERSION = 2
#: The keys of a sidecar that protect it: its labels' digest and its own.
LABELS_DIGEST = "labels_digest"
CONTENT_DIGEST = "digest"

#: Georeferencing the Rumi format cannot hold: the full CRS (WKT2) of a CRS that is
#: not exactly an EPSG one, and GDAL's GeoTransform text of a grid without an EPSG code.
GEOREF_FACTS = ("crs_wkt", "geotransform")
#: Every key a sidecar may hold besides its format marker, in catalog column order:
#: the CF facts (:data:`rumi_xarray.conventions.facts.COLUMNS`) and the georeferencing.
COLUMNS = (*FACT_COLUMNS, *GEOREF_FACTS)


@dataclass(frozen=True)
class OverviewLevel:
    """One overview level a sidecar records: a Rumi file beside the base file.

    Attributes
    ----------
    factor : int
        Nominal decimation factor (2, 4, 8...).
    file : str
        The level file's name, in the base file's folder (``scene.rumi.ovr2``).
    height, width : int
        The level's size.
    labels_digest : str
        The digest of the level file's labels, checked when it is opened.
    header : bytes or None
        The level file's external header (``header``, hex): with it a level
        opens without reading the level file's metadata.
    """

    factor: int
    file: str
    height: int
    width: int
    labels_digest: str
    header: bytes | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """Return ``(height, width)``."""
        return (self.height, self.width)

    def to_json(self) -> dict[str, Any]:
        """Return the level as the sidecar spells it."""
        out: dict[str, Any] = {"factor": self.factor, "file": self.file,
                               "shape": [self.height, self.width],
                               LABELS_DIGEST: self.labels_digest}
        if self.header is not None:
            out["header"] = self.header.hex()
        return out

    @classmethod
    def from_json(cls, content: Any) -> OverviewLevel:
        """Return a level from the sidecar's JSON, checked.

        Raises
        ------
        ValueError
            A missing or malformed key, or a file that is not a plain name.
        """
        if not isinstance(content, Mapping):
            raise ValueError(f"overview level {content!r} is not an object")
        factor: Any = content.get("factor")
        shape: Any = content.get("shape")
        if not _count(factor) or factor < 2:
            raise ValueError(f"overview factor {factor!r} is not an integer of 2 or more")
        if not (isinstance(shape, list) and len(shape) == 2 and all(_count(n) and n >= 1
                                                                     for n in shape)):
            raise ValueError(f"overview shape {shape!r} is not [height, width]")
        digest_ = content.get(LABELS_DIGEST)
        if not isinstance(digest_, str):
            raise ValueError(f"overview level {factor} has no {LABELS_DIGEST}")
        header = content.get("header")
        if header is not None and not isinstance(header, str):
            raise ValueError(f"overview level {factor}'s header is not hex text")
        return cls(int(factor), check_file_name(content.get("file")), int(shape[0]),
                   int(shape[1]), digest_, None if header is None else bytes.fromhex(header))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Overviews:
    """The overview levels of a file, as its sidecar records them.

    Attributes
    ----------
    resampling : str
        ``"average"`` or ``"nearest"``.
    levels : tuple of OverviewLevel
        Largest (finest) first: level ``k`` is ``overview_level=k``.
    """

    resampling: str = "average"
    levels: tuple[OverviewLevel, ...] = ()

    def __bool__(self) -> bool:
        """Return whether there is any level."""
        return bool(self.levels)

    @property
    def factors(self) -> list[int]:
        """Return the levels' factors, level 0 first."""
        return [level.factor for level in self.levels]

    def level(self, index: Any, where: str) -> OverviewLevel:
        """Return level ``index`` (``overview_level=index``), or raise naming what there is.

        Parameters
        ----------
        index : int
        where : str
            The file, named in the error.

        Returns
        -------
        OverviewLevel

        Raises
        ------
        RumiArgumentError
            ``keyword="overview_level"``: the file has no such level.

        Examples
        --------
        >>> Overviews().level(0, "scene.rumi")
        Traceback (most recent call last):
        ...
        rumi_xarray.errors.RumiArgumentError: scene.rumi: overview_level=0 asks for an overview, ...
        """
        if not self.levels:
            raise argument_error(
                f"{where}: overview_level={index!r} asks for an overview, and it has none "
                f"(its sidecar records no overview levels; write them with "
                f"rx.to_rumi(..., overviews='auto') or rumi-xarray convert --overviews auto)",
                "overview_level", where)
        if not 0 <= index < len(self.levels):
            described = ", ".join(f"{i}: factor {lv.factor}, {lv.height}x{lv.width}"
                                  for i, lv in enumerate(self.levels))
            raise argument_error(
                f"{where}: overview_level={index!r} is out of range: it has "
                f"{len(self.levels)} overview level(s), 0 to {len(self.levels) - 1} "
                f"({described})", "overview_level", where)
        return self.levels[index]

    def to_json(self) -> dict[str, Any]:
        """Return the overviews as the sidecar spells them."""
        return {"resampling": self.resampling,
                "levels": [level.to_json() for level in self.levels]}

    @classmethod
    def from_json(cls, content: Any) -> Overviews:
        """Return the overviews of a sidecar's ``overviews`` key, checked.

        Raises
        ------
        ValueError
            Anything malformed (a level, an unknown resampling, levels not
            strictly coarser one after the other).
        """
        if content is None:
            return cls()
        if not isinstance(content, Mapping) or not isinstance(content.get("levels"), list):
            raise ValueError(f"{OVERVIEWS} is not an object with levels")
        resampling = content.get("resampling")
        if resampling not in RESAMPLINGS:
            raise ValueError(f"overview resampling {resampling!r} is not one of "
                             f"{list(RESAMPLINGS)}")
        levels = tuple(OverviewLevel.from_json(level) for level in content["levels"])
        factors = [level.factor for level in levels]
        if any(b <= a for a, b in itertools.pairwise(factors)):
            raise ValueError(f"overview factors {factors} are not increasing")
        return cls(str(resampling), levels)


@dataclass(frozen=True)
class Sidecar:
    """What a sidecar holds: the CF facts and the georeferencing the format lacks.

    Catalog rows carry the same in their last columns (:data:`COLUMNS`).

    Attributes
    ----------
    facts : Facts
    crs_wkt : str or None
        The full CRS (WKT2) of a CRS that is not exactly an EPSG one.
    geotransform : str or None
        GDAL's ``GeoTransform`` text of a grid whose CRS has no EPSG code.
    labels_digest : str or None
        The digest of the file's labels when it was written
        (:func:`~rumi_xarray.conventions.digests.labels_digest`); not a
        catalog column (a row has its own digest).
    attributes : Attributes
        The source's attributes no fact holds (its own catalog column,
        ``attributes``; never compared between the scenes of a cube).
    overviews : Overviews
        The file's overview levels (none by default).
    """

    facts: Facts = field(default_factory=Facts)
    crs_wkt: str | None = None
    geotransform: str | None = None
    labels_digest: str | None = None
    attributes: Attributes = field(default_factory=Attributes)
    overviews: Overviews = field(default_factory=Overviews)

    def __bool__(self) -> bool:
        """Return whether there is anything to record."""
        return (bool(self.facts) or bool(self.georef()) or self.labels_digest is not None
                or bool(self.attributes) or bool(self.overviews))

    def check_labels(self, meta: Any, where: str) -> None:
        """Raise when the file's labels are not those recorded when it was written.

        Parameters
        ----------
        meta : rumi.Metadata
            The file's metadata, read with its source (labels included).
        where : str
            The file, named in the error.

        Raises
        ------
        RumiIntegrityError
            A band text, time, transform, CRS or the header differs from what
            the writer recorded (a changed trailer).

        Examples
        --------
        >>> Sidecar().check_labels(None, "scene.rumi")  # nothing recorded: nothing to check
        """
        if self.labels_digest is None:
            return
        if labels_digest(meta, where) != self.labels_digest:
            raise RumiIntegrityError(
                f"{where}: its labels (band texts, times, georeferencing or header) differ "
                f"from those recorded in its sidecar when it was written: the file's "
                f"trailer changed (corruption) or the sidecar belongs to another file")

    def georef(self) -> dict[str, str]:
        """Return ``crs_wkt`` and ``geotransform``, those known.

        Returns
        -------
        dict
            What :func:`rumi_xarray.conventions.georef.with_sidecar` takes.
        """
        return {k: v for k, v in (("crs_wkt", self.crs_wkt),
                                  ("geotransform", self.geotransform)) if v is not None}

    def to_json(self) -> dict[str, Any]:
        """Return the sidecar's keys as strict JSON holds them (without the format marker).

        Returns
        -------
        dict
        """
        recorded = {} if self.labels_digest is None else {LABELS_DIGEST: self.labels_digest}
        described = {ATTRIBUTES: self.attributes.to_json()} if self.attributes else {}
        levels = {OVERVIEWS: self.overviews.to_json()} if self.overviews else {}
        return {**self.facts.to_json(), **self.georef(), **recorded, **described, **levels}

    @classmethod
    def from_json(cls, content: Mapping[str, Any]) -> Sidecar:
        """Return what a sidecar's JSON object holds.

        Parameters
        ----------
        content : mapping

        Returns
        -------
        Sidecar

        Raises
        ------
        ValueError
            A number that is not one, attributes that are not strict JSON
            (:meth:`Attributes.from_json
            <rumi_xarray.conventions.attributes.Attributes.from_json>`), malformed
            overview levels.
        """
        recorded = content.get(LABELS_DIGEST)
        if recorded is not None and not isinstance(recorded, str):
            raise ValueError(f"{LABELS_DIGEST} {recorded!r} is not a digest")
        return cls(Facts.from_json(content), *_georef(content), labels_digest=recorded,
                   attributes=Attributes.from_json(content.get(ATTRIBUTES)),
                   overviews=Overviews.from_json(content.get(OVERVIEWS)))

    def to_columns(self) -> dict[str, Any]:
        """Return the catalog row's sidecar columns (None where unknown).

        Returns
        -------
        dict
            One entry per name in :data:`COLUMNS`.
        """
        return {**self.facts.to_columns(), "crs_wkt": self.crs_wkt,
                "geotransform": self.geotransform}

    @classmethod
    def from_columns(cls, row: Mapping[Any, Any] | pd.Series, dtype: Any,
                     where: str = "catalog row") -> Sidecar:
        """Return the sidecar columns of a catalog row.

        Parameters
        ----------
        row : mapping
        dtype : numpy dtype-like
            The row's stored sample type
            (:meth:`Facts.from_columns <rumi_xarray.conventions.facts.Facts.from_columns>`).
        where : str
            The row, named in errors.

        Returns
        -------
        Sidecar

        Raises
        ------
        RumiCatalogError
            A fact the open keywords would refuse too (``scale_factor`` 0, an
            infinite ``add_offset``...).
        """
        try:
            return cls(Facts.from_columns(row, dtype), *_georef(row))
        except (ValueError, TypeError) as exc:
            raise RumiCatalogError(f"{where}: {exc}") from None

    def differences(self, other: Sidecar) -> list[str]:
        """Return ``"<column> <mine> != <other's>"`` for every column that differs.

        Parameters
        ----------
        other : Sidecar

        Returns
        -------
        list of str
        """
        return column_differences(self.to_columns(), other.to_columns(), COLUMNS)


def _georef(content: Mapping[Any, Any] | pd.Series) -> tuple[str | None, str | None]:
    """Return ``crs_wkt`` and ``geotransform`` of a mapping: texts, anything else unknown."""
    values = [content.get(k) for k in GEOREF_FACTS]
    return tuple(v if isinstance(v, str) else None for v in values)  # type: ignore[return-value]


def sidecar_path(source: str) -> str:
    """Return the sidecar path or URL of a Rumi source: its name and ``.aux.json``.

    Parameters
    ----------
    source : str
        A path or URL; a URL's query string (a signed URL's) and fragment stay
        at the end.

    Returns
    -------
    str
    """
    if locate(source).url:
        # A signed URL's query string stays at the end: the sidecar is its own object.
        for mark in ("?", "#"):
            if mark in source:
                head, tail = source.split(mark, 1)
                return head + SIDECAR_SUFFIX + mark + tail
    return source + SIDECAR_SUFFIX


def sibling(source: Any, name: str) -> Any:
    """Return the source of the file ``name`` in the same folder as ``source``.

    How a sidecar's overview files are found: a local path's folder, a URL's
    last path segment replaced (its query string kept, as for the sidecar),
    an fsspec source's URL so, with the same options.

    Parameters
    ----------
    source : str or FsspecSource
        A resolved source (:func:`rumi_xarray.sources.resolve.resolve`).
    name : str
        A plain file name (:func:`~rumi_xarray.model.overviews.check_file_name`).

    Returns
    -------
    str or FsspecSource

    Raises
    ------
    RumiArgumentError
        ``source`` is file content or a file object: it has no folder.

    Examples
    --------
    >>> sibling("https://host/data/scene.rumi?sig=1", "scene.rumi.ovr2")
    'https://host/data/scene.rumi.ovr2?sig=1'
    """
    if isinstance(source, FsspecSource):
        return FsspecSource(sibling(source.url, name), source.storage_options)
    if not isinstance(source, str):
        where = getattr(source, "name", type(source).__name__)
        raise argument_error(f"{where}: the file's content or a file object has no folder to "
                             f"find {name} in; open it by path or URL", "overview_level",
                             str(where))
    if locate(source).url:
        parts = urlsplit(source)
        folder = parts.path[:parts.path.rfind("/") + 1]
        return urlunsplit(parts._replace(path=folder + quote(name)))
    return os.path.join(os.path.dirname(source), name)


def read_sidecar(source: Any, storage_options: Mapping[str, Any] | None = None,
                 path: str | os.PathLike[str] | None = None,
                 pending: Prefetch | None = None) -> Sidecar:
    """Return what a source's sidecar holds (an empty :class:`Sidecar` when it has none).

    Parameters
    ----------
    source : str or other source
        Only paths and URLs have sidecars, including URLs read through fsspec
        (their sidecar is read through fsspec with the source's options).
    storage_options : dict, optional
        fsspec options for a remote sidecar.
    path : str or os.PathLike, optional
        Read this sidecar instead of the one beside ``source``.
    pending : Prefetch, optional
        The same sidecar's GET started earlier (:func:`prefetch`); its
        outcome is used instead of a new request.

    Returns
    -------
    Sidecar

    Raises
    ------
    RumiFormatError
        The sidecar exists but is not valid.
    RumiIOError
        A remote sidecar cannot be read (after Karu's retries for transient
        failures; a missing one, a 404, is no sidecar).
    """
    located = _locate(source, storage_options, path)
    if located is None:
        return Sidecar()
    target, storage_options = located
    text = _fetch(target, storage_options,
                  pending if pending is not None and pending.target == target else None)
    if text is None:
        return Sidecar()
    try:
        # Sidecars written before NaN was spelled "nan" hold a bare NaN
        # (Python's json accepts it by default): they still read.
        content = json.loads(text)
    except ValueError as exc:
        raise RumiFormatError(f"{target}: not a valid sidecar (JSON): {exc}") from exc
    if not isinstance(content, dict) or content.get("format") != SIDECAR_FORMAT:
        raise RumiFormatError(f"{target}: not a rumi-xarray sidecar (no "
                              f"\"format\": \"{SIDECAR_FORMAT}\")")
    _check_digest(content, target)
    try:
        return Sidecar.from_json(content)
    except ValueError as exc:
        raise RumiFormatError(f"{target}: not a valid sidecar: {exc}") from None


def content_digest(content: Mapping[str, Any]) -> str:
    """Return the digest a sidecar records of its content: every key but ``digest``.

    Parameters
    ----------
    content : mapping
        The sidecar's JSON object.

    Returns
    -------
    str

    Examples
    --------
    >>> content_digest({"format": "rumi-xarray-sidecar", "version": 2, "nodata": 0})[:7]
    'sha256:'
    """
    return digest(content, sorted(k for k in content if k != CONTENT_DIGEST))


def _check_digest(content: Mapping[str, Any], target: str) -> None:
    """Raise when a sidecar's content is not what its writer recorded."""
    recorded = content.get(CONTENT_DIGEST)
    version = content.get("version")
    if recorded is None:
        if isinstance(version, int) and not isinstance(version, bool) and version < 2:
            return  # written before sidecars recorded digests
        raise RumiIntegrityError(f"{redact(target)}: the sidecar (version {version!r}) has "
                                 f"no \"{CONTENT_DIGEST}\" of its content: it was edited or "
                                 f"damaged; write it again (to_rumi, convert)")
    if recorded != content_digest(content):
        raise RumiIntegrityError(f"{redact(target)}: the sidecar's content differs from the "
                                 f"digest its writer recorded: it was edited or damaged "
                                 f"after it was written; write it again (to_rumi, convert)")


def _locate(source: Any, storage_options: Mapping[str, Any] | None,
            path: str | os.PathLike[str] | None
            ) -> tuple[str, Mapping[str, Any] | None] | None:
    """Return where a source's sidecar is (and the fsspec options to read it), if anywhere."""
    if path is None:
        if isinstance(source, FsspecSource):
            storage_options = {**source.storage_options, **dict(storage_options or {})}
            source = source.url
        if not isinstance(source, str):  # file objects have no name to put a sidecar by
            return None
        path = sidecar_path(source)
    # A sidecar= given as a GDAL virtual path is read as the URL it names.
    where = locate(path)
    return (where.target if where.url and where.target else os.fspath(path)), storage_options


@dataclass
class Prefetch:
    """A remote sidecar's GET running in a thread while the file's metadata is read.

    Only the request runs there: its outcome (text, missing, or the error) is
    taken on the caller's thread by :func:`read_sidecar`, so warnings and
    errors about the sidecar are raised where the user opened the file, and
    no process-wide warning state is touched from another thread.
    """

    target: str
    future: Future[str | None]


def prefetch(source: Any, *, sidecar: bool | str | os.PathLike[str] | None = None,
             storage_options: Mapping[str, Any] | None = None) -> Prefetch | None:
    """Start the GET of a remote source's sidecar; return it (``None`` when not remote).

    A remote open otherwise makes its requests one after the other: two
    metadata ranges, then the sidecar. Started before the metadata read, the
    sidecar's request overlaps it, so an open costs the latency of the
    metadata reads alone.

    Parameters
    ----------
    source : str or other source
        The resolved source (as :func:`rumi_xarray.conventions.cf.source_facts` receives it).
    sidecar : bool or path, optional
        As for :func:`rumi_xarray.conventions.cf.source_facts`.
    storage_options : mapping, optional

    Returns
    -------
    Prefetch or None
    """
    look = options.option("sidecar") if sidecar is None else sidecar
    if look is False:
        return None
    located = _locate(source, storage_options, None if look is True else look)
    if located is None or not locate(located[0]).url:
        return None  # local sidecars cost a stat, not a round trip
    target, opts = located
    global _PREFETCH_POOL
    if _PREFETCH_POOL is None:
        _PREFETCH_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rumi-sidecar")
    return Prefetch(target, _PREFETCH_POOL.submit(_get, target, opts))


_PREFETCH_POOL: ThreadPoolExecutor | None = None


def background(fn: Any, *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` on the threads that prefetch sidecars; return its future.

    For other reads that overlap an open's round trips (an overview level's
    metadata, guessed while the sidecar that names it is fetched).

    Parameters
    ----------
    fn : callable
    *args

    Returns
    -------
    concurrent.futures.Future
    """
    global _PREFETCH_POOL
    if _PREFETCH_POOL is None:
        _PREFETCH_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rumi-sidecar")
    return _PREFETCH_POOL.submit(fn, *args)


def _fetch(target: str, storage_options: Mapping[str, Any] | None,
           pending: Prefetch | None = None) -> str | None:
    if locate(target).local:
        if not os.path.exists(target):
            return None
        with open(target, "rb") as f:
            return _text(f.read(), target)
    try:
        return pending.future.result() if pending is not None else _get(target,
                                                                       storage_options)
    except FileNotFoundError as exc:
        if not retry.transient(exc):
            return None  # no sidecar: the file has no facts to record
        failure: Exception = exc
    except RumiError:
        raise
    except Exception as exc:  # fsspec backends raise their own types
        failure = exc
    # Retried as Karu retries the file's own reads (in _get); what still fails is an
    # error: opening without the sidecar's nodata, scale and offset would decode raw
    # numbers as values. An object store answering 403 for a missing object lands here
    # too: sidecar=False says the file has none.
    tried = f" after {retry.attempts()} attempts" if retry.transient(failure) else ""
    raise with_context(failure, f"cannot read the sidecar {redact(target)}{tried}; without "
                       f"it nodata, scale and offset would be unknown (pass sidecar=False "
                       f"to open the file without its sidecar)", source=redact(target),
                       kind=RumiIOError) from failure


def _get(target: str, storage_options: Mapping[str, Any] | None) -> str | None:
    """Return a remote sidecar's text (one GET, retried as Karu retries); raise what fails."""
    import fsspec

    # cat_file is one GET (fsspec.open would first ask for the size: a HEAD).
    fs, path = fsspec.core.url_to_fs(target, **dict(storage_options or {}))
    return _text(retry.call(lambda: bytes(fs.cat_file(path))), target)


def _text(data: bytes, target: str) -> str:
    """Return a sidecar's bytes as text; raise naming it when they are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RumiFormatError(f"{redact(target)}: not a valid sidecar (not UTF-8 text: "
                              f"{exc})") from None


def write_sidecar(path: str | os.PathLike[str], sidecar: Sidecar) -> str | None:
    """Write (or remove) the sidecar of a local Rumi file, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The Rumi file.
    sidecar : Sidecar
        What to record; unknown facts are left out, and nothing at all
        removes a stale sidecar.

    Returns
    -------
    str or None
        The sidecar path, or None when nothing needed one.
    """
    update = SidecarUpdate(path, sidecar)
    update.stage()
    return update.commit()


class SidecarUpdate:
    """A sidecar write in two steps, so it can follow the Rumi file it describes.

    :meth:`stage` writes a temporary file beside the target (before the Rumi
    file replaces its destination), :meth:`commit` renames it into place, or
    removes a stale sidecar when there is nothing to record, and
    :meth:`discard` removes the temporary file after a failure. A reader
    therefore never sees a half-written sidecar, and never an old sidecar
    next to a new file for longer than between two renames.

    Parameters
    ----------
    path : str or os.PathLike
        The Rumi file.
    sidecar : Sidecar
        As for :func:`write_sidecar`.
    """

    def __init__(self, path: str | os.PathLike[str], sidecar: Sidecar) -> None:
        self.target = sidecar_path(os.fspath(path))
        self.content = sidecar.to_json()
        self.temporary: str | None = None

    def stage(self, labels: str | None = None, overviews: Overviews | None = None) -> None:
        """Write the new sidecar to a temporary file beside the target.

        Parameters
        ----------
        labels : str, optional
            The digest of the labels of the file just written
            (:func:`~rumi_xarray.conventions.digests.labels_digest`), known
            only once it is written.
        overviews : Overviews, optional
            The overview levels written beside it.
        """
        if labels is not None:
            self.content[LABELS_DIGEST] = labels
        if overviews:
            self.content[OVERVIEWS] = overviews.to_json()
        if not self.content:
            return
        directory = os.path.dirname(os.path.abspath(self.target))
        self.temporary = os.path.join(
            directory, f".{os.path.basename(self.target)}.{secrets.token_hex(6)}.tmp")
        content = {"format": SIDECAR_FORMAT, "version": SIDECAR_VERSION, **self.content}
        content[CONTENT_DIGEST] = content_digest(content)
        try:
            with open(self.temporary, "w", encoding="utf-8") as f:
                # Strict JSON (jq, JavaScript, other languages read it as is).
                json.dump(content, f, indent=1, allow_nan=False)
                f.write("\n")
        except BaseException:
            self.discard()
            raise

    def commit(self) -> str | None:
        """Put the staged sidecar in place (or remove a stale one).

        Returns
        -------
        str or None
            The sidecar path, or None when there is none now.
        """
        if self.temporary is None:
            if os.path.lexists(self.target):
                os.remove(self.target)
            return None
        os.replace(self.temporary, self.target)
        self.temporary = None
        return self.target

    def discard(self) -> None:
        """Remove the staged temporary file, if any."""
        if self.temporary is not None and os.path.lexists(self.temporary):
            os.remove(self.temporary)
        self.temporary = None

