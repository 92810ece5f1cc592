"""Rumi metadata -> xarray coordinates, attributes and encoding (CF conventions).

Everything xarray users expect of a geospatial raster lives here: pixel-centre
``x``/``y`` (or lazy 2-D ``xc``/``yc`` for rotated grids), a CF grid-mapping
``spatial_ref`` coordinate that rioxarray understands, band names, and time as
instants or intervals with bounds.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from xarray.core.coordinate_transform import CoordinateTransform
from xarray.indexes import CoordinateTransformIndex

TIME_UNITS = "seconds since 1970-01-01T00:00:00Z"
GRID_MAPPING = "spatial_ref"


# --- time -----------------------------------------------------------------------


def _seconds(value: dt.date | dt.datetime) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return int((value - dt.datetime(1970, 1, 1)).total_seconds())
    return (value - dt.date(1970, 1, 1)).days * 86400


def time_seconds(steps: Sequence[Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """Return POSIX seconds of time steps, and of interval bounds if any.

    Parameters
    ----------
    steps : sequence
        ``rumi.Metadata.time`` entries: dates, UTC datetimes, or
        ``(start, end)`` pairs of those.

    Returns
    -------
    starts : numpy.ndarray of int64
    bounds : numpy.ndarray of int64, shape (n, 2), or None for instants
    """
    if steps and isinstance(steps[0], tuple):
        bounds = np.array([[_seconds(a), _seconds(b)] for a, b in steps], dtype=np.int64)
        return bounds[:, 0].copy(), bounds
    return np.array([_seconds(s) for s in steps], dtype=np.int64), None


def time_coords(seconds: np.ndarray, bounds: np.ndarray | None, *, decode_times: bool,
                has_time: bool) -> dict[Hashable, xr.Variable]:
    """Build the ``time`` coordinate (and ``time_bnds`` for intervals).

    Parameters
    ----------
    seconds : numpy.ndarray
        POSIX seconds per step (interval starts for intervals).
    bounds : numpy.ndarray or None
        ``(n, 2)`` interval bounds.
    decode_times : bool
        ``datetime64[ns]`` when True, raw seconds with CF ``units`` otherwise.
    has_time : bool
        ``time`` is a dimension; else the single step is a scalar coordinate.

    Returns
    -------
    dict of xarray.Variable
    """
    def encode(values: np.ndarray) -> np.ndarray:
        if decode_times:
            return values.astype("datetime64[s]").astype("datetime64[ns]")
        return values

    attrs: dict[str, Any] = {"standard_name": "time", "long_name": "time", "axis": "T"}
    encoding = {"units": TIME_UNITS, "calendar": "proleptic_gregorian", "dtype": "int64"}
    if not decode_times:
        attrs.update(units=TIME_UNITS, calendar="proleptic_gregorian")
        encoding = {}
    if bounds is not None:
        attrs["bounds"] = "time_bnds"
    dims: tuple[str, ...] = ("time",) if has_time else ()
    values = encode(seconds) if has_time else encode(seconds)[0]
    out: dict[Hashable, xr.Variable] = {
        "time": xr.Variable(dims, values, attrs, encoding=encoding)}
    if bounds is not None:
        bnds = encode(bounds) if has_time else encode(bounds)[0]
        out["time_bnds"] = xr.Variable((*dims, "nv"), bnds,
                                       {} if decode_times else {"units": TIME_UNITS},
                                       encoding=dict(encoding))
    return out


# --- space ----------------------------------------------------------------------


def is_rotated(transform: Sequence[float]) -> bool:
    """Return whether the affine transform has rotation or shear terms."""
    return transform[1] != 0.0 or transform[3] != 0.0


def corner_transform(transform: Sequence[float], pixel_is_point: bool) -> tuple[float, ...]:
    """Return the transform whose origin is the corner of pixel (0, 0).

    Rumi stores PixelIsPoint transforms with the origin at the first pixel's
    centre; GDAL's GeoTransform (and rioxarray) always use the corner.

    Parameters
    ----------
    transform : sequence of float
        ``(a, b, c, d, e, f)`` in rasterio order.
    pixel_is_point : bool

    Returns
    -------
    tuple of float
    """
    a, b, c, d, e, f = (float(v) for v in transform[:6])
    if pixel_is_point:
        c -= 0.5 * (a + b)
        f -= 0.5 * (d + e)
    return (a, b, c, d, e, f)


def gdal_geotransform(transform: Sequence[float]) -> str:
    """Return GDAL's GeoTransform text (``c a b f d e``) for a corner transform."""
    a, b, c, d, e, f = transform
    return " ".join(repr(float(v)) for v in (c, a, b, f, d, e))


class AffineTransform(CoordinateTransform):
    """Lazy 2-D ``xc``/``yc`` coordinates of a rotated or sheared grid.

    Values are computed only for what is selected, so a rotated 100k x 100k
    image costs nothing until its coordinates are looked at.

    Parameters
    ----------
    transform : sequence of float
        Corner transform ``(a, b, c, d, e, f)`` in rasterio order.
    height, width : int
    """

    def __init__(self, transform: Sequence[float], height: int, width: int) -> None:
        super().__init__(("xc", "yc"), {"y": height, "x": width})
        self.affine = tuple(float(v) for v in transform)

    def forward(self, dim_positions: dict[str, Any]) -> dict[Hashable, Any]:
        """Return world coordinates of pixel centres at grid positions."""
        a, b, c, d, e, f = self.affine
        col = np.asarray(dim_positions["x"], dtype=np.float64) + 0.5
        row = np.asarray(dim_positions["y"], dtype=np.float64) + 0.5
        return {"xc": a * col + b * row + c, "yc": d * col + e * row + f}

    def reverse(self, coord_labels: dict[Hashable, Any]) -> dict[str, Any]:
        """Return fractional grid positions of world coordinates."""
        a, b, c, d, e, f = self.affine
        x = np.asarray(coord_labels["xc"], dtype=np.float64) - c
        y = np.asarray(coord_labels["yc"], dtype=np.float64) - f
        det = a * e - b * d
        col = (e * x - b * y) / det - 0.5
        row = (-d * x + a * y) / det - 0.5
        return {"x": col, "y": row}

    def equals(self, other: CoordinateTransform, **kwargs: Any) -> bool:
        """Return whether ``other`` is the same affine grid."""
        return (isinstance(other, AffineTransform) and self.affine == other.affine
                and self.dim_size == other.dim_size)


@functools.lru_cache(maxsize=64)
def _crs(epsg: int) -> Any:
    from pyproj import CRS

    return CRS.from_epsg(epsg)


@functools.lru_cache(maxsize=64)
def _axis_attrs(epsg: int) -> tuple[dict[str, str], dict[str, str]]:
    crs = _crs(epsg)
    if crs.is_geographic:
        return ({"standard_name": "longitude", "long_name": "longitude",
                 "units": "degrees_east", "axis": "X"},
                {"standard_name": "latitude", "long_name": "latitude",
                 "units": "degrees_north", "axis": "Y"})
    unit = crs.axis_info[0].unit_name if crs.axis_info else "unknown"
    units = {"metre": "m", "meter": "m"}.get(unit, unit)
    return ({"standard_name": "projection_x_coordinate",
             "long_name": "x coordinate of projection", "units": units, "axis": "X"},
            {"standard_name": "projection_y_coordinate",
             "long_name": "y coordinate of projection", "units": units, "axis": "Y"})


@functools.lru_cache(maxsize=64)
def _cf_attrs(epsg: int) -> dict[str, Any]:
    crs = _crs(epsg)
    attrs: dict[str, Any] = {}
    try:
        attrs.update(crs.to_cf())
    except Exception:  # some CRSs have no CF grid mapping; WKT still describes them
        attrs["crs_wkt"] = crs.to_wkt()
    attrs["spatial_ref"] = attrs.get("crs_wkt", crs.to_wkt())
    return attrs


def spatial_ref(epsg: int, corner: Sequence[float]) -> xr.Variable:
    """Return the CF grid-mapping variable (``spatial_ref``) of an EPSG CRS.

    Parameters
    ----------
    epsg : int
    corner : sequence of float
        Corner transform, stored as GDAL's ``GeoTransform``.

    Returns
    -------
    xarray.Variable
        Scalar, with ``crs_wkt``, ``spatial_ref``, ``GeoTransform`` and the CF
        grid-mapping parameters pyproj derives.
    """
    attrs = dict(_cf_attrs(epsg))
    attrs["GeoTransform"] = gdal_geotransform(corner)
    attrs["epsg"] = int(epsg)
    return xr.Variable((), np.int64(0), attrs)


def spatial_coords(transform: Sequence[float] | None, epsg: int | None,
                   pixel_is_point: bool | None, height: int, width: int
                   ) -> tuple[dict[Hashable, xr.Variable], xr.Coordinates | None]:
    """Build ``x``/``y`` (or ``xc``/``yc``) and ``spatial_ref`` coordinates.

    Parameters
    ----------
    transform : sequence of float or None
        As stored by Rumi (rasterio order).
    epsg : int or None
    pixel_is_point : bool or None
    height, width : int

    Returns
    -------
    variables : dict of xarray.Variable
        ``x``, ``y`` and ``spatial_ref``; empty when the file has no
        georeferencing (no fake coordinates).
    indexed : xarray.Coordinates or None
        Lazy 2-D ``xc``/``yc`` with their transform index, for rotated grids.
    """
    if transform is None or epsg is None:
        return {}, None
    corner = corner_transform(transform, bool(pixel_is_point))
    x_attrs, y_attrs = _axis_attrs(epsg)
    ref = spatial_ref(epsg, corner)
    if is_rotated(corner):
        coords = xr.Coordinates.from_xindex(
            CoordinateTransformIndex(AffineTransform(corner, height, width)))
        coords["xc"].attrs.update(x_attrs)
        coords["yc"].attrs.update(y_attrs)
        return {GRID_MAPPING: ref}, coords
    a, _, c, _, e, f = corner
    x = c + a * (np.arange(width, dtype=np.float64) + 0.5)
    y = f + e * (np.arange(height, dtype=np.float64) + 0.5)
    return {"x": xr.Variable("x", x, x_attrs), "y": xr.Variable("y", y, y_attrs),
            GRID_MAPPING: ref}, None


def band_coord(bands: Sequence[str]) -> xr.Variable:
    """Return the ``band`` coordinate: the file's band texts."""
    return xr.Variable("band", np.array(list(bands), dtype=object),
                       {"long_name": "band"})


def data_attrs(grid: Any, bands: Sequence[str], georeferenced: bool,
               pixel_is_point: bool | None) -> dict[str, Any]:
    """Return the attributes of a data variable.

    Parameters
    ----------
    grid : Grid
    bands : sequence of str
    georeferenced : bool
    pixel_is_point : bool or None

    Returns
    -------
    dict
    """
    attrs: dict[str, Any] = {
        "long_name": tuple(bands),
        "rumi_tile_size": (grid.tile_height, grid.tile_width),
        "rumi_frame_layout": grid.frame_layout,
        "rumi_index_order": " ".join(grid.index_order),
    }
    if georeferenced:
        attrs["AREA_OR_POINT"] = "Point" if pixel_is_point else "Area"
    return attrs


def data_encoding(preferred: Mapping[str, int], source: str, header: bytes,
                  dtype: np.dtype, georeferenced: bool) -> dict[str, Any]:
    """Return the encoding of a data variable.

    Parameters
    ----------
    preferred : mapping
        Frame shape per dimension.
    source : str
        Redacted source name.
    header : bytes
    dtype : numpy.dtype
    georeferenced : bool

    Returns
    -------
    dict
    """
    enc: dict[str, Any] = {"preferred_chunks": dict(preferred), "source": source,
                           "rumi_header": header, "dtype": dtype}
    if georeferenced:
        enc["grid_mapping"] = GRID_MAPPING
    return enc
