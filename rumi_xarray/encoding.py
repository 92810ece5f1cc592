"""What an xarray object says Rumi should store: bands, time, georeferencing.

:func:`prepare` finds the raster variable, orders its dimensions as
``(time, band, y, x)``, derives band names, time steps (instants or
intervals), the affine transform, the EPSG code and PixelIsArea/PixelIsPoint
from xarray, CF and rioxarray conventions, and checks everything Rumi cannot
store *before* a frame is compressed.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.frames import check_dtype

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
    """

    data: xr.DataArray
    bands: list[str]
    time: list[Any]
    transform: tuple[float, ...] | None
    crs: int | None
    pixel_is_point: bool


def prepare(obj: xr.DataArray | xr.Dataset, where: str = "<to_rumi>", *,
            band_dim: str = "band", time_dim: str = "time", variable: Hashable | None = None,
            time: Any = None, crs: Any = None, chunks: dict[str, int] | None = None
            ) -> Prepared:
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
        Chunks per standard dimension (``time``, ``band``, ``y``, ``x``,
        see :func:`frame_chunks`) for data that are not dask arrays yet; by
        default such data are left as they are.

    Returns
    -------
    Prepared
    """
    selected, ds = _select(obj, where, variable, band_dim, time_dim, chunks)
    da = _lazy(_standard_dims(selected, where, band_dim, time_dim), chunks, where)
    check_dtype(where, np.dtype(da.dtype))
    _check_sizes(da, where)
    # Labels come from the selection as given: a scalar time coordinate and
    # its bounds are still scalar there.
    if time is not None:
        labels = _given_time(time, da.sizes["time"], where)
    elif time_dim in selected.dims:
        labels = _coordinate_time(selected, ds, time_dim, where)
    else:
        labels = _scalar_time(selected, ds, time_dim, where)
    bands = _band_names(da, where)
    transform, epsg, pixel_is_point = _georeference(da, ds, where, crs)
    return Prepared(data=da, bands=bands, time=labels, transform=transform, crs=epsg,
                    pixel_is_point=pixel_is_point)


# --- which variable -------------------------------------------------------------


def _select(obj: xr.DataArray | xr.Dataset, where: str, variable: Hashable | None,
            band_dim: str, time_dim: str, chunks: dict[str, int] | None
            ) -> tuple[xr.DataArray, xr.Dataset | None]:
    """Return the DataArray to write and the Dataset it came from (if any)."""
    if isinstance(obj, xr.DataArray):
        return obj, None
    if not isinstance(obj, xr.Dataset):
        raise TypeError(f"{where}: to_rumi takes an xarray DataArray or Dataset, "
                        f"got {type(obj).__name__}")
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
    dtypes = {str(a.dtype) for a in arrays}
    if len(dtypes) > 1:
        listing = ", ".join(f"{n}: {a.dtype}" for n, a in zip(names, arrays, strict=True))
        raise ValueError(f"{where}: the variables written as bands must share one dtype, "
                         f"got {listing}; cast them first")
    dims = {tuple(a.dims) for a in arrays}
    if len(dims) > 1:
        raise ValueError(f"{where}: the variables written as bands must share dimensions, "
                         f"got {sorted(dims)}")
    labels = [str(n) for n in names]
    stacked = xr.concat(arrays, dim=band_dim, coords="minimal", compat="override",
                        join="override", combine_attrs="drop_conflicts")
    return stacked.assign_coords({band_dim: labels}).rename(None)


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


def _lazy(da: xr.DataArray, chunks: Mapping[Hashable, int] | None, where: str
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


# --- band names -----------------------------------------------------------------


def _band_names(da: xr.DataArray, where: str) -> list[str]:
    """Return one text per band, checked against Rumi's rules."""
    n = da.sizes["band"]
    if "band" in da.coords and da["band"].ndim == 1:
        names = [_text(v) for v in da["band"].values.tolist()]
    elif "band" in da.coords and da["band"].ndim == 0:
        names = [_text(da["band"].values.item())]
    elif n == 1 and isinstance(da.name, str) and da.name and da.name != "band_data":
        names = [da.name]
    else:
        names = [f"band_{i + 1}" for i in range(n)]
    _check_band_names(names, where)
    return names


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _check_band_names(names: Sequence[str], where: str) -> None:
    for i, name in enumerate(names):
        if not name:
            raise ValueError(f"{where}: band {i} has an empty name; Rumi names every band")
        if "\x00" in name:
            raise ValueError(f"{where}: band {i} name {name!r} contains a NUL character")
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise ValueError(
                f"{where}: bands {seen[name]} and {i} are both named {name!r}; Rumi band "
                f"names are unique (assign_coords(band=[...]) to rename)")
        seen[name] = i


# --- time -----------------------------------------------------------------------


def _coordinate_time(da: xr.DataArray, ds: xr.Dataset | None, time_dim: str,
                     where: str) -> list[Any]:
    """Return the time labels of a time dimension, from its coordinate and bounds."""
    if time_dim not in da.coords:
        raise ValueError(
            f"{where}: the {time_dim!r} dimension has no coordinate; Rumi labels every time "
            f"step: assign one (assign_coords({time_dim}=...)) or pass time=[...]")
    coord = da[time_dim]
    starts = _seconds(_decoded(coord.variable), f"the {time_dim!r} coordinate", where)
    bounds = _bounds(coord, da, ds)
    if bounds is None:
        _check_increasing(starts, where, time_dim)
        return [_instant(s) for s in starts]
    pairs = _seconds(_decoded(bounds, coord.variable), "the time bounds", where)
    if pairs.shape != (starts.size, 2):
        raise ValueError(f"{where}: the time bounds have shape {pairs.shape}, expected "
                         f"({starts.size}, 2)")
    _check_intervals(pairs, where)
    return [(_instant(a), _instant(b)) for a, b in pairs]


def _scalar_time(da: xr.DataArray, ds: xr.Dataset | None, time_dim: str,
                 where: str) -> list[Any]:
    """Return the single time label of data without a time dimension."""
    coord = da.coords.get(time_dim)
    if coord is None or coord.ndim != 0:
        raise ValueError(
            f"{where}: the data have no time coordinate; Rumi labels every time step: pass "
            f"time=... (a date or datetime, or a (start, end) pair), or assign a scalar "
            f"{time_dim!r} coordinate")
    start = _seconds(_decoded(coord.variable), "the time coordinate", where)
    bounds = _bounds(coord, da, ds)
    if bounds is None:
        return [_instant(start.reshape(-1)[0])]
    pair = _seconds(_decoded(bounds, coord.variable), "the time bounds", where).reshape(-1, 2)
    _check_intervals(pair, where)
    return [(_instant(pair[0, 0]), _instant(pair[0, 1]))]


def _bounds(coord: xr.DataArray, da: xr.DataArray, ds: xr.Dataset | None
            ) -> xr.Variable | None:
    """Return the bounds variable a time coordinate names, if it can be found."""
    name = coord.attrs.get("bounds", coord.encoding.get("bounds"))
    if not isinstance(name, str):
        return None
    if name in da.coords:
        return da[name].variable
    if ds is not None and name in ds.variables:
        return ds[name].variable
    return None


def _decoded(var: xr.Variable, units_from: xr.Variable | None = None) -> np.ndarray:
    """Return time values, decoding numbers that carry CF ``units``."""
    values = np.asarray(var.values)
    if values.dtype.kind not in "iuf":
        return values
    attrs = dict(var.attrs)
    if "units" not in attrs and units_from is not None:
        for key in ("units", "calendar"):
            if key in units_from.attrs:
                attrs[key] = units_from.attrs[key]
    if "units" not in attrs:
        return values
    decoded = xr.decode_cf(xr.Dataset({"t": xr.Variable(var.dims, values, attrs)}))
    return np.asarray(decoded["t"].values)


def _given_time(time: Any, steps: int, where: str) -> list[Any]:
    """Return the labels passed as ``time=``: one per step (or one, unwrapped)."""
    if isinstance(time, tuple) or np.ndim(time) == 0:
        time = [time]
    entries = list(time)
    if len(entries) != steps:
        raise ValueError(f"{where}: time= has {len(entries)} entries for {steps} time "
                         f"step(s)")
    if all(isinstance(e, tuple) for e in entries):
        pairs = _seconds(np.array([[a, b] for a, b in entries], dtype=object),
                         "time=", where)
        _check_intervals(pairs, where)
        return [(_instant(a), _instant(b)) for a, b in pairs]
    if any(isinstance(e, tuple) for e in entries):
        raise ValueError(f"{where}: time= mixes instants and (start, end) intervals; a file "
                         f"records one kind")
    seconds = _seconds(np.array(entries, dtype=object), "time=", where)
    _check_increasing(seconds, where, "time")
    return [_instant(s) for s in seconds]


def _seconds(values: Any, what: str, where: str) -> np.ndarray:
    """Return POSIX seconds of datetime-like values, refusing NaT and fractions."""
    import pandas as pd

    arr = np.asarray(values)
    if arr.dtype.kind != "M":
        if arr.dtype.kind in "iufb":
            raise ValueError(f"{where}: {what} holds numbers without CF time units; "
                             f"give dates (datetime64, datetime or ISO text)")
        try:
            index = pd.to_datetime(arr.ravel(), utc=True)
        except (TypeError, ValueError, OverflowError) as exc:
            kinds = sorted({type(v).__name__ for v in arr.ravel().tolist()})
            raise ValueError(
                f"{where}: {what} cannot be read as UTC dates ({', '.join(kinds)}): {exc}; "
                f"Rumi records proleptic Gregorian UTC times (convert cftime calendars with "
                f".convert_calendar('standard', use_cftime=False))") from exc
        arr = index.tz_convert(None).to_numpy().reshape(arr.shape)
    if np.isnat(arr).any():
        position = np.argwhere(np.isnat(arr))[0].tolist()
        raise ValueError(f"{where}: {what} has a missing time (NaT) at {position}; Rumi "
                         f"labels every time step")
    whole = arr.astype("datetime64[s]")
    fractional = whole.astype(arr.dtype) != arr
    if fractional.any():
        first = arr[tuple(np.argwhere(fractional)[0])]
        raise ValueError(f"{where}: {what} has {first}, a fraction of a second; Rumi records "
                         f"whole seconds: round first (e.g. .dt.floor('s'))")
    return whole.astype(np.int64)


def _instant(seconds: Any) -> np.datetime64:
    return np.datetime64(int(seconds), "s")


def _check_increasing(seconds: np.ndarray, where: str, what: str) -> None:
    steps = np.diff(seconds.reshape(-1))
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        word = "repeats" if steps[bad[0]] == 0 else "goes backwards"
        raise ValueError(
            f"{where}: {what} {word} at step {i} ({_instant(seconds[i - 1])} then "
            f"{_instant(seconds[i])}); Rumi stores strictly increasing time steps: "
            f"sortby({what!r}) and drop duplicates first")


def _check_intervals(pairs: np.ndarray, where: str) -> None:
    for i, (start, end) in enumerate(pairs.tolist()):
        if start >= end:
            raise ValueError(f"{where}: time interval {i} ({_instant(start)}, {_instant(end)}) "
                             f"does not end after it starts")
    for i in range(1, len(pairs)):
        if pairs[i, 0] < pairs[i - 1, 1]:
            raise ValueError(
                f"{where}: time interval {i} starts at {_instant(pairs[i, 0])}, before interval "
                f"{i - 1} ends ({_instant(pairs[i - 1, 1])}); Rumi intervals are increasing "
                f"and may meet but not overlap")


# --- georeferencing -------------------------------------------------------------


def _georeference(da: xr.DataArray, ds: xr.Dataset | None, where: str, crs: Any = None
                  ) -> tuple[tuple[float, ...] | None, int | None, bool]:
    """Return the Rumi transform, EPSG code and PixelIsPoint flag of ``da``.

    ``crs``, when given, replaces whatever CRS the data carry.
    """
    mapping = _grid_mapping(da, ds)
    attrs = mapping.attrs if mapping is not None else {}
    point = _area_or_point(da, ds) == "point"
    corner, source = _corner_transform(da, attrs, where)
    epsg = _epsg(da, attrs, where) if crs is None else _epsg_of(crs, where)
    if corner is None and epsg is None:
        return None, None, False
    if epsg is None:
        raise ValueError(
            f"{where}: the data have a transform (from {source}) but no CRS; Rumi stores "
            f"georeferencing only with an EPSG CRS: pass crs= (e.g. crs='EPSG:4326'; "
            f"--crs on the command line) or set one (.rio.write_crs(...)), or drop the x/y "
            f"coordinates to write without georeferencing")
    if corner is None:
        raise ValueError(
            f"{where}: the data have a CRS (EPSG:{epsg}) but no transform: give regularly "
            f"spaced 1-D x/y coordinates or a GeoTransform attribute on the grid mapping")
    _check_transform(corner, where)
    if point:
        a, b, c, d, e, f = corner
        corner = (a, b, c + 0.5 * (a + b), d, e, f + 0.5 * (d + e))
    return corner, epsg, point


def _grid_mapping(da: xr.DataArray, ds: xr.Dataset | None) -> xr.DataArray | None:
    name = da.encoding.get("grid_mapping", da.attrs.get("grid_mapping", "spatial_ref"))
    if name in da.coords:
        return da.coords[name]
    if ds is not None and name in ds.variables:
        return ds[name]
    return None


def _area_or_point(da: xr.DataArray, ds: xr.Dataset | None) -> str:
    for attrs in (da.attrs, ds.attrs if ds is not None else {}):
        value = attrs.get("AREA_OR_POINT")
        if isinstance(value, str):
            return value.strip().lower()
    return "area"


def _corner_transform(da: xr.DataArray, attrs: dict[Hashable, Any], where: str
                      ) -> tuple[tuple[float, ...] | None, str]:
    """Return the corner transform (rasterio order) and where it came from.

    1-D coordinates win over ``GeoTransform``: they follow any slicing done
    after opening, whereas the attribute keeps describing the original grid.
    """
    geo = _geotransform(attrs, where)
    xs = _axis(da, "x")
    ys = _axis(da, "y")
    if xs is not None and ys is not None and (xs.size > 1 or ys.size > 1 or geo is not None):
        if geo is not None and (geo[1] != 0.0 or geo[3] != 0.0):
            raise ValueError(f"{where}: the GeoTransform is rotated but x/y are 1-D "
                             f"coordinates; drop one or the other")
        a = _spacing(xs, "x", where, None if geo is None else geo[0])
        e = _spacing(ys, "y", where, None if geo is None else geo[4])
        return (a, 0.0, float(xs[0]) - 0.5 * a, 0.0, e, float(ys[0]) - 0.5 * e), \
            "the x/y coordinates"
    if geo is not None:
        _check_2d_coords(da, geo, where)
        return geo, "the GeoTransform attribute"
    if xs is not None or ys is not None:
        raise ValueError(f"{where}: cannot derive a transform from one pixel along x or y "
                         f"without a GeoTransform attribute")
    return None, ""


def _axis(da: xr.DataArray, dim: str) -> np.ndarray | None:
    if dim in da.coords and da[dim].dims == (dim,):
        values = np.asarray(da[dim].values)
        if values.dtype.kind in "iuf":
            return values
    return None


def _spacing(values: np.ndarray, dim: str, where: str, fallback: float | None) -> float:
    """Return the step of regularly spaced pixel centres, or raise."""
    if values.size == 1:
        if fallback is None:
            raise ValueError(f"{where}: cannot derive the pixel size from one {dim} "
                             f"coordinate without a GeoTransform attribute")
        return float(fallback)
    v = values.astype(np.float64)
    step = (v[-1] - v[0]) / (v.size - 1)
    if step == 0 or not math.isfinite(step):
        raise ValueError(f"{where}: the {dim} coordinate is constant or not finite")
    # Tolerate rounding of stored coordinates (float32 UTM northings are off by
    # up to half a metre) but not a real irregularity: 1 % of a pixel plus a
    # few units in the last place of the values' own precision.
    eps = np.finfo(values.dtype).eps if values.dtype.kind == "f" else 0.0
    tolerance = 0.01 * abs(step) + 4 * eps * float(np.max(np.abs(v)))
    deviation = np.abs(v - (v[0] + step * np.arange(v.size)))
    if float(np.max(deviation)) > tolerance:
        i = int(np.argmax(deviation))
        raise ValueError(
            f"{where}: the {dim} coordinate is not regularly spaced (value {i} is {v[i]!r}, "
            f"{deviation[i]:.6g} away from a grid of step {step!r}); Rumi stores an affine "
            f"grid: interpolate onto a regular grid first")
    return float(step)


def _geotransform(attrs: dict[Hashable, Any], where: str) -> tuple[float, ...] | None:
    """Return GDAL's ``GeoTransform`` text (``c a b f d e``) as a rasterio-order tuple."""
    text = attrs.get("GeoTransform")
    if text is None:
        return None
    try:
        values = [float(v) for v in (text.split() if isinstance(text, str) else text)]
    except (TypeError, ValueError):
        values = []
    if len(values) != 6:
        raise ValueError(f"{where}: GeoTransform {text!r} is not six numbers")
    c, a, b, f, d, e = values
    return (a, b, c, d, e, f)


def _check_2d_coords(da: xr.DataArray, corner: tuple[float, ...], where: str) -> None:
    """Check a GeoTransform against 2-D ``xc``/``yc`` coordinates, when present.

    A rotated grid sliced after opening keeps its original GeoTransform;
    comparing three corners catches that instead of writing a wrong grid.
    """
    if "xc" not in da.coords or "yc" not in da.coords:
        return
    if set(da["xc"].dims) != {"y", "x"}:
        return
    height, width = da.sizes["y"], da.sizes["x"]
    a, b, c, d, e, f = corner
    for row, col in ((0, 0), (0, width - 1), (height - 1, 0)):
        expected_x = a * (col + 0.5) + b * (row + 0.5) + c
        expected_y = d * (col + 0.5) + e * (row + 0.5) + f
        got_x = float(np.asarray(da["xc"].isel(y=row, x=col).values).reshape(-1)[0])
        got_y = float(np.asarray(da["yc"].isel(y=row, x=col).values).reshape(-1)[0])
        scale = max(abs(a), abs(b), abs(d), abs(e))
        if abs(got_x - expected_x) > 0.01 * scale or abs(got_y - expected_y) > 0.01 * scale:
            raise ValueError(
                f"{where}: the GeoTransform does not match the xc/yc coordinates at pixel "
                f"({row}, {col}) (was the array sliced after opening?); update the "
                f"GeoTransform attribute of the grid mapping")


def _check_transform(corner: tuple[float, ...], where: str) -> None:
    a, b, _, d, e, _ = corner
    if not all(math.isfinite(v) for v in corner):
        raise ValueError(f"{where}: the transform {corner} is not finite")
    if a * e - b * d == 0:
        raise ValueError(f"{where}: the transform {corner} is singular (zero pixel size)")


def _epsg(da: xr.DataArray, attrs: dict[Hashable, Any], where: str) -> int | None:
    """Return the EPSG code of the data's CRS, None without one; raise if not EPSG."""
    for key in ("crs_wkt", "spatial_ref"):
        text = attrs.get(key)
        if isinstance(text, str) and text.strip():
            return _epsg_of(text, where, fallback=attrs.get("epsg"))
    code = attrs.get("epsg")
    if code is not None:
        return _epsg_of(code, where)
    crs = _rio_crs(da)
    return None if crs is None else _epsg_of(crs, where)


def _epsg_of(crs: Any, where: str, fallback: Any = None) -> int:
    try:
        from pyproj import CRS
        from pyproj.exceptions import CRSError
    except ImportError:
        if isinstance(crs, (int, np.integer)) or (isinstance(crs, str) and crs.isdigit()):
            return int(crs)
        if fallback is not None:
            return int(fallback)
        raise ValueError(f"{where}: reading the CRS needs pyproj (pip install "
                         f"'rumi-xarray[geo]')") from None
    try:
        parsed = CRS.from_user_input(int(crs) if isinstance(crs, np.integer) else crs)
    except CRSError as exc:
        raise ValueError(f"{where}: cannot parse the CRS: {exc}") from exc
    code = parsed.to_epsg()
    if code is None and fallback is not None:
        code = int(fallback)
    if code is None:
        raise ValueError(
            f"{where}: the CRS {parsed.name!r} has no EPSG code; Rumi stores EPSG CRSs only: "
            f"reproject first (e.g. .rio.reproject('EPSG:4326'))")
    return int(code)


def _rio_crs(da: xr.DataArray) -> Any:
    """Return rioxarray's view of the CRS, when rioxarray is installed."""
    try:
        import rioxarray  # noqa: F401  (registers the .rio accessor)
    except ImportError:
        return None
    try:
        return da.rio.crs
    except Exception:  # rioxarray raises various errors on non-geospatial arrays
        return None
