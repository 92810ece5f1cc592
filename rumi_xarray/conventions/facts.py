"""CF facts as one type: nodata, scale, offset, units and the decoded type.

The Rumi format has no field for these facts. They travel beside the file in
three spellings, and this module is the one codec for all three, with the
rules for NaN, infinities and nulls in one place:

================  ==============================  ==============================
fact              JSON (sidecar ``.aux.json``)    STAC ``raster:bands``
================  ==============================  ==============================
nodata            ``nodata``                      ``nodata``
scale             ``scale_factor``                ``scale``
offset            ``add_offset``                  ``offset``
units             ``units``                       ``unit``
decoded dtype     ``decoded_dtype``               (none; ``data_type`` is the
                                                  stored type)
================  ==============================  ==============================

Catalog table columns carry the JSON names (:data:`COLUMNS`).

- **JSON** has no NaN or infinity: numbers that are not finite are written
  ``"nan"``, ``"inf"`` and ``"-inf"`` (as GDAL's ``.aux.xml`` spells them),
  and read back from those texts (any case, ``"+inf"`` too) and from the bare
  ``NaN`` older sidecars hold. An unknown fact is left out.
- **Catalog columns** hold numbers as numbers (a NaN nodata is a NaN); an
  unknown fact is a null. A pandas or Parquet float column spells null as
  NaN, so a NaN nodata is read as NaN for floating-point samples and as
  unknown for integer samples (which cannot hold NaN). For floating-point
  samples the two decode alike: ``_FillValue`` NaN masks nothing that is not
  NaN already. A NaN scale, offset, units or decoded type is unknown.
- **STAC** ``raster:bands``: ``nodata`` is ``"nan"``, ``"inf"`` or
  ``"-inf"`` when not finite (the raster extension's spelling), a whole
  number as an integer; ``data_type`` is the stored type. STAC 1.1 ``bands``
  (``nodata``, ``raster:scale``, ``raster:offset``, ``unit``) are read too.
  An unknown fact is left out.

The decoded type: xarray's decoder takes it from the type of ``scale_factor``
and ``add_offset``; it is ``decoded_dtype`` when the writer recorded one (a
netCDF variable whose typed scale was a float64), else GDAL's and
rioxarray's rule (:func:`gdal_decoded_type`).

A new CF fact is added here: a field of :class:`Facts` and its spelling in
each codec.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "COLUMNS",
    "VALUE_COLUMNS",
    "Facts",
    "column_differences",
    "declared_type",
    "fact_problem",
    "gdal_decoded_type",
    "is_null",
    "nodata_sample",
]

#: JSON and column names of the facts about sample values (all but the decoded type, which
#: follows from them): what ``rumi-xarray info`` and ``convert`` print.
VALUE_COLUMNS = ("nodata", "scale_factor", "add_offset", "units")
#: JSON and catalog column names of the facts, in catalog column order.
COLUMNS = (*VALUE_COLUMNS, "decoded_dtype")
#: Field of :class:`Facts` under each JSON / column name.
_FIELDS = {"nodata": "nodata", "scale_factor": "scale", "add_offset": "offset",
           "units": "units", "decoded_dtype": "decoded_dtype"}
#: Facts holding numbers, which may be NaN or infinite.
_NUMBERS = ("nodata", "scale", "offset")
#: Text spellings of the numbers JSON cannot hold.
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf}
#: The raster extension's names of the facts it has.
_RASTER = {"nodata": "nodata", "scale": "scale", "offset": "offset", "units": "unit"}
#: STAC 1.1 ``bands`` entries spell scale and offset with the extension prefix.
_BANDS = {"nodata": "nodata", "scale": "raster:scale", "offset": "raster:offset",
          "units": "unit"}


def _spelled(value: float) -> float | str:
    """Return a number as JSON holds it: NaN and infinities as ``"nan"``, ``"inf"``..."""
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _number(value: Any, *, exact: bool = False) -> int | float:
    """Return a fact's number as Python holds it.

    Texts are read as the codecs spell non-finite numbers (and decimal texts);
    with ``exact``, integers stay integers (a uint64 nodata keeps every bit).

    Raises
    ------
    ValueError
        Not a number.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, str):
        known = _NON_FINITE.get(value.strip().lower())
        return known if known is not None else float(value)
    if isinstance(value, (bool, np.bool_)):
        return int(value) if exact else float(value)
    if exact and isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    raise ValueError(f"{value!r} is not a number")


def fact_problem(key: str, value: Any) -> str | None:
    """Return what is wrong with one fact's value, or None: the one check of every source.

    Open keywords, sidecars, catalog rows and STAC ``raster:bands`` all pass
    their facts through it (keywords directly, the others as :class:`Facts`
    are built), so a value refused as a keyword is refused from a file too.
    Whether a nodata fits the samples depends on their type
    (:func:`nodata_sample`).

    Parameters
    ----------
    key : str
        A JSON / column name (:data:`COLUMNS`).
    value : object
        The value, not None.

    Returns
    -------
    str or None
        ``"must be ..."``, or None when the value can be used.

    Examples
    --------
    >>> fact_problem("scale_factor", 0.0)
    'must be a finite number other than 0'
    >>> fact_problem("add_offset", -0.1) is None
    True
    """
    if key in ("nodata", "scale_factor", "add_offset"):
        try:
            number = float(_number(value))
        except (ValueError, TypeError, OverflowError):
            return "must be a number"
        if key == "scale_factor" and (number == 0 or not math.isfinite(number)):
            return "must be a finite number other than 0"
        if key == "add_offset" and not math.isfinite(number):
            return "must be a finite number"
        return None
    if key == "units":
        return None if isinstance(value, str) else "must be a string"
    if key == "decoded_dtype":
        return (None if value in ("float32", "float64")
                else "must be 'float32' or 'float64'")
    return None


def _comparable(value: Any) -> Any:
    """Return a fact's value as facts compare: NaN equal to NaN."""
    return "nan" if isinstance(value, float) and math.isnan(value) else value


def column_differences(mine: Mapping[str, Any], theirs: Mapping[str, Any],
                       keys: Sequence[str] = COLUMNS) -> list[str]:
    """Return ``"<column> <mine> != <theirs>"`` for every column whose values differ.

    Values compare as facts do (:class:`Facts` equality): NaN is the same as NaN.

    Parameters
    ----------
    mine, theirs : mapping
        Column name -> value (:meth:`Facts.to_columns`, and any other columns).
    keys : sequence of str, default :data:`COLUMNS`
        The columns compared, in this order.

    Returns
    -------
    list of str
    """
    return [f"{k} {mine[k]!r} != {theirs[k]!r}" for k in keys
            if _comparable(mine[k]) != _comparable(theirs[k])]


def is_null(value: Any) -> bool:
    """Return whether a table cell is a null: None, pandas NA, or a float NaN.

    Parameters
    ----------
    value : object

    Returns
    -------
    bool
    """
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


@dataclass(frozen=True, eq=False)
class Facts:
    """The CF facts of one Rumi file (one set for all its bands).

    Values are plain Python ones (numpy scalars are converted). Two Facts are
    equal when every fact is, NaN equal to NaN.

    Attributes
    ----------
    nodata : int, float or None
        The stored sample marking missing data (``_FillValue``); integers stay
        exact.
    scale, offset : float or None
        CF ``scale_factor`` and ``add_offset``.
    units : str or None
    decoded_dtype : str or None
        ``"float32"`` or ``"float64"``: the type packed samples decode to, when
        the writer knew it (otherwise :func:`gdal_decoded_type`).
    """

    nodata: int | float | None = None
    scale: float | None = None
    offset: float | None = None
    units: str | None = None
    decoded_dtype: str | None = None

    def __post_init__(self) -> None:
        # Every source of facts (keywords, sidecars, catalog rows, STAC) builds a Facts: the
        # one validation (fact_problem) runs here, so no source can pass what another refuses.
        for key, name in _FIELDS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if name in ("units", "decoded_dtype"):
                value = str(value)
            problem = fact_problem(key, value)
            if problem is not None:
                raise ValueError(f"{key} {value!r} {problem}")
            if name in _NUMBERS:
                value = _number(value, exact=name == "nodata")
            object.__setattr__(self, name, value)

    # --- comparison -------------------------------------------------------------

    def _key(self) -> tuple[Any, ...]:
        return tuple(_comparable(getattr(self, f.name)) for f in fields(self))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Facts):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __bool__(self) -> bool:
        """Return whether any fact is known."""
        return any(getattr(self, f.name) is not None for f in fields(self))

    @property
    def packed(self) -> bool:
        """Return whether samples are packed (a scale or an offset is known)."""
        return self.scale is not None or self.offset is not None

    # --- JSON (the sidecar) -----------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Return the facts as strict JSON holds them, unknown facts left out.

        Returns
        -------
        dict
            Keys among :data:`COLUMNS`; non-finite numbers as ``"nan"``,
            ``"inf"``, ``"-inf"``.
        """
        out: dict[str, Any] = {}
        for key, name in _FIELDS.items():
            value = getattr(self, name)
            if value is None:
                continue
            out[key] = _spelled(value) if isinstance(value, float) else value
        return out

    @classmethod
    def from_json(cls, content: Mapping[str, Any]) -> Facts:
        """Return the facts a JSON object holds (other keys are ignored).

        Parameters
        ----------
        content : mapping
            Keys among :data:`COLUMNS`; null values are unknown facts.

        Returns
        -------
        Facts

        Raises
        ------
        ValueError
            A number that is neither a number nor one of the texts above.
        """
        given = {_FIELDS[k]: content[k] for k in COLUMNS if content.get(k) is not None}
        for name in _NUMBERS:
            if name in given:
                try:
                    given[name] = _number(given[name], exact=name == "nodata")
                except ValueError:
                    key = next(k for k, v in _FIELDS.items() if v == name)
                    raise ValueError(f"{key} {given[name]!r} is not a number") from None
        return cls(**given)

    # --- catalog table columns ---------------------------------------------------

    def to_columns(self) -> dict[str, Any]:
        """Return a catalog row's fact columns: numbers as numbers, None where unknown.

        Returns
        -------
        dict
            One entry per name in :data:`COLUMNS`.
        """
        return {key: getattr(self, name) for key, name in _FIELDS.items()}

    @classmethod
    def from_columns(cls, row: Mapping[Any, Any] | pd.Series, dtype: Any) -> Facts:
        """Return the facts of a catalog row (a mapping of column names to values).

        Parameters
        ----------
        row : mapping
            A row of a catalog table (dict, pandas Series, Arrow row); missing
            columns are unknown facts.
        dtype : numpy dtype-like
            The row's stored sample type: a NaN nodata is NaN for
            floating-point samples and unknown (a null in a float column)
            otherwise.

        Returns
        -------
        Facts
        """
        given: dict[str, Any] = {}
        for key, name in _FIELDS.items():
            value = row.get(key)
            if isinstance(value, np.generic):
                # A column's numpy type says nothing about the file (decoded_dtype does).
                value = value.item()
            if key == "nodata" and isinstance(value, float) and math.isnan(value):
                if np.dtype(dtype).kind in "fc":
                    given[name] = value
                continue
            if not is_null(value):
                given[name] = value
        return cls(**given)

    # --- STAC raster:bands ---------------------------------------------------------

    def to_raster_band(self, dtype: Any) -> dict[str, Any]:
        """Return one band of the raster extension's ``raster:bands``.

        Parameters
        ----------
        dtype : numpy dtype-like
            The stored sample type (``data_type``).

        Returns
        -------
        dict
            ``data_type``, and ``nodata``, ``scale``, ``offset``, ``unit``
            where known: a non-finite nodata as ``"nan"``, ``"inf"``,
            ``"-inf"``, a whole one as an integer.
        """
        out: dict[str, Any] = {"data_type": np.dtype(dtype).name}
        if self.nodata is not None:
            number = self.nodata
            out["nodata"] = (number if not isinstance(number, float)
                             else int(number) if number.is_integer() else _spelled(number))
        for name in ("scale", "offset", "units"):
            value = getattr(self, name)
            if value is not None:
                out[_RASTER[name]] = value
        return out

    @classmethod
    def from_raster_bands(cls, bands: Sequence[Any], dtype: Any, *,
                          spelling: str = "raster:bands") -> Facts:
        """Return the facts the bands of a STAC asset agree on.

        Parameters
        ----------
        bands : sequence of mapping
            ``raster:bands`` entries (``spelling="raster:bands"``) or STAC 1.1
            ``bands`` entries (``spelling="bands"``); other entries are skipped.
        dtype : numpy dtype-like
            The stored sample type.
        spelling : {"raster:bands", "bands"}

        Returns
        -------
        Facts
            Empty when no band says anything.

        Raises
        ------
        ValueError
            Bands that disagree (a Rumi file has one set of facts), a value
            that is not a number, or a nodata that is not whole for integer
            samples.
        """
        names = _RASTER if spelling == "raster:bands" else _BANDS
        entries = [cls._from_band(b, names) for b in bands if isinstance(b, Mapping)]
        if not entries:
            return cls()
        first = entries[0]
        for i, other in enumerate(entries[1:], start=1):
            if other != first:
                raise ValueError(
                    f"band {i} has nodata/scale/offset/units {other._described()}, band 0 "
                    f"{first._described()}; a Rumi file has one set for all its bands")
        if first.nodata is not None and np.dtype(dtype).kind not in "fc" \
                and not float(first.nodata).is_integer():
            raise ValueError(f"nodata {first.nodata!r} cannot be a {np.dtype(dtype)} sample")
        return first

    @classmethod
    def _from_band(cls, band: Mapping[str, Any], names: Mapping[str, str]) -> Facts:
        given = {name: band.get(key) for name, key in names.items()
                 if band.get(key) is not None}
        for name in _NUMBERS:
            if name in given:
                try:
                    given[name] = _number(given[name], exact=name == "nodata")
                except ValueError:
                    raise ValueError(f"{names[name]} {given[name]!r} is not a number") from None
        return cls(**given)

    def _described(self) -> dict[str, Any]:
        """Return the known facts by JSON name (for messages)."""
        return {k: v for k, v in self.to_columns().items() if v is not None}

    # --- the decoded type ------------------------------------------------------------

    def decoded_type(self, dtype: Any) -> np.dtype:
        """Return the floating-point type packed samples of ``dtype`` decode to.

        Parameters
        ----------
        dtype : numpy dtype-like, optional
            The stored sample type.

        Returns
        -------
        numpy.dtype
            ``decoded_dtype`` when known, else :func:`gdal_decoded_type`.

        Raises
        ------
        ValueError
            ``decoded_dtype`` is not float32 or float64 (callers name the
            file and whose fault that is).
        """
        named = self.decoded_dtype
        if named is None:
            return gdal_decoded_type(dtype)
        try:
            chosen = np.dtype(named)
        except TypeError:
            raise ValueError(f"decoded_dtype {named!r} is not a dtype") from None
        if chosen not in (np.dtype("float32"), np.dtype("float64")):
            raise ValueError(f"decoded_dtype must be float32 or float64, got {named!r}")
        return chosen


def gdal_decoded_type(dtype: Any) -> np.dtype:
    """Return the type GDAL/rioxarray decode samples of ``dtype`` to.

    Parameters
    ----------
    dtype : numpy dtype-like, optional

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


def declared_type(attributes: Mapping[str, Any]) -> str | None:
    """Return the decoded type typed CF ``scale_factor``/``add_offset`` declare, if any.

    netCDF attributes carry their type (a float64 scale decodes to float64, as
    CF says); untyped ones (GDAL's, JSON-based Zarr's) declare nothing.

    Parameters
    ----------
    attributes : mapping
        CF attributes.

    Returns
    -------
    str or None
        ``"float32"``, ``"float64"`` or None.
    """
    for key in ("scale_factor", "add_offset"):
        value = attributes.get(key)
        if isinstance(value, np.floating) and value.dtype in (np.float32, np.float64):
            return str(value.dtype)
    return None


def nodata_sample(value: Any, dtype: Any) -> Any:
    """Return a nodata value as a sample of ``dtype`` (a Python number without one).

    Parameters
    ----------
    value : number
    dtype : numpy dtype-like or None

    Returns
    -------
    numpy scalar, int or float

    Raises
    ------
    ValueError
        Integer samples and a nodata that is NaN, not whole, or out of their
        range (the message starts with ``nodata``; callers name the file and
        the error type).
    """
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    exact = isinstance(value, (int, np.integer))
    number = float(value)
    if dtype is None:
        return int(value) if exact else number
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        if not exact and (math.isnan(number) or not number.is_integer()):
            raise ValueError(f"nodata {value!r} cannot be a {dtype} sample")
        whole = int(value) if exact else int(number)
        info = np.iinfo(dtype)
        if not info.min <= whole <= info.max:
            raise ValueError(f"nodata {value!r} is outside the range of {dtype}")
        return dtype.type(whole)
    if dtype.kind == "b":
        return np.bool_(bool(number))
    return dtype.type(number)
