"""Nodata, scale, offset and units: CF facts the Rumi format has no field for.

They live beside the file in a JSON sidecar, ``<file>.aux.json`` (as GDAL keeps
such facts in ``.aux.xml`` for formats that lack them), written by
``to_rumi``/``convert``; in catalog columns and STAC items (so opening a
catalog stays at zero requests); or in ``open_dataset`` keywords for files
written elsewhere. Keywords win over the sidecar.

They reach xarray as CF attributes (``_FillValue``, ``scale_factor``,
``add_offset``, ``units``), which xarray's decoder applies when
``mask_and_scale=True`` (the default), exactly as rioxarray's
``open_rasterio(mask_and_scale=True)`` does for a GeoTIFF: the decoded type is
``float32`` for samples of 16 bits or less and ``float64`` otherwise (GDAL's
and rioxarray's rule), unless the sidecar's ``decoded_dtype`` says otherwise
(a netCDF variable whose ``scale_factor`` was a float64 decodes to float64,
as CF says).

Write side (:func:`encode`): what ``to_rumi`` stores for a variable, and the
facts its sidecar records. A variable decoded in memory (float with NaN,
its packing in ``encoding``) is packed back with xarray's own CF encoder; a
raw one (CF attributes in ``attrs``, as rioxarray's ``mask_and_scale=False``
gives) is stored as it is; ``encode_cf=False`` stores decoded values instead.
What cannot be stored (per-band scales or units that differ) is warned about.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import warnings
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray import options
from rumi_xarray.errors import RumiFormatError, argument_error, user_stacklevel
from rumi_xarray.sources.redact import redact, redact_text
from rumi_xarray.sources.transport import FsspecSource

#: Suffix appended to the Rumi file's name.
SIDECAR_SUFFIX = ".aux.json"
#: Format marker and version written into every sidecar.
SIDECAR_FORMAT = "rumi-xarray-sidecar"
SIDECAR_VERSION = 1

#: Georeferencing the Rumi format cannot hold: the full CRS (WKT2) of a CRS that is
#: not exactly an EPSG one, and GDAL's GeoTransform text of a grid without an EPSG code.
GEOREF_FACTS = ("crs_wkt", "geotransform")
#: Sidecar keys -> CF attribute names.
_CF_NAMES = {"nodata": "_FillValue", "scale_factor": "scale_factor",
             "add_offset": "add_offset", "units": "units"}
#: Every key a sidecar may hold besides its format marker: the CF facts and
#: the floating-point type packed values decode to.
FACTS = (*_CF_NAMES, "decoded_dtype", *GEOREF_FACTS)
#: CF attributes that describe packing and masking.
_PACKING = ("_FillValue", "missing_value", "scale_factor", "add_offset")
#: Sidecar keys holding numbers, which may be NaN or infinite.
_NUMBERS = ("nodata", "scale_factor", "add_offset")
#: JSON has no NaN or infinity: the sidecar spells them as GDAL's .aux.xml does.
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf}


def sidecar_path(source: str) -> str:
    """Return the sidecar path or URL of a Rumi source.

    Parameters
    ----------
    source : str

    Returns
    -------
    str
    """
    if "://" in source:
        # A signed URL's query string stays at the end: the sidecar is its own object.
        for mark in ("?", "#"):
            if mark in source:
                head, tail = source.split(mark, 1)
                return head + SIDECAR_SUFFIX + mark + tail
    return source + SIDECAR_SUFFIX


def read_sidecar(source: Any, storage_options: Mapping[str, Any] | None = None,
                 path: str | os.PathLike[str] | None = None,
                 pending: Prefetch | None = None) -> dict[str, Any]:
    """Return the facts of a source's sidecar, or ``{}`` when it has none.

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
    dict
        Keys among ``nodata``, ``scale_factor``, ``add_offset``, ``units``,
        ``decoded_dtype``.

    Raises
    ------
    RumiFormatError
        The sidecar exists but is not valid.
    """
    located = _locate(source, storage_options, path)
    if located is None:
        return {}
    target, storage_options = located
    text = _fetch(target, storage_options,
                  pending if pending is not None and pending.target == target else None)
    if text is None:
        return {}
    try:
        # Sidecars written before NaN was spelled "nan" hold a bare NaN
        # (Python's json accepts it by default): they still read.
        content = json.loads(text)
    except ValueError as exc:
        raise RumiFormatError(f"{target}: not a valid sidecar (JSON): {exc}") from exc
    if not isinstance(content, dict) or content.get("format") != SIDECAR_FORMAT:
        raise RumiFormatError(f"{target}: not a rumi-xarray sidecar (no "
                              f"\"format\": \"{SIDECAR_FORMAT}\")")
    return {k: _from_json(k, content[k]) for k in FACTS if content.get(k) is not None}


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
    return os.fspath(path), storage_options


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
        The resolved source (as :func:`source_cf_attributes` receives it).
    sidecar : bool or path, optional
        As for :func:`source_cf_attributes`.
    storage_options : mapping, optional

    Returns
    -------
    Prefetch or None
    """
    look = options.option("sidecar") if sidecar is None else sidecar
    if look is False:
        return None
    located = _locate(source, storage_options, None if look is True else look)
    if located is None or "://" not in located[0]:
        return None  # local sidecars cost a stat, not a round trip
    target, opts = located
    global _PREFETCH_POOL
    if _PREFETCH_POOL is None:
        _PREFETCH_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rumi-sidecar")
    return Prefetch(target, _PREFETCH_POOL.submit(_get, target, opts))


_PREFETCH_POOL: ThreadPoolExecutor | None = None


def _to_json(key: str, value: Any) -> Any:
    """Return a fact as valid JSON holds it: NaN and infinities as ``"nan"``, ``"inf"``..."""
    if key in _NUMBERS and isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _from_json(key: str, value: Any) -> Any:
    """Return a fact as read from JSON: ``"nan"``, ``"inf"``, ``"-inf"`` as floats."""
    if key in _NUMBERS and isinstance(value, str):
        number = _NON_FINITE.get(value.strip().lower())
        if number is not None:
            return number
    return value


def _fetch(target: str, storage_options: Mapping[str, Any] | None,
           pending: Prefetch | None = None) -> str | None:
    if "://" not in target:
        if not os.path.exists(target):
            return None
        with open(target, encoding="utf-8") as f:
            return f.read()
    try:
        return pending.future.result() if pending is not None else _get(target,
                                                                       storage_options)
    except FileNotFoundError:
        return None
    except Exception as exc:  # fsspec backends raise their own types
        # An object store may answer 403 for a missing object (aiohttp, botocore and
        # OS errors alike), or serve something that is not text; a sidecar that
        # cannot be read must not make the file unreadable, but must not pass
        # unnoticed either.
        warnings.warn(f"cannot read the sidecar {redact(target)} "
                      f"({type(exc).__name__}: {redact_text(str(exc))}); nodata, scale and "
                      f"offset are unknown unless given as keywords", RuntimeWarning,
                      stacklevel=user_stacklevel())
        return None


def _get(target: str, storage_options: Mapping[str, Any] | None) -> str | None:
    """Return a remote sidecar's text (one GET); raise what fsspec raises."""
    import fsspec

    # cat_file is one GET (fsspec.open would first ask for the size: a HEAD).
    fs, path = fsspec.core.url_to_fs(target, **dict(storage_options or {}))
    return bytes(fs.cat_file(path)).decode("utf-8")


def write_sidecar(path: str | os.PathLike[str], facts: Mapping[str, Any]) -> str | None:
    """Write (or remove) the sidecar of a local Rumi file, atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The Rumi file.
    facts : mapping
        ``nodata``, ``scale_factor``, ``add_offset``, ``units``,
        ``decoded_dtype``; ``None`` values are left out. No fact at all
        removes a stale sidecar.

    Returns
    -------
    str or None
        The sidecar path, or None when nothing needed one.
    """
    update = SidecarUpdate(path, facts)
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
    facts : mapping
        As for :func:`write_sidecar`.
    """

    def __init__(self, path: str | os.PathLike[str], facts: Mapping[str, Any]) -> None:
        self.target = sidecar_path(os.fspath(path))
        self.content = {k: _to_json(k, _plain(v)) for k, v in facts.items()
                        if k in FACTS and v is not None}
        self.temporary: str | None = None

    def stage(self) -> None:
        """Write the new sidecar to a temporary file beside the target."""
        if not self.content:
            return
        directory = os.path.dirname(os.path.abspath(self.target))
        self.temporary = os.path.join(
            directory, f".{os.path.basename(self.target)}.{secrets.token_hex(6)}.tmp")
        content = {"format": SIDECAR_FORMAT, "version": SIDECAR_VERSION, **self.content}
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


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def source_cf_attributes(source: Any, *,
                         sidecar: bool | str | os.PathLike[str] | None = None,
                         storage_options: Mapping[str, Any] | None = None, nodata: Any = None,
                         scale_factor: float | None = None, add_offset: float | None = None,
                         units: str | None = None, dtype: np.dtype | None = None,
                         where: str = "", pending: Prefetch | None = None) -> dict[str, Any]:
    """Return the CF attributes of a source: its sidecar's, overridden by keywords.

    Parameters
    ----------
    source : str or other source
    sidecar : bool or path, optional
        ``None``: the ``sidecar`` option; ``False``: do not look; a path:
        read that sidecar.
    storage_options : mapping, optional
    nodata, scale_factor, add_offset, units : optional
        Explicit facts; they win over the sidecar.
    dtype : numpy.dtype, optional
        The file's sample type: ``_FillValue`` is cast to it.
    where : str
        Named in errors.
    pending : Prefetch, optional
        The sidecar's GET, already started by :func:`prefetch`.

    Returns
    -------
    dict
        CF attributes: ``_FillValue``, ``scale_factor``, ``add_offset``,
        ``units``, whichever are known.
    """
    look = options.option("sidecar") if sidecar is None else sidecar
    facts: dict[str, Any] = {}
    if look is not False:
        path = None if look is True else look
        facts.update(read_sidecar(source, storage_options, path, pending))
    given = {"nodata": nodata, "scale_factor": scale_factor, "add_offset": add_offset,
             "units": units}
    facts.update({k: v for k, v in given.items() if v is not None})
    if nodata is not None:
        _check_nodata_keyword(nodata, dtype, where)
    return cf_attributes(facts, dtype, where)


def _check_nodata_keyword(value: Any, dtype: np.dtype | None, where: str) -> None:
    """Raise ``RumiArgumentError`` (``keyword="nodata"``) when ``nodata=`` cannot be a sample.

    The same value from a sidecar is the file's fault (``RumiFormatError``);
    typed as a keyword, it is the caller's.
    """
    try:
        _fill_value(value, dtype, where)
    except RumiFormatError as exc:
        reason = str(exc).removeprefix(f"{where}: ")
        raise argument_error(f"{where}: nodata={value!r} cannot be used with this file's "
                             f"{np.dtype(dtype)} samples ({reason})", "nodata", where) from None


def cf_attributes(facts: Mapping[str, Any], dtype: np.dtype | None, where: str = ""
                  ) -> dict[str, Any]:
    """Return CF attributes for facts named as in the sidecar.

    Parameters
    ----------
    facts : mapping
        ``nodata``, ``scale_factor``, ``add_offset``, ``units``,
        ``decoded_dtype``.
    dtype : numpy.dtype, optional
        The stored sample type, for ``_FillValue`` and the decoded type.
    where : str

    Returns
    -------
    dict
        ``scale_factor`` and ``add_offset`` are numpy scalars of the type
        packed values decode to (xarray's decoder takes the decoded type from
        them): ``decoded_dtype`` when known, else float32 for samples of 16
        bits or less and float64 otherwise, as GDAL and rioxarray decode.
    """
    out: dict[str, Any] = {}
    decoded = decoded_type(facts, dtype, where)
    for key, name in _CF_NAMES.items():
        value = facts.get(key)
        if value is None:
            continue
        if key == "nodata":
            value = _fill_value(value, dtype, where)
            if value is None:
                continue
        elif key in ("scale_factor", "add_offset"):
            value = decoded.type(value)
        else:
            value = str(value)
        out[name] = value
    # Georeferencing facts pass through for georef.with_sidecar, which takes them out.
    out.update({k: str(facts[k]) for k in GEOREF_FACTS if isinstance(facts.get(k), str)})
    return out


def decoded_type(facts: Mapping[str, Any], dtype: np.dtype | None, where: str = ""
                 ) -> np.dtype:
    """Return the floating-point type packed samples decode to.

    Parameters
    ----------
    facts : mapping
        May hold ``decoded_dtype``, or typed ``scale_factor``/``add_offset``.
    dtype : numpy.dtype, optional
        The stored sample type.
    where : str

    Returns
    -------
    numpy.dtype
        float32 or float64.
    """
    named = facts.get("decoded_dtype")
    if named is not None:
        try:
            chosen = np.dtype(named)
        except TypeError as exc:
            raise RumiFormatError(f"{where}: decoded_dtype {named!r} is not a dtype") from exc
        if chosen not in (np.dtype("float32"), np.dtype("float64")):
            raise RumiFormatError(f"{where}: decoded_dtype must be float32 or float64, "
                                  f"got {named!r}")
        return chosen
    for key in ("scale_factor", "add_offset"):
        value = facts.get(key)
        if isinstance(value, np.floating) and value.dtype in (np.float32, np.float64):
            return np.dtype(value.dtype)
    return gdal_decoded_type(dtype)


def gdal_decoded_type(dtype: np.dtype | None) -> np.dtype:
    """Return the type GDAL/rioxarray decode samples of ``dtype`` to.

    Parameters
    ----------
    dtype : numpy.dtype, optional

    Returns
    -------
    numpy.dtype
        float32 for integers of 16 bits or less and for float16/float32,
        float64 otherwise.
    """
    if dtype is not None and np.dtype(dtype).kind in "iufb" and np.dtype(dtype).itemsize <= 2:
        return np.dtype("float32")
    if dtype is not None and np.dtype(dtype) == np.float32:
        return np.dtype("float32")
    return np.dtype("float64")


def _fill_value(value: Any, dtype: np.dtype | None, where: str) -> Any:
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    exact = isinstance(value, (int, np.integer))
    number = float(value)
    if dtype is None:
        return int(value) if exact else number
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        if not exact and (math.isnan(number) or not number.is_integer()):
            raise RumiFormatError(f"{where}: nodata {value!r} cannot be a {dtype} sample")
        whole = int(value) if exact else int(number)
        info = np.iinfo(dtype)
        if not info.min <= whole <= info.max:
            raise RumiFormatError(f"{where}: nodata {value!r} is outside the range of "
                                  f"{dtype}")
        return dtype.type(whole)
    if dtype.kind == "b":
        return np.bool_(bool(number))
    return dtype.type(number)


# --- write side -----------------------------------------------------------------


@dataclass(frozen=True)
class Encoded:
    """What ``to_rumi`` stores for a variable: its samples and the sidecar's facts.

    Attributes
    ----------
    data : xarray.DataArray
        The values to store, as lazy as the input was.
    facts : dict
        Sidecar facts: ``nodata``, ``scale_factor``, ``add_offset``,
        ``units``, ``decoded_dtype`` (only those known).
    """

    data: xr.DataArray
    facts: dict[str, Any]


def encode(da: xr.DataArray, where: str, *, attrs: Mapping[Any, Any] | None = None,
           encoding: Mapping[Any, Any] | None = None, encode_cf: bool = True,
           dtype: Any = None) -> Encoded:
    """Return the samples to store for ``da`` and the facts its sidecar records.

    - A variable decoded in memory (xarray or rioxarray with
      ``mask_and_scale=True``: floats with NaN, the packing in ``encoding``:
      ``dtype``, ``_FillValue``/``missing_value``, ``scale_factor``,
      ``add_offset``) is packed back with xarray's own CF encoder
      (:func:`xarray.conventions.encode_cf_variable`), exactly as
      ``to_netcdf`` would, then cast to the packed type with a check that
      every value fits (xarray's cast would wrap around silently).
    - A raw variable (those CF attributes in ``attrs``, as rioxarray's
      ``mask_and_scale=False`` gives, with rioxarray's ``rio.nodata`` and
      ``rio.encoded_nodata`` read from the same keys) is stored as it is.
    - ``encode_cf=False`` stores decoded values instead: raw variables are
      decoded with xarray's decoder (NaN where nodata was), and nodata is
      then NaN.
    - ``dtype`` casts what is stored (e.g. ``"float32"`` with
      ``encode_cf=False``); with ``encode_cf=True`` it is the packed type
      (like ``to_netcdf``'s ``encoding={"v": {"dtype": ...}}``).

    Scale 1 with offset 0 is no packing and is not recorded. rioxarray's
    per-band ``scales``/``offsets`` that differ cannot be one CF scale: such
    raw values are decoded per band and stored decoded (with a warning); a
    ``units`` tuple whose texts differ is not stored (with a warning).

    Parameters
    ----------
    da : xarray.DataArray
        ``(time, band, y, x)``.
    where : str
        Named in errors and warnings (the destination).
    attrs, encoding : mapping, optional
        Where the CF facts are read; default ``da.attrs`` and ``da.encoding``.
    encode_cf : bool, default True
    dtype : numpy dtype-like, optional

    Returns
    -------
    Encoded

    Raises
    ------
    ValueError
        Conflicting facts (the same key in ``attrs`` and ``encoding`` with
        different values), a nodata the stored type cannot hold, or a float
        ``dtype`` for packed values.
    """
    attrs = {str(k): v for k, v in (da.attrs if attrs is None else attrs).items()}
    encoding = {str(k): v for k, v in (da.encoding if encoding is None else encoding).items()}
    target = None if dtype is None else np.dtype(dtype)
    n_bands = int(da.sizes.get("band", 1))
    if da.dtype.kind in "fc":
        _unsigned(encoding)
    raw = {k: attrs[k] for k in (*_PACKING, "scales", "offsets") if attrs.get(k) is not None}
    packed = {k: encoding[k] for k in (*_PACKING, "scales", "offsets")
              if encoding.get(k) is not None}
    if da.dtype.kind in "fc" and _missing(packed) is not None:
        # A NaN fill in attrs beside a packed fill in encoding only says that
        # decoded values mark nodata with NaN.
        for key in ("_FillValue", "missing_value"):
            if key in raw and _is_nan(raw[key]):
                del raw[key]
    _check_conflicts(raw, packed, where)
    units = _units(attrs.get("units", encoding.get("units")), n_bands, where)
    facts: dict[str, Any] = {"units": units}

    per_band = _per_band(raw, n_bands, "raw") or _per_band(packed, n_bands, "decoded")
    if per_band is not None:
        return _per_band_decoded(da, raw, packed, per_band, where, facts, target)
    raw = _without_identity(_scalar_bands(raw, n_bands))
    packed = _without_identity(_scalar_bands(packed, n_bands))

    if not encode_cf:
        data = _decode_raw(da, raw, where) if raw else da
        if raw or packed:
            missing = _missing(raw) if raw else _missing(packed)
            if missing is not None and data.dtype.kind in "fc":
                facts["nodata"] = float("nan")
            elif missing is not None:
                facts["nodata"] = missing
        data = _cast(data, target, where, facts)
        return Encoded(data, _checked(facts, data.dtype, where))

    if packed and da.dtype.kind in "fc":
        stored = target or np.dtype(encoding.get("dtype", da.dtype))
        if stored.kind in "fc" and ("scale_factor" in packed or "add_offset" in packed) \
                and target is not None:
            raise ValueError(
                f"{where}: dtype={str(target)!r} would store packed numbers (scaled by "
                f"scale_factor/add_offset) as floats; pass encode_cf=False (convert "
                f"--decode) to store the decoded values as {target}")
        data, facts_cf = _pack(da, packed, stored, where)
        facts.update(facts_cf)
        if stored.kind in "iu":
            # Typed scale/offset (netCDF attributes) say what the values decode
            # to; untyped ones (GDAL, JSON-based Zarr) follow GDAL's rule.
            facts["decoded_dtype"] = _declared_type(packed)
        return Encoded(data, _checked(facts, data.dtype, where))

    source = raw or packed  # packed facts on integer data: the values are raw
    missing = _missing(source)
    if missing is not None:
        facts["nodata"] = missing
    for key in ("scale_factor", "add_offset"):
        if key in source:
            facts[key] = source[key]
    if "scale_factor" in facts or "add_offset" in facts:
        facts["decoded_dtype"] = _declared_type(source)
    data = _cast(da, target, where, facts)
    return Encoded(data, _checked(facts, data.dtype, where))


def _check_conflicts(raw: Mapping[str, Any], packed: Mapping[str, Any], where: str) -> None:
    for key in set(raw) & set(packed):
        a, b = raw[key], packed[key]
        same = np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                              equal_nan=True) if _numeric(a) and _numeric(b) else a == b
        if not same:
            raise ValueError(f"{where}: {key} is {a!r} in attrs but {b!r} in encoding; "
                             f"remove one of them (attrs describe raw values, encoding "
                             f"decoded ones)")


def _numeric(value: Any) -> bool:
    try:
        np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return False
    return True


def _units(value: Any, n_bands: int, where: str) -> str | None:
    """Return one units text, warning when per-band units differ."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        texts = [str(v) for v in np.asarray(value, dtype=object).ravel() if v not in (None, "")]
        if not texts:
            return None
        if len(set(texts)) == 1:
            return texts[0]
        warnings.warn(f"{where}: units differ between bands ({', '.join(map(repr, texts))}); "
                      f"the sidecar holds one units text for the file, so none is stored",
                      UserWarning, stacklevel=4)
        return None
    return str(value) if str(value) else None


def _per_band(facts: Mapping[str, Any], n_bands: int, kind: str
              ) -> tuple[str, list[float], list[float]] | None:
    """Return ``(kind, scales, offsets)`` when rioxarray's per-band values differ."""
    scales, offsets = facts.get("scales"), facts.get("offsets")
    if scales is None and offsets is None:
        return None
    s = [float(v) for v in (scales if scales is not None
                            else [facts.get("scale_factor", 1.0)] * n_bands)]
    o = [float(v) for v in (offsets if offsets is not None
                            else [facts.get("add_offset", 0.0)] * n_bands)]
    if len(set(s)) <= 1 and len(set(o)) <= 1:
        return None
    return kind, s, o


def _scalar_bands(facts: Mapping[str, Any], n_bands: int) -> dict[str, Any]:
    """Fold equal per-band ``scales``/``offsets`` into ``scale_factor``/``add_offset``."""
    out = {k: v for k, v in facts.items() if k not in ("scales", "offsets")}
    for many, one in (("scales", "scale_factor"), ("offsets", "add_offset")):
        values = facts.get(many)
        if values is not None and len(values) and one not in out:
            out[one] = values[0]
    return out


def _without_identity(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Drop scale 1 with offset 0 (GDAL's defaults): no packing at all."""
    out = dict(facts)
    scale, offset = out.get("scale_factor"), out.get("add_offset")
    if (scale is None or float(scale) == 1.0) and (offset is None or float(offset) == 0.0):
        out.pop("scale_factor", None)
        out.pop("add_offset", None)
    return out


def _missing(facts: Mapping[str, Any]) -> Any:
    """Return the nodata value: ``_FillValue``, else ``missing_value``."""
    fill = facts.get("_FillValue")
    if fill is None:
        fill = facts.get("missing_value")
    if isinstance(fill, (list, tuple, np.ndarray)):
        values = np.atleast_1d(np.asarray(fill))
        fill = values[0] if values.size else None
    return fill


def _declared_type(facts: Mapping[str, Any]) -> str | None:
    """Return the decoded type a raw variable's typed scale/offset declare, if any."""
    for key in ("scale_factor", "add_offset"):
        value = facts.get(key)
        if isinstance(value, np.floating) and value.dtype in (np.float32, np.float64):
            return str(value.dtype)
    return None


def _is_nan(value: Any) -> bool:
    try:
        return bool(np.isnan(value))
    except (TypeError, ValueError):
        return False


def _unsigned(encoding: dict[str, Any]) -> None:
    """Store netCDF-3's ``_Unsigned`` integers as the unsigned type Rumi has."""
    flag = encoding.pop("_Unsigned", None)
    if str(flag).lower() == "true" and "dtype" in encoding:
        signed = np.dtype(encoding["dtype"])
        if signed.kind == "i":
            unsigned = np.dtype(f"u{signed.itemsize}")
            encoding["dtype"] = unsigned
            for key in ("_FillValue", "missing_value"):
                value = encoding.get(key)
                if value is not None and _numeric(value) and float(value) < 0:
                    encoding[key] = unsigned.type(int(value) % (1 << (8 * signed.itemsize)))


def signature(da: xr.DataArray) -> dict[str, Any]:
    """Return the CF facts of a variable, to compare variables stacked as bands.

    Parameters
    ----------
    da : xarray.DataArray

    Returns
    -------
    dict
        Packing keys of ``attrs`` and ``encoding`` (prefixed ``attrs:`` and
        ``encoding:``), ``encoding:dtype`` and ``units``, as plain values.
    """
    out: dict[str, Any] = {}
    for where, mapping in (("attrs", da.attrs), ("encoding", da.encoding)):
        for key in (*_PACKING, "scales", "offsets"):
            if mapping.get(key) is not None:
                out[f"{where}:{key}"] = repr(np.asarray(mapping[key]).tolist())
    if da.encoding.get("dtype") is not None and out:
        out["encoding:dtype"] = str(np.dtype(da.encoding["dtype"]))
    if da.attrs.get("units") is not None:
        out["units"] = repr(da.attrs["units"])
    return out


def packing(da: xr.DataArray) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the CF attributes and encoding entries of ``da`` that :func:`encode` reads.

    Parameters
    ----------
    da : xarray.DataArray

    Returns
    -------
    attrs, encoding : dict
    """
    keys = (*_PACKING, "scales", "offsets", "units")
    attrs = {k: da.attrs[k] for k in keys if k in da.attrs}
    encoding = {k: da.encoding[k] for k in (*keys, "dtype", "_Unsigned") if k in da.encoding}
    return attrs, encoding


def _pack(da: xr.DataArray, packed: Mapping[str, Any], stored: np.dtype, where: str
          ) -> tuple[xr.DataArray, dict[str, Any]]:
    """Pack decoded values with xarray's CF encoder, then cast them with a range check."""
    from xarray.conventions import encode_cf_variable

    enc = dict(packed)
    fill_key = "_FillValue" if "_FillValue" in enc else "missing_value"
    if fill_key in enc:
        # The encoder only casts the fill value when nothing is scaled; it is
        # a packed sample either way.
        enc[fill_key] = _fill_value(_missing(enc), stored, where)
        if fill_key == "missing_value":
            enc["_FillValue"] = enc.pop("missing_value")
    scaled = "scale_factor" in enc or "add_offset" in enc
    variable = xr.Variable(da.dims, da.data, {}, enc)
    with warnings.catch_warnings():
        # xarray's own notes about its encoding choices are not the user's concern here.
        warnings.simplefilter("ignore", xr.SerializationWarning)
        encoded = encode_cf_variable(variable, name=str(da.name))
    facts: dict[str, Any] = {}
    if "_FillValue" in enc:
        # Not the encoded attrs: xarray adds a default NaN fill to floats.
        facts["nodata"] = enc["_FillValue"]
    if scaled:
        facts["scale_factor"] = encoded.attrs.get("scale_factor")
        facts["add_offset"] = encoded.attrs.get("add_offset")
    out = da.copy(data=encoded.data)
    return _checked_cast(out, stored, where, nodata="nodata" in facts), facts


def _decode_raw(da: xr.DataArray, raw: Mapping[str, Any], where: str) -> xr.DataArray:
    """Decode raw values (CF attributes) with xarray's decoder, lazily for dask data."""
    from xarray.conventions import decode_cf_variable

    attrs = {k: v for k, v in raw.items() if k in _PACKING}
    for key in ("_FillValue", "missing_value"):
        if key in attrs:
            attrs[key] = _fill_value(attrs[key], da.dtype, where)
    # Decoded in the type the file would decode to when read (GDAL's rule
    # unless the attributes are typed), so both ways give the same numbers.
    float_type = decoded_type(attrs, da.dtype, where)
    for key in ("scale_factor", "add_offset"):
        if key in attrs:
            attrs[key] = float_type.type(attrs[key])
    variable = xr.Variable(da.dims, da.data, attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xr.SerializationWarning)
        decoded = decode_cf_variable(str(da.name), variable, mask_and_scale=True,
                                     decode_times=False, decode_timedelta=False)
    data = decoded._data  # dask stays dask (xarray decodes it block by block)
    if not hasattr(data, "dask"):
        data = np.asarray(decoded.values)
    return da.copy(data=data)


def _per_band_decoded(da: xr.DataArray, raw: Mapping[str, Any], packed: Mapping[str, Any],
                      per_band: tuple[str, list[float], list[float]], where: str,
                      facts: dict[str, Any], target: np.dtype | None) -> Encoded:
    """Store physical values when bands have scales or offsets of their own."""
    kind, scales, offsets = per_band
    if kind == "raw":
        float_type = gdal_decoded_type(da.dtype)
        values = da.astype(float_type)
        missing = _missing(raw)
        if missing is not None and not (isinstance(missing, float) and math.isnan(missing)):
            values = values.where(da != missing)
        s = xr.DataArray(np.asarray(scales, dtype=float_type), dims="band")
        o = xr.DataArray(np.asarray(offsets, dtype=float_type), dims="band")
        # Multiplying and adding in the decoded type, band by band, is what
        # rioxarray's mask_and_scale=True computes.
        data = (values * s + o).transpose(*da.dims)
        data = da.copy(data=data.data)
        if missing is not None:
            facts["nodata"] = float("nan")
    else:
        data = da
        if _missing(packed) is not None:
            facts["nodata"] = float("nan")
    warnings.warn(
        f"{where}: the bands have different scales {scales} or offsets {offsets}; the "
        f"sidecar holds one scale and offset per file, so the decoded values are stored "
        f"({data.dtype}) instead of packed samples", UserWarning, stacklevel=3)
    data = _cast(data, target, where, facts)
    return Encoded(data, _checked(facts, data.dtype, where))


def _cast(da: xr.DataArray, target: np.dtype | None, where: str,
          facts: dict[str, Any]) -> xr.DataArray:
    if target is None or target == da.dtype:
        return da
    return _checked_cast(da, target, where, nodata=facts.get("nodata") is not None)


def _checked_cast(da: xr.DataArray, target: np.dtype, where: str, *, nodata: bool
                  ) -> xr.DataArray:
    """Cast to ``target``, rounding floats to integers as xarray does, never wrapping.

    The check runs as the data are computed (lazily for dask input) and
    raises naming the destination when a value does not fit ``target``.
    """
    target = np.dtype(target)
    if da.dtype == target:
        return da
    caster = _Caster(target, where, nodata)
    data = da.data
    if hasattr(data, "map_blocks"):
        return da.copy(data=data.map_blocks(caster, dtype=target))
    return da.copy(data=caster(np.asarray(data)))


class _Caster:
    """Picklable checked cast of one block (see :func:`_checked_cast`)."""

    def __init__(self, target: np.dtype, where: str, nodata: bool) -> None:
        self.target = target
        self.where = where
        self.nodata = nodata

    def __call__(self, block: np.ndarray) -> np.ndarray:
        if self.target.kind in "iub" and block.dtype.kind in "fc":
            block = np.around(block.real if block.dtype.kind == "c" else block)
            if np.isnan(block).any():
                hint = ("" if self.nodata else "; they have no nodata value to become "
                        "(set one with .rio.write_nodata(...) or encoding['_FillValue'])")
                raise ValueError(f"{self.where}: NaN values cannot be stored as "
                                 f"{self.target}{hint}; or pass encode_cf=False to store "
                                 f"decoded floats")
        if self.target.kind in "iu" and block.size and block.dtype.kind in "iuf":
            info = np.iinfo(self.target)
            low, high = block.min(), block.max()
            if low < info.min or high > info.max:
                raise ValueError(f"{self.where}: values from {low} to {high} do not fit "
                                 f"{self.target} (range {info.min} to {info.max}); choose "
                                 f"another dtype or scale_factor, or pass encode_cf=False")
        return block.astype(self.target)


def _checked(facts: dict[str, Any], dtype: np.dtype, where: str) -> dict[str, Any]:
    """Drop unknown facts and check that nodata is a sample of the stored type."""
    out = {k: v for k, v in facts.items() if v is not None}
    if "nodata" in out:
        try:
            out["nodata"] = _plain(_fill_value(out["nodata"], dtype, where))
        except RumiFormatError as exc:
            raise ValueError(str(exc)) from None
    for key in ("scale_factor", "add_offset"):
        if key in out:
            out[key] = float(out[key])
    if "scale_factor" not in out and "add_offset" not in out:
        out.pop("decoded_dtype", None)
    return out
