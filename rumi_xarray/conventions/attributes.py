"""The attributes a source carried that no fact holds: tags, descriptions, globals.

A GeoTIFF's GDAL metadata (``AREA_OR_POINT``, ``TIFFTAG_*``, the
``STATISTICS_*`` of its ``.aux.xml``, any tag a producer wrote), its per-band
tags and a netCDF file's global and variable attributes are what
``rioxarray.open_rasterio`` and ``xr.open_dataset`` show in ``attrs``. The
Rumi format has no field for them: ``to_rumi``/``convert``/``ingest`` keep
them in the sidecar under one key, :data:`KEY`::

    "attributes": {"dataset": {...}, "variable": {...}, "bands": [{...}, ...]}

- ``dataset``: the attributes of the file (a netCDF file's globals, a
  Dataset's ``attrs``), shown as the Dataset's ``attrs``;
- ``variable``: those of the raster variable (a GeoTIFF's dataset-level
  tags, as rioxarray gives them in the DataArray's ``attrs``; a netCDF
  variable's ``long_name``, ``standard_name``...), shown on ``band_data``
  (on every variable with ``band_as_variable=True``);
- ``bands``: one mapping per band (GDAL band tags: ``STATISTICS_*``,
  ``WAVELENGTH``...; units that differ between bands), shown on each band's
  variable with ``band_as_variable=True``; on ``band_data``, those every band
  shares (xarray's ``combine_attrs="drop_conflicts"`` over the bands).

Values are strict JSON: texts, numbers, booleans and flat lists of them.
What JSON cannot hold exactly (NaN, an object, a nested list) is stored as
its text with a warning naming it; a null value is refused with a warning.
Nothing is dropped without a word.

What other fields hold is never an attribute here (:data:`RESERVED`): nodata,
scale, offset and units are facts (:mod:`rumi_xarray.conventions.facts`),
georeferencing and ``AREA_OR_POINT`` come from the file. One exception:
GDAL's scale 1 and offset 0, which rioxarray shows (``scale_factor``
``1.0``, ``add_offset`` ``0.0``) and which are no packing at all: they are
kept in ``variable`` and shown where rioxarray shows them (:func:`apply`),
never applied, so attributes never change a decoded value.

Many scenes (catalogs, STAC) carry what every scene agrees on
(:meth:`Attributes.combine`: xarray's ``combine_attrs="drop_conflicts"``).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.conventions.bands import VARIABLE_DESCRIPTIONS

#: The sidecar key (and catalog column) holding the attributes.
KEY = "attributes"
#: The parts of :data:`KEY`, in order.
PARTS = ("dataset", "variable", "bands")
#: ``encoding`` key of a variable: its bands' attributes by band text, so that
#: ``to_rumi`` of a Dataset opened from a Rumi file (or a GeoTIFF, by ``convert``)
#: writes them again. Keyed by text, so a band selection keeps the right ones.
BANDS_ENCODING = "rumi_band_attributes"
#: ``encoding`` key naming the packing attributes shown but never applied (GDAL's
#: scale 1 and offset 0): readers of ``attrs``/``encoding`` that decode skip them
#: (:func:`rumi_xarray.conventions.decoding.applied_packing`).
SHOWN_PACKING = "rumi_shown_packing"
#: GDAL's scale and offset that are no packing: kept, shown, never applied.
IDENTITY = {"scale_factor": 1.0, "add_offset": 0.0}
#: Attributes other fields hold, never recorded here: CF facts and their spellings
#: (rioxarray's, odc-stac's), georeferencing, what xarray's decoders and encoders
#: own, and ``Conventions`` (a Rumi Dataset follows CF-1.11, whatever its source did).
RESERVED = frozenset({
    "_FillValue", "missing_value", "fill_value", "nodata", "nodatavals", "scale_factor",
    "add_offset", "scales", "offsets", "_Unsigned", "units", "dtype", "AREA_OR_POINT",
    "grid_mapping", "coordinates", "bounds", "crs", "crs_wkt", "spatial_ref", "GeoTransform",
    "transform", "_ARRAY_DIMENSIONS", "Conventions", "calendar", "preferred_chunks",
    "chunks", "source", "is_tiled", "res",
})


# --- values: strict JSON ---------------------------------------------------------------


def _number(value: float) -> float | str:
    """Return a finite float, or the text of a non-finite one."""
    return value if math.isfinite(value) else ("nan" if math.isnan(value)
                                               else "inf" if value > 0 else "-inf")


def json_value(value: Any) -> tuple[Any, str | None]:
    """Return an attribute's value as strict JSON holds it, and why it changed, if it did.

    Parameters
    ----------
    value : object

    Returns
    -------
    tuple
        ``(value, None)`` for a text, number, boolean or flat list of them;
        ``(text, reason)`` for what JSON cannot hold exactly, stored as text;
        ``(None, reason)`` for a null, which is refused.

    Examples
    --------
    >>> json_value(np.float32(0.5))
    (0.5, None)
    >>> json_value(np.array([1, 2]))
    ([1, 2], None)
    >>> json_value(float("nan"))
    ('nan', 'not a finite number')
    """
    if value is None:
        return None, "no value"
    if isinstance(value, (bool, np.bool_)):
        return bool(value), None
    if isinstance(value, (int, np.integer)):
        return int(value), None
    if isinstance(value, (float, np.floating)):
        number = _number(float(value))
        return number, None if isinstance(number, float) else "not a finite number"
    if isinstance(value, str):
        return value, None
    if isinstance(value, (bytes, np.bytes_)):
        try:
            return bytes(value).decode("utf-8"), None
        except UnicodeDecodeError:
            return bytes(value).hex(), "bytes that are not UTF-8 text (stored as hex)"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return json_value(value.item())
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(np.asarray(value, dtype=object).ravel()) if isinstance(
            value, np.ndarray) else list(value)
        if isinstance(value, np.ndarray) and value.ndim > 1:
            return str(value.tolist()), "an array of more than one dimension"
        out, reasons = [], set()
        for item in items:
            if isinstance(item, (list, tuple, np.ndarray, Mapping)) or item is None:
                return str(_plain(value)), "a list holding lists, mappings or nulls"
            converted, reason = json_value(item)
            out.append(converted)
            if reason:
                reasons.add(reason)
        return out, "; ".join(sorted(reasons)) or None
    return str(value), f"a {type(value).__name__}"


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def json_mapping(attrs: Mapping[Any, Any], where: str, part: str,
                 reserved: Iterable[str] = RESERVED) -> dict[str, Any]:
    """Return attributes as strict JSON, leaving out reserved names; warn about what changed.

    Parameters
    ----------
    attrs : mapping
    where : str
        The destination, named in warnings.
    part : str
        Which attributes (``"dataset"``, ``"variable"``, ``"band 2"``), named in warnings.
    reserved : iterable of str
        Names held elsewhere, left out.

    Returns
    -------
    dict
    """
    skip = set(reserved)
    out: dict[str, Any] = {}
    changed, refused = [], []
    for key, value in attrs.items():
        name = str(key)
        if name in skip:
            continue
        converted, reason = json_value(value)
        if converted is None:
            refused.append(f"{name} ({reason})")
            continue
        if reason is not None:
            changed.append(f"{name} ({reason})")
        out[name] = converted
    if changed:
        warnings.warn(f"{where}: {part} attribute(s) {', '.join(changed)} cannot be stored "
                      f"exactly in the JSON sidecar: stored as text", UserWarning,
                      stacklevel=4)
    if refused:
        warnings.warn(f"{where}: {part} attribute(s) {', '.join(refused)} not stored "
                      f"(JSON has no null attribute value in xarray)", UserWarning,
                      stacklevel=4)
    return out


def xarray_value(value: Any) -> Any:
    """Return a stored value as xarray and rioxarray show it: number lists as arrays.

    Parameters
    ----------
    value : JSON value

    Returns
    -------
    object
        A numpy array for a list of numbers (as rioxarray parses GDAL's
        ``{1,2}`` tags and netCDF reads array attributes), else the value.

    Examples
    --------
    >>> xarray_value([1, 2.5])
    array([1. , 2.5])
    >>> xarray_value(["a", "b"])
    ['a', 'b']
    """
    if isinstance(value, list):
        if value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                         for v in value):
            return np.asarray(value)
        return list(value)
    return value


def same_value(a: Any, b: Any) -> bool:
    """Return whether two attribute values are equal as xarray's ``drop_conflicts`` compares.

    Parameters
    ----------
    a, b : object

    Returns
    -------
    bool
    """
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        try:
            return bool(np.array_equal(np.asarray(a, dtype=object),
                                       np.asarray(b, dtype=object)))
        except (TypeError, ValueError):
            return False
    if type(a) is not type(b) and {type(a), type(b)} - {int, float}:
        return False  # 1 and True, or "1" and 1, are different attributes
    return bool(a == b)


def drop_conflicts(mappings: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Combine attributes as xarray's ``combine_attrs="drop_conflicts"`` does.

    Every name is kept with its value, except names given different values,
    which are dropped; a name only some mappings have is kept.

    Parameters
    ----------
    mappings : iterable of mapping

    Returns
    -------
    dict

    Examples
    --------
    >>> drop_conflicts([{"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}])
    {'a': 1, 'c': 4}
    """
    out: dict[str, Any] = {}
    dropped: set[str] = set()
    for mapping in mappings:
        for key, value in mapping.items():
            if key in dropped:
                continue
            if key in out and not same_value(out[key], value):
                del out[key]
                dropped.add(key)
            elif key not in out:
                out[key] = value
    return out


# --- what a sidecar holds --------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Attributes:
    """The attributes of one Rumi file (or the agreed ones of many), as JSON values.

    Attributes
    ----------
    dataset : dict
        Shown as the Dataset's ``attrs``.
    variable : dict
        Shown on ``band_data`` (every variable with ``band_as_variable=True``);
        may hold GDAL's scale 1 and offset 0 (:data:`IDENTITY`).
    bands : tuple of dict
        One per band (or none at all).
    """

    dataset: Mapping[str, Any] = field(default_factory=dict)
    variable: Mapping[str, Any] = field(default_factory=dict)
    bands: tuple[Mapping[str, Any], ...] = ()

    def __bool__(self) -> bool:
        """Return whether there is anything to record."""
        return bool(self.dataset) or bool(self.variable) or any(self.bands)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attributes):
            return NotImplemented
        return self.text() == other.text()

    def __hash__(self) -> int:
        return hash(self.text())

    # --- JSON -------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Return the sidecar's :data:`KEY` object (empty parts left out).

        Returns
        -------
        dict
        """
        out: dict[str, Any] = {}
        if self.dataset:
            out["dataset"] = dict(self.dataset)
        if self.variable:
            out["variable"] = dict(self.variable)
        if any(self.bands):
            out["bands"] = [dict(b) for b in self.bands]
        return out

    def text(self) -> str:
        """Return :meth:`to_json` as compact JSON text (a catalog cell), ``""`` when empty.

        Returns
        -------
        str
        """
        if not self:
            return ""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"),
                          allow_nan=False, ensure_ascii=False)

    @classmethod
    def from_json(cls, content: Any) -> Attributes:
        """Return the attributes a sidecar's :data:`KEY` object (or a catalog cell) holds.

        Parameters
        ----------
        content : mapping, JSON text or None
            None or ``""``: no attributes.

        Returns
        -------
        described : Attributes
            What is recorded.

        Raises
        ------
        ValueError
            Not the shape :data:`KEY` has: unknown parts, values that are not
            strict JSON texts, numbers, booleans or flat lists of them, or a
            reserved name (a fact) among the attributes.

        Examples
        --------
        >>> Attributes.from_json({"variable": {"STATISTICS_MEAN": 3.5}}).variable
        {'STATISTICS_MEAN': 3.5}
        """
        if content is None or (isinstance(content, str) and not content):
            return cls()
        if isinstance(content, str):
            try:
                content = json.loads(content)
            except ValueError as exc:
                raise ValueError(f"{KEY} is not JSON text: {exc}") from None
        if not isinstance(content, Mapping):
            raise ValueError(f"{KEY} must be an object, got {type(content).__name__}")
        unknown = sorted(set(map(str, content)) - set(PARTS))
        if unknown:
            raise ValueError(f"{KEY} holds {unknown}; it has only {list(PARTS)}")
        bands = content.get("bands", [])
        if not isinstance(bands, list):
            raise ValueError(f"{KEY}.bands must be a list of objects")
        return cls(_checked(content.get("dataset", {}), "dataset"),
                   _checked(content.get("variable", {}), "variable", identity=True),
                   tuple(_checked(b, f"bands[{i}]", units=True) for i, b in enumerate(bands)))

    # --- many scenes --------------------------------------------------------------------

    @classmethod
    def combine(cls, many: Iterable[Attributes]) -> Attributes:
        """Return what many scenes' attributes agree on (``combine_attrs="drop_conflicts"``).

        Each part is combined as xarray combines ``attrs``: a name given
        different values by two scenes is dropped; a name some scenes lack is
        kept. Bands are combined band by band.

        Parameters
        ----------
        many : iterable of Attributes

        Returns
        -------
        described : Attributes
            What is recorded.

        Examples
        --------
        >>> a = Attributes(variable={"ID": "a", "KIND": "L2A"})
        >>> b = Attributes(variable={"ID": "b", "KIND": "L2A"})
        >>> Attributes.combine([a, b]).variable
        {'KIND': 'L2A'}
        """
        items = list(many)
        if len(items) == 1:
            return items[0]
        count = max((len(a.bands) for a in items), default=0)
        bands = tuple(drop_conflicts(a.bands[i] for a in items if i < len(a.bands))
                      for i in range(count))
        return cls(drop_conflicts(a.dataset for a in items),
                   drop_conflicts(a.variable for a in items),
                   bands if any(bands) else ())

    # --- what a variable shows ----------------------------------------------------------

    def shown(self, band: int | None, alone: bool = True) -> dict[str, Any]:
        """Return the attributes a variable shows (scale 1 and offset 0 left out).

        Parameters
        ----------
        band : int or None
            None for ``band_data``: the variable's attributes over those
            every band shares; a position for that band's own variable:
            the variable's attributes and the band's (the band's win).
        alone : bool, default True
            Whether the band is the only one: the variable's ``long_name``
            describes several bands as one, and each band's variable has its
            own text instead.

        Returns
        -------
        dict
            Values as xarray shows them (:func:`xarray_value`).

        Examples
        --------
        >>> a = Attributes(variable={"long_name": "reflectance"},
        ...                bands=({"MEAN": 1}, {"MEAN": 2}))
        >>> a.shown(None), a.shown(1, alone=False)
        ({'long_name': 'reflectance'}, {'MEAN': 2})
        """
        variable = {k: v for k, v in self.variable.items() if k not in IDENTITY}
        if band is None:
            common = drop_conflicts(self.bands)
            common.pop("units", None)  # recorded per band only when bands differ
            merged = {**common, **variable}
        else:
            if not alone:
                variable.pop("long_name", None)
            own = self.bands[band] if band < len(self.bands) else {}
            merged = {**variable, **own}
        return {k: xarray_value(v) for k, v in merged.items()}

    def packing(self) -> dict[str, float]:
        """Return GDAL's scale 1 and offset 0 as recorded (shown, never applied).

        Returns
        -------
        dict
        """
        return {k: float(v) for k, v in self.variable.items() if k in IDENTITY}

    def band_map(self, texts: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Return the bands' attributes by band text (:data:`BANDS_ENCODING`).

        Parameters
        ----------
        texts : sequence of str
            The stored band texts, in band order.

        Returns
        -------
        dict
        """
        return {str(t): dict(b) for t, b in zip(texts, self.bands, strict=False) if b}


def _checked(part: Any, name: str, *, identity: bool = False,
             units: bool = False) -> dict[str, Any]:
    """Return one part of :data:`KEY` after checking it is strict JSON attributes."""
    if not isinstance(part, Mapping):
        raise ValueError(f"{KEY}.{name} must be an object, got {type(part).__name__}")
    out: dict[str, Any] = {}
    for key, value in part.items():
        if not isinstance(key, str):
            raise ValueError(f"{KEY}.{name}: attribute name {key!r} is not text")
        if key in IDENTITY and identity:
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or float(value) != IDENTITY[key]:
                raise ValueError(f"{KEY}.{name}.{key} may only be GDAL's {IDENTITY[key]} "
                                 f"(other values are facts), got {value!r}")
        elif key == "units" and units:
            if not isinstance(value, str):
                raise ValueError(f"{KEY}.{name}.units must be text, got {value!r}")
        elif key in RESERVED:
            raise ValueError(f"{KEY}.{name}: {key!r} is not an attribute here (it is a fact "
                             f"or georeferencing, held by its own field)")
        converted, reason = json_value(value)
        if reason is not None or converted != value or isinstance(value, tuple):
            raise ValueError(f"{KEY}.{name}.{key}: {value!r} is not a JSON text, number, "
                             f"boolean or flat list of them")
        out[key] = value
    return out


# --- write side: what an xarray object carries -----------------------------------------


def collect(da: xr.DataArray, ds: xr.Dataset | None, texts: Sequence[str], where: str, *,
            packed: bool, units_known: bool) -> Attributes:
    """Return the attributes ``to_rumi`` records for the variable ``da`` of ``ds``.

    Parameters
    ----------
    da : xarray.DataArray
        The raster variable as selected (its ``attrs`` and ``encoding``).
    ds : xarray.Dataset or None
        The Dataset it came from: its ``attrs`` are the file's.
    texts : sequence of str
        The band texts written: each band's attributes are looked up by
        text in ``da.encoding[BANDS_ENCODING]``.
    where : str
        The destination, named in warnings.
    packed : bool
        Whether the facts hold a scale or an offset (else GDAL's scale 1 and
        offset 0, if the source showed them, are recorded).
    units_known : bool
        Whether the facts hold the units (else per-band units that differ
        are recorded per band).

    Returns
    -------
    described : Attributes
        What is recorded.
    """
    dataset = json_mapping(ds.attrs, where, "dataset") if ds is not None else {}
    variable = json_mapping({k: v for k, v in da.attrs.items() if not _band_texts(k, v)},
                            where, "variable")
    if not packed:
        for key, value in IDENTITY.items():
            for source in (da.attrs, da.encoding):
                given = source.get(key)
                if isinstance(given, (int, float, np.number)) and not isinstance(
                        given, (bool, np.bool_)) and float(given) == value:
                    variable[key] = value
    stored = band_attributes(da)
    # Units that differ between bands are theirs when the facts hold none.
    reserved = RESERVED - {"units"} if not units_known else RESERVED
    bands = [json_mapping(stored.get(t, {}), where, f"band {t!r}", reserved) for t in texts]
    if not units_known:
        per_band = _per_band_units(da.attrs.get("units", da.encoding.get("units")), len(texts))
        for band, text in zip(bands, per_band, strict=True):
            if text:
                band["units"] = text
    for band, text in zip(bands, texts, strict=True):
        if band.get("long_name") == text:
            del band["long_name"]  # the band's text, which labels it
    if bands and all(bands):
        # What band_data showed of tags every band holds alike is theirs (a Rumi Dataset
        # written again records what it was opened from, not a copy on the variable).
        for key in [k for k, v in variable.items()
                    if all(k in b and same_value(b[k], v) for b in bands)]:
            del variable[key]
    return Attributes(dataset, variable, tuple(bands) if any(bands) else ())


def _band_texts(key: Hashable, value: Any) -> bool:
    """Return whether ``long_name`` holds band texts or our own variable description.

    rioxarray gives a tuple of GDAL descriptions for several bands: they are
    the band texts Rumi stores. ``"band data"`` is what a Rumi Dataset calls
    its variable.
    """
    if key != "long_name":
        return False
    return not isinstance(value, str) or value.strip() in VARIABLE_DESCRIPTIONS


def _per_band_units(value: Any, count: int) -> list[str]:
    """Return per-band units that differ (rioxarray's tuple), else none."""
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != count:
        return [""] * count
    texts = ["" if v is None else str(v) for v in np.asarray(value, dtype=object).ravel()]
    return texts if len({t for t in texts if t}) > 1 else [""] * count


def band_attributes(da: xr.DataArray | xr.Variable) -> dict[str, dict[str, Any]]:
    """Return a variable's bands' attributes by band text (:data:`BANDS_ENCODING`).

    Parameters
    ----------
    da : xarray.DataArray or xarray.Variable

    Returns
    -------
    dict
    """
    stored = da.encoding.get(BANDS_ENCODING)
    return {str(k): dict(v) for k, v in stored.items()} if isinstance(stored, Mapping) else {}


def relabelled(mapping: Mapping[str, Mapping[str, Any]], old: Sequence[Any],
               new: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Return band attributes keyed by new band labels (position by position).

    Parameters
    ----------
    mapping : mapping
        By old label.
    old, new : sequence
        The labels before and after, in band order.

    Returns
    -------
    dict
    """
    return {str(n): dict(mapping[str(o)]) for o, n in zip(old, new, strict=True)
            if str(o) in mapping}


def combined_bands(mappings: Iterable[Mapping[str, Mapping[str, Any]]]
                   ) -> dict[str, dict[str, Any]]:
    """Return band attributes of arrays combined: band by band, ``drop_conflicts``.

    Parameters
    ----------
    mappings : iterable of mapping
        Each array's :func:`band_attributes`.

    Returns
    -------
    dict
    """
    by_band: dict[str, list[Mapping[str, Any]]] = {}
    for mapping in mappings:
        for text, attrs in mapping.items():
            by_band.setdefault(text, []).append(attrs)
    return {text: drop_conflicts(many) for text, many in by_band.items()}


# --- read side: where a Dataset shows them -----------------------------------------------


def apply(ds: xr.Dataset, attributes: Attributes, variables: Mapping[Hashable, int | None],
          mask_and_scale: bool | None, texts: Sequence[str] = ()) -> xr.Dataset:
    """Show a file's attributes on a Dataset, the same way on every door (in place).

    - ``ds.attrs`` gets ``dataset``;
    - each variable its attributes (:meth:`Attributes.shown`), over the ones
      the Dataset builder gave it (a recorded ``long_name`` wins);
    - GDAL's scale 1 and offset 0 go where rioxarray puts them: ``attrs``
      with ``mask_and_scale=False``, ``encoding`` with ``True``, and unset
      (xarray's decoding) ``encoding`` of variables decoded to floats;
      integers left undecoded show none (an identity ``scale_factor`` would
      make the next ``decode_cf`` turn them into floats). They are never
      applied: :data:`SHOWN_PACKING` names them;
    - ``band_data`` keeps every band's own attributes in
      ``encoding[BANDS_ENCODING]`` (by band text), for ``to_rumi``.

    Parameters
    ----------
    ds : xarray.Dataset
        Decoded as the policy says (:mod:`rumi_xarray.conventions.decoding`).
    attributes : Attributes
    variables : mapping
        Variable name -> its band position (``band_as_variable=True``) or None
        (``band_data``). Names not in ``ds`` are skipped (dropped variables).
    mask_and_scale : bool or None
    texts : sequence of str
        The stored band texts (for :data:`BANDS_ENCODING`).

    Returns
    -------
    xarray.Dataset
        ``ds``.
    """
    if not attributes:
        return ds
    ds.attrs.update({k: xarray_value(v) for k, v in attributes.dataset.items()})
    identity = attributes.packing()
    for name, band in variables.items():
        if name not in ds.variables:
            continue
        var = ds.variables[name]
        var.attrs.update(attributes.shown(band, alone=len(variables) == 1))
        if band is None and texts:
            mapping = attributes.band_map(texts)
            if mapping:
                var.encoding[BANDS_ENCODING] = mapping
        if not identity:
            continue
        if mask_and_scale is False:
            target = var.attrs
        elif mask_and_scale is True or var.dtype.kind in "fc":
            target = var.encoding
        else:
            continue
        shown = [k for k in identity if k not in var.attrs and k not in var.encoding]
        for key in shown:
            target[key] = identity[key]
        if shown:
            var.encoding[SHOWN_PACKING] = tuple(shown)
    return ds

