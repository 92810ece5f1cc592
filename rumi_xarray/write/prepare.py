"""What an xarray object says Rumi should store: bands, time, georeferencing.

:func:`prepare` finds the raster variable, orders its dimensions as
``(time, band, y, x)``, derives band names, time steps (instants or
intervals), the affine transform, the EPSG code and PixelIsArea/PixelIsPoint
from xarray, CF and rioxarray conventions, and checks everything Rumi cannot
store *before* a frame is compressed.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.conventions import attributes as attribute_conv
from rumi_xarray.conventions import bands as band_conv
from rumi_xarray.conventions import georef
from rumi_xarray.conventions import time as time_conv
from rumi_xarray.conventions.sidecar import Sidecar
from rumi_xarray.errors import RumiWriteTypeError, input_error
from rumi_xarray.native.frames import check_dtype
from rumi_xarray.write import packing
from rumi_xarray.write.masks import apply_masks

_Y_NAMES = ("y", "lat", "latitude")
_X_NAMES = ("x", "lon", "longitude")


@dataclass(frozen=True)
class Prepared:
    """An xarray object reduced to what Rumi stores.

    Attributes
    ----------
    data : xarray.DataArray
        Dimensions ``(time, band, y, x)``; its data is lazy (dask) when the
        input was.
    bands : list of str
    time : list
        ``numpy.datetime64[s]`` instants, or ``(start, end)`` pairs of them.
    transform : tuple of float or None
        Rumi transform (rasterio order; the first pixel's centre is the origin
        for PixelIsPoint).
    crs : int or None
        EPSG code.
    pixel_is_point : bool
    sidecar : Sidecar
        Nodata, scale, offset, units and decoded type
        (:func:`rumi_xarray.write.packing.encode`), the georeferencing
        the format cannot hold and the source's attributes
        (:func:`rumi_xarray.conventions.attributes.collect`), for the sidecar.
    """

    data: xr.DataArray
    bands: list[str]
    time: list[Any]
    transform: tuple[float, ...] | None
    crs: int | None
    pixel_is_point: bool
    sidecar: Sidecar


def prepare(obj: xr.DataArray | xr.Dataset, where: str = "<to_rumi>", *,
            band_dim: str = "band", time_dim: str = "time", variable: Hashable | None = None,
            time: Any = None, crs: Any = None, chunks: dict[str, int] | None = None,
            encode_cf: bool = True, dtype: Any = None, masks: str = "nodata") -> Prepared:
    """Reduce an xarray object to the array and labels a Rumi file stores.

    Nothing is computed: the data stay as lazy as they were. See
    :func:`to_rumi` for the rules.

    Parameters
    ----------
    obj : xarray.DataArray or xarray.Dataset
    where : str
        Named in error messages (the destination path).
    band_dim, time_dim : str
    variable : hashable, optional
    time : optional
        Time labels overriding those of ``obj``.
    crs : optional
        CRS overriding (or supplying) that of ``obj``.
    chunks : dict, optional
        Chunks per standard dimension (``time``, ``band``, ``y``, ``x``, see
        :func:`~rumi_xarray.dask.chunks.write_chunks`) for data that are not
        dask arrays yet; by default such data are left as they are.
    encode_cf : bool, default True
        Pack CF-decoded values back to their encoded type (see
        :func:`rumi_xarray.write.packing.encode`); False stores decoded values.
    dtype : numpy dtype-like, optional
        The stored sample type.
    masks : {"nodata", "band", "ignore"}
        What becomes of a GDAL alpha band or per-dataset mask of the source
        (see :mod:`rumi_xarray.write.masks`).

    Returns
    -------
    Prepared
    """
    selected, ds = _select(obj, where, variable, band_dim, time_dim, chunks)
    selected = apply_masks(selected, where, masks)
    da = _lazy(_standard_dims(selected, where, band_dim, time_dim), chunks, where)
    check_dtype(where, np.dtype(da.dtype))
    _check_sizes(da, where)
    attrs, encoding = packing.packing(selected)
    encoded = packing.encode(da, where, attrs=attrs, encoding=encoding, encode_cf=encode_cf,
                        dtype=dtype)
    da = encoded.data
    check_dtype(where, np.dtype(da.dtype))
    # Labels come from the selection as given: a scalar time coordinate and
    # its bounds are still scalar there.
    if time is not None:
        labels = time_conv.given_time(time, da.sizes["time"], where)
    elif time_dim in selected.dims:
        labels = time_conv.coordinate_time(selected, ds, time_dim, where)
    else:
        labels = time_conv.scalar_time(selected, ds, time_dim, where)
    bands = band_conv.band_texts(da, where)
    grid = georef.georeference(da, ds, where, crs)
    described = attribute_conv.collect(selected, ds, bands, where,
                                       packed=encoded.facts.packed,
                                       units_known=encoded.facts.units is not None)
    return Prepared(data=da, bands=bands, time=labels, transform=grid.transform, crs=grid.epsg,
                    pixel_is_point=grid.pixel_is_point,
                    sidecar=Sidecar(encoded.facts, **grid.facts, attributes=described))


# --- which variable -------------------------------------------------------------


def _select(obj: xr.DataArray | xr.Dataset, where: str, variable: Hashable | None,
            band_dim: str, time_dim: str, chunks: dict[str, int] | None
            ) -> tuple[xr.DataArray, xr.Dataset | None]:
    """Return the DataArray to write and the Dataset it came from (if any)."""
    if isinstance(obj, xr.DataArray):
        return obj, None
    if not isinstance(obj, xr.Dataset):
        raise input_error(RumiWriteTypeError, f"{where}: to_rumi takes an xarray DataArray "
                          f"or Dataset, got {type(obj).__name__}", where)
    if variable is not None:
        if variable not in obj.data_vars:
            raise ValueError(f"{where}: no data variable {variable!r}; the Dataset has "
                             f"{sorted(map(str, obj.data_vars))}")
        return obj[variable], obj
    if "band_data" in obj.data_vars:
        return obj["band_data"], obj
    rasters = _raster_variables(obj, band_dim, time_dim)
    if not rasters:
        raise ValueError(f"{where}: the Dataset has no raster variable (one with y and x "
                         f"dimensions) among {sorted(map(str, obj.data_vars))}")
    if len(rasters) == 1:
        return obj[rasters[0]], obj
    return _stack_bands(obj, rasters, where, band_dim, time_dim, chunks), obj


def _auxiliary(ds: xr.Dataset) -> set[Hashable]:
    """Return names of variables that describe others (bounds, grid mappings)."""
    names: set[Hashable] = set()
    for var in ds.variables.values():
        for key in ("bounds", "grid_mapping"):
            for source in (var.attrs, var.encoding):
                value = source.get(key)
                if isinstance(value, str):
                    names.add(value)
    return names


def _raster_variables(ds: xr.Dataset, band_dim: str, time_dim: str) -> list[Hashable]:
    aux = _auxiliary(ds)
    out = []
    for name, var in ds.data_vars.items():
        if name in aux:
            continue
        spatial = [d for d in var.dims if d not in (band_dim, time_dim)]
        if len(spatial) == 2 and _yx_dims(spatial) is not None:
            out.append(name)
    return out


def _stack_bands(ds: xr.Dataset, names: list[Hashable], where: str, band_dim: str,
                 time_dim: str, chunks: dict[str, int] | None) -> xr.DataArray:
    """Stack single-band variables into one ``band`` dimension named by variable.

    Variables are chunked first (when ``chunks`` is given): concatenating
    lazily opened variables would otherwise load them all.
    """
    arrays = []
    for name in names:
        da = ds[name]
        if chunks is not None:
            spatial = _yx_dims([d for d in da.dims if d not in (band_dim, time_dim)])
            by_dim: dict[Hashable, int] = {time_dim: chunks["time"], band_dim: 1}
            if spatial is not None:
                by_dim.update({spatial[0]: chunks["y"], spatial[1]: chunks["x"]})
            da = _lazy(da, by_dim, where)
        if band_dim in da.dims:
            if da.sizes[band_dim] != 1:
                raise ValueError(
                    f"{where}: variable {name!r} has {da.sizes[band_dim]} bands; a Dataset of "
                    f"several variables is written one band per variable: pass variable= "
                    f"to write one of them")
            da = da.isel({band_dim: 0}, drop=True)
        arrays.append(da.drop_vars(band_dim, errors="ignore"))
    arrays = _same_cf(arrays, names, where)
    dtypes = {str(a.dtype) for a in arrays}
    if len(dtypes) > 1:
        listing = ", ".join(f"{n}: {a.dtype}" for n, a in zip(names, arrays, strict=True))
        raise ValueError(f"{where}: the variables written as bands must share one dtype, "
                         f"got {listing}; cast them first")
    dims = {tuple(a.dims) for a in arrays}
    if len(dims) > 1:
        raise ValueError(f"{where}: the variables written as bands must share dimensions, "
                         f"got {sorted(dims)}")
    labels = [_band_text(ds[name], name) for name in names]
    stacked = xr.concat(arrays, dim=band_dim, coords="minimal", compat="override",
                        join="override", combine_attrs="drop_conflicts")
    attrs, encoding = packing.packing(arrays[0])
    stacked.attrs.update(attrs)
    stacked.encoding.update(encoding)
    # Each variable's own attributes are its band's (the sidecar keeps them per band).
    stacked.encoding[attribute_conv.BANDS_ENCODING] = {
        label: dict(ds[name].attrs) for label, name in zip(labels, names, strict=True)}
    return stacked.assign_coords({band_dim: labels}).rename(None)


def _band_text(da: xr.DataArray, name: Hashable) -> str:
    """Return the band text to store for the variable ``name`` of a Dataset.

    ``band_as_variable=True`` names each variable by its short band name and
    keeps the full text (``"B02, Blue, 490nm"``) in ``long_name``: that text
    is stored, so reopening gives the same ``band_text``, ``common_name`` and
    ``center_wavelength``. Any other ``long_name`` (a description that does
    not start with the variable's name as its first field) is not a band
    text, and the variable name is stored.
    """
    label = str(name)
    text = da.attrs.get("long_name")
    if isinstance(text, str) and band_conv.short_name(text) == label:
        return text
    return label


def _same_cf(arrays: list[xr.DataArray], names: list[Hashable], where: str
             ) -> list[xr.DataArray]:
    """Return variables whose nodata, scale, offset and units can be one file's.

    Variables that agree are returned as they are (their packing is kept);
    otherwise each is decoded (physical values, NaN for nodata) with a
    warning, since a file has one nodata, scale and offset; units that
    differ are dropped, with a warning.
    """
    signatures = [packing.signature(a) for a in arrays]
    if all(s == signatures[0] for s in signatures):
        return arrays
    listing = ", ".join(str(n) for n in names)
    units = {s.get("units") for s in signatures}
    if len(units) > 1:
        warnings.warn(f"{where}: the variables {listing} have different units; the sidecar "
                      f"holds one units fact per file, so none applies to band_data: each "
                      f"variable's units are kept in the sidecar's attributes (shown with "
                      f"band_as_variable=True)", UserWarning, stacklevel=4)
        arrays = [a.copy(data=a.data) for a in arrays]
        for a in arrays:
            a.attrs.pop("units", None)
    rest = [{k: v for k, v in s.items() if k != "units"} for s in signatures]
    if all(s == rest[0] for s in rest):
        return arrays
    warnings.warn(f"{where}: the variables {listing} have different nodata, scale or offset; "
                  f"a Rumi file has one of each, so their decoded values are stored",
                  UserWarning, stacklevel=4)
    encoded = [packing.encode(a, where, encode_cf=False) for a in arrays]
    masked = any(e.facts.nodata is not None for e in encoded)
    out = []
    for a, e in zip(arrays, encoded, strict=True):
        decoded = e.data.copy(data=e.data.data)
        decoded.encoding = {}
        decoded.attrs = {k: v for k, v in a.attrs.items() if k == "units"}
        if masked and decoded.dtype.kind in "fc":
            decoded.attrs["_FillValue"] = np.nan
        out.append(decoded)
    return out


# --- dimensions -----------------------------------------------------------------


def _yx_dims(dims: Sequence[Hashable]) -> tuple[Hashable, Hashable] | None:
    """Return ``(y, x)`` among two spatial dimensions, by name or else by order."""
    if len(dims) != 2:
        return None
    y = [d for d in dims if str(d).lower() in _Y_NAMES]
    x = [d for d in dims if str(d).lower() in _X_NAMES]
    if len(y) == 1 and len(x) == 1:
        return y[0], x[0]
    return dims[0], dims[1]


def _standard_dims(da: xr.DataArray, where: str, band_dim: str,
                   time_dim: str) -> xr.DataArray:
    """Return ``da`` with dimensions ``(time, band, y, x)``, adding missing ones."""
    spatial = [d for d in da.dims if d not in (band_dim, time_dim)]
    yx = _yx_dims(spatial)
    if yx is None:
        extra = [str(d) for d in spatial if str(d).lower() not in (*_Y_NAMES, *_X_NAMES)]
        raise ValueError(
            f"{where}: cannot write dimensions {tuple(map(str, da.dims))}: Rumi stores "
            f"(time, band, y, x); select or stack {', '.join(map(repr, extra)) or 'the others'}"
            f" first (or name the band/time dimensions with band_dim=/time_dim=)")
    y_dim, x_dim = yx
    da = _rename(da, {band_dim: "band", time_dim: "time", y_dim: "y", x_dim: "x"})
    # expand_dims promotes a scalar band/time coordinate to the new dimension's.
    if "band" not in da.dims:
        da = da.expand_dims("band")
    if "time" not in da.dims:
        da = da.expand_dims("time")
    return da.transpose("time", "band", "y", "x")


def _rename(da: xr.DataArray, names: dict[Hashable, str]) -> xr.DataArray:
    """Rename dimensions (and their coordinates) when they differ from the standard."""
    mapping = {old: new for old, new in names.items() if old != new and old in da.dims}
    if not mapping:
        return da
    clashes = [new for new in mapping.values() if new in da.coords and new not in mapping]
    if clashes:
        da = da.drop_vars(clashes)
    return da.rename(mapping)


def _check_sizes(da: xr.DataArray, where: str) -> None:
    empty = [str(d) for d in da.dims if da.sizes[d] == 0]
    if empty:
        raise ValueError(f"{where}: cannot write an empty array (size 0 along {empty})")
    if da.sizes["band"] > 65535:
        raise ValueError(f"{where}: Rumi stores at most 65535 bands, got {da.sizes['band']}")
    for dim in ("time", "y", "x"):
        if da.sizes[dim] > 0xFFFFFFFF:
            raise ValueError(f"{where}: {dim} size {da.sizes[dim]} exceeds Rumi's limit "
                             f"of 4294967295")


def _lazy(da: xr.DataArray, chunks: Mapping[Any, int] | None, where: str
          ) -> xr.DataArray:
    """Return ``da`` with dask data, chunked to frames unless it is dask already.

    Dask data pass through untouched (:func:`write_array` aligns them to
    frames). Anything else is wrapped without copying or loading: numpy data
    then compress in parallel, and lazily opened files are read one frame's
    window at a time.
    """
    if chunks is None or da.chunks is not None:
        return da
    try:
        # Only the data: coordinates stay as they are (chunking a transform-
        # backed xc/yc coordinate yields dask arrays of the wrong shape).
        wanted = {d: c for d, c in chunks.items() if d in da.dims}
        return da.copy(data=da.variable.chunk(wanted).data)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise ValueError(f"{where}: cannot chunk the input for writing: {exc}") from exc
