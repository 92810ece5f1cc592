"""Georeferencing: Rumi's transform, EPSG code and PixelIsArea/Point <-> x, y, spatial_ref.

Read side: pixel-centre ``x``/``y`` (or lazy 2-D ``xc``/``yc`` for rotated
grids, never wrong 1-D ones) and a CF grid-mapping ``spatial_ref`` coordinate
that rioxarray and odc-geo understand. Write side: the transform, EPSG code
and PixelIsPoint flag an xarray object describes (1-D coordinates, a
``GeoTransform``, rioxarray's CRS). Both sides share the half-pixel shift
between Rumi's PixelIsPoint origin and the corner-based transform GDAL uses,
and GDAL's ``GeoTransform`` text.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import xarray as xr
from xarray.indexes import CoordinateTransform, CoordinateTransformIndex

GRID_MAPPING = "spatial_ref"


# --- shared ---------------------------------------------------------------------


def is_rotated(transform: Sequence[float]) -> bool:
    """Return whether the affine transform has rotation or shear terms."""
    return transform[1] != 0.0 or transform[3] != 0.0


def shift_half_pixel(transform: Sequence[float], sign: float) -> tuple[float, ...]:
    """Move a transform's origin by half a pixel along both axes.

    Rumi stores PixelIsPoint transforms with the origin at the first pixel's
    centre; GDAL's GeoTransform (and rioxarray, odc-geo) always use the
    corner. ``sign=-1`` goes from centre to corner, ``+1`` back.

    Parameters
    ----------
    transform : sequence of float
        ``(a, b, c, d, e, f)`` in rasterio order.
    sign : {-1, +1}

    Returns
    -------
    tuple of float
    """
    a, b, c, d, e, f = (float(v) for v in transform[:6])
    return (a, b, c + sign * 0.5 * (a + b), d, e, f + sign * 0.5 * (d + e))


def corner_transform(transform: Sequence[float], pixel_is_point: bool) -> tuple[float, ...]:
    """Return the transform whose origin is the corner of pixel (0, 0).

    Parameters
    ----------
    transform : sequence of float
        As Rumi stores it (rasterio order).
    pixel_is_point : bool

    Returns
    -------
    tuple of float
    """
    if pixel_is_point:
        return shift_half_pixel(transform, -1.0)
    return tuple(float(v) for v in transform[:6])


def format_geotransform(transform: Sequence[float]) -> str:
    """Return GDAL's GeoTransform text (``c a b f d e``) of a corner transform."""
    a, b, c, d, e, f = transform
    return " ".join(repr(float(v)) for v in (c, a, b, f, d, e))


def parse_geotransform(text: Any, where: str = "") -> tuple[float, ...]:
    """Return GDAL's ``GeoTransform`` (text or six numbers) in rasterio order.

    Parameters
    ----------
    text : str or sequence of float
    where : str
        Named in the error.

    Returns
    -------
    tuple of float

    Raises
    ------
    ValueError
    """
    try:
        values = [float(v) for v in (text.split() if isinstance(text, str) else text)]
    except (TypeError, ValueError):
        values = []
    if len(values) != 6:
        raise ValueError(f"{where}: GeoTransform {text!r} is not six numbers")
    c, a, b, f, d, e = values
    return (a, b, c, d, e, f)


# --- read side ------------------------------------------------------------------


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
    attrs["GeoTransform"] = format_geotransform(corner)
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


# --- write side -----------------------------------------------------------------


def georeference(da: xr.DataArray, ds: xr.Dataset | None, where: str, crs: Any = None
                  ) -> tuple[tuple[float, ...] | None, int | None, bool]:
    """Return the Rumi transform, EPSG code and PixelIsPoint flag of ``da``.

    ``crs``, when given, replaces whatever CRS the data carry.
    """
    mapping = _grid_mapping(da, ds)
    attrs = mapping.attrs if mapping is not None else {}
    point = _area_or_point(da, ds) == "point"
    corner, source = _corner_transform(da, attrs, where)
    epsg = _epsg(da, attrs, where) if crs is None else epsg_of(crs, where)
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
        corner = shift_half_pixel(corner, +1.0)
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
    text = attrs.get("GeoTransform")
    return None if text is None else parse_geotransform(text, where)


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
            return epsg_of(text, where, fallback=attrs.get("epsg"))
    code = attrs.get("epsg")
    if code is not None:
        return epsg_of(code, where)
    crs = _rio_crs(da)
    return None if crs is None else epsg_of(crs, where)


def epsg_of(crs: Any, where: str, fallback: Any = None) -> int:
    """Return the EPSG code of a CRS given in any form pyproj reads.

    Parameters
    ----------
    crs : int, str, pyproj.CRS or object with ``to_epsg()``
    where : str
        Named in errors.
    fallback : int, optional
        Code to use when pyproj finds none (an ``epsg`` attribute).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        The CRS cannot be parsed or has no EPSG code.
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError

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
