"""Write side of the CF facts: what ``to_rumi`` stores for a variable, and its sidecar's facts.

A variable decoded in memory (float with NaN, its packing in ``encoding``) is
packed back with xarray's own CF encoder; a raw one (CF attributes in
``attrs``, as rioxarray's ``mask_and_scale=False`` gives) is stored as it
is; ``encode_cf=False`` stores decoded values instead. What cannot be stored
(per-band scales or units that differ) is warned about. The facts recorded
are a :class:`~rumi_xarray.conventions.facts.Facts`; the read side is
:mod:`rumi_xarray.conventions.cf`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.conventions.cf import PACKING as _PACKING
from rumi_xarray.conventions.cf import decoded_type
from rumi_xarray.conventions.cf import fill_value as _fill_value
from rumi_xarray.conventions.facts import Facts, declared_type, gdal_decoded_type
from rumi_xarray.errors import RumiFormatError


@dataclass(frozen=True)
class Encoded:
    """What ``to_rumi`` stores for a variable: its samples and the sidecar's facts.

    Attributes
    ----------
    data : xarray.DataArray
        The values to store, as lazy as the input was.
    facts : Facts
        What the sidecar records.
    """

    data: xr.DataArray
    facts: Facts


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

    Scale 1 with offset 0 is no packing and is not recorded. Integers
    decoded with nothing to mask or scale (floats whose ``encoding["dtype"]``
    is an integer type) are stored as that type again. rioxarray's
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
            facts["decoded_dtype"] = declared_type(packed)
        return Encoded(data, _checked(facts, data.dtype, where))

    stored_type = _integer_encoding(encoding) if target is None else None
    if not raw and not packed and da.dtype.kind == "f" and stored_type is not None:
        # Integers decoded with nothing to mask or scale (rioxarray's and our
        # mask_and_scale=True give float32/float64): the floats are exact
        # copies of the samples, stored again as the type they came from.
        # Values that are not whole numbers any more (computed on) are refused,
        # never rounded.
        data = _checked_cast(da, stored_type, where, nodata=False, exact=True)
        return Encoded(data, _checked(facts, data.dtype, where))
    source = raw or packed  # packed facts on integer data: the values are raw
    missing = _missing(source)
    if missing is not None:
        facts["nodata"] = missing
    for key in ("scale_factor", "add_offset"):
        if key in source:
            facts[key] = source[key]
    if "scale_factor" in facts or "add_offset" in facts:
        facts["decoded_dtype"] = declared_type(source)
    data = _cast(da, target, where, facts)
    return Encoded(data, _checked(facts, data.dtype, where))


def _integer_encoding(encoding: Mapping[str, Any]) -> np.dtype | None:
    """Return the integer type ``encoding["dtype"]`` says the values were read from, if any."""
    value = encoding.get("dtype")
    if value is None:
        return None
    try:
        dtype = np.dtype(value)
    except TypeError:
        return None
    return dtype if dtype.kind in "iu" else None


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
                      f"the sidecar holds one units fact for the file, so none applies to "
                      f"band_data: each band's units are kept in the sidecar's attributes "
                      f"(shown with band_as_variable=True)", UserWarning, stacklevel=4)
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
    float_type = decoded_type(Facts(decoded_dtype=declared_type(attrs)), da.dtype, where)
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


def _checked_cast(da: xr.DataArray, target: np.dtype, where: str, *, nodata: bool,
                  exact: bool = False) -> xr.DataArray:
    """Cast to ``target``, rounding floats to integers as xarray does, never wrapping.

    The check runs as the data are computed (lazily for dask input) and
    raises naming the destination when a value does not fit ``target``.
    """
    target = np.dtype(target)
    if da.dtype == target:
        return da
    caster = _Caster(target, where, nodata, exact)
    data = da.data
    if hasattr(data, "map_blocks"):
        return da.copy(data=data.map_blocks(caster, dtype=target))
    return da.copy(data=caster(np.asarray(data)))


class _Caster:
    """Picklable checked cast of one block (see :func:`_checked_cast`)."""

    def __init__(self, target: np.dtype, where: str, nodata: bool, exact: bool = False
                 ) -> None:
        self.target = target
        self.where = where
        self.nodata = nodata
        self.exact = exact

    def __call__(self, block: np.ndarray) -> np.ndarray:
        if self.target.kind in "iub" and block.dtype.kind in "fc":
            rounded = np.around(block.real if block.dtype.kind == "c" else block)
            if self.exact and not np.array_equal(rounded, block, equal_nan=True):
                raise ValueError(f"{self.where}: the values are not whole numbers any more, "
                                 f"so they cannot be stored as {self.target} (the type they "
                                 f"were read from, encoding['dtype']); pass encode_cf=False "
                                 f"to store the floats, or dtype= another type")
            block = rounded
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


def _checked(facts: dict[str, Any], dtype: np.dtype, where: str) -> Facts:
    """Return the facts to record, checking that nodata is a sample of the stored type."""
    nodata = facts.get("nodata")
    if nodata is not None:
        try:
            nodata = _fill_value(nodata, dtype, where)
        except RumiFormatError as exc:
            raise ValueError(str(exc)) from None
    scale, offset = facts.get("scale_factor"), facts.get("add_offset")
    packed = scale is not None or offset is not None
    return Facts(nodata=nodata, scale=scale, offset=offset, units=facts.get("units"),
                 decoded_dtype=facts.get("decoded_dtype") if packed else None)

