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
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
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
        """Return world coordinates of pixel centres at grid positions.

        The same arithmetic as rioxarray's 2-D ``xc``/``yc``: the centre
        transform applied to integer positions.
        """
        col = np.asarray(dim_positions["x"], dtype=np.float64)
        row = np.asarray(dim_positions["y"], dtype=np.float64)
        x, y = centre_affine(self.affine) @ (col, row)
        return {"xc": x, "yc": y}

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
def _crs(crs: int | str) -> Any:
    from pyproj import CRS

    return CRS.from_epsg(crs) if isinstance(crs, int) else CRS.from_user_input(crs)


def epsg_known(code: int) -> bool:
    """Return whether PROJ knows the CRS ``EPSG:<code>``.

    Parameters
    ----------
    code : int

    Returns
    -------
    bool

    Examples
    --------
    >>> epsg_known(32633), epsg_known(999999)
    (True, False)
    """
    from pyproj.exceptions import CRSError

    try:
        _crs(int(code))
    except (CRSError, ValueError, OverflowError):
        return False
    return True


@functools.lru_cache(maxsize=64)
def _axis_attrs(code: int | str) -> tuple[dict[str, str], dict[str, str]]:
    crs = _crs(code)
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
def _cf_attrs(code: int | str) -> dict[str, Any]:
    crs = _crs(code)
    attrs: dict[str, Any] = {}
    try:
        attrs.update(crs.to_cf())
    except Exception:  # some CRSs have no CF grid mapping; WKT still describes them
        attrs["crs_wkt"] = crs.to_wkt()
    attrs["spatial_ref"] = attrs.get("crs_wkt", crs.to_wkt())
    return attrs


def spatial_ref(epsg: int | str, corner: Sequence[float]) -> xr.Variable:
    """Return the CF grid-mapping variable (``spatial_ref``) of a CRS.

    Parameters
    ----------
    epsg : int or str
        EPSG code, or the full CRS as WKT (from a sidecar).
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
    if isinstance(epsg, int):
        attrs["epsg"] = int(epsg)
    return xr.Variable((), np.int64(0), attrs)


def spatial_coords(transform: Sequence[float] | None, epsg: int | str | None,
                   pixel_is_point: bool | None, height: int, width: int
                   ) -> tuple[dict[Hashable, xr.Variable], xr.Coordinates | None]:
    """Build ``x``/``y`` (or ``xc``/``yc``) and ``spatial_ref`` coordinates.

    Parameters
    ----------
    transform : sequence of float or None
        As stored by Rumi (rasterio order).
    epsg : int, str or None
        EPSG code, or WKT of a CRS a sidecar keeps.
    pixel_is_point : bool or None
    height, width : int

    Returns
    -------
    variables : dict of xarray.Variable
        ``x``, ``y`` and ``spatial_ref``; empty when the file has no
        transform (no fake coordinates). Without a CRS, ``spatial_ref``
        holds only the ``GeoTransform``.
    indexed : xarray.Coordinates or None
        Lazy 2-D ``xc``/``yc`` with their transform index, for rotated grids.
    """
    if transform is None:
        return {}, None
    corner = corner_transform(transform, bool(pixel_is_point))
    if epsg is None:
        # A grid without a CRS, as rioxarray reads GDAL's: x/y, and a grid mapping
        # holding the GeoTransform only (no crs_wkt: no CRS is claimed).
        x_attrs: dict[str, str] = {"axis": "X"}
        y_attrs: dict[str, str] = {"axis": "Y"}
        ref = xr.Variable((), np.int64(0), {"GeoTransform": format_geotransform(corner)})
    else:
        x_attrs, y_attrs = _axis_attrs(epsg)
        ref = spatial_ref(epsg, corner)
    if is_rotated(corner):
        coords = xr.Coordinates.from_xindex(
            CoordinateTransformIndex(AffineTransform(corner, height, width)))
        coords["xc"].attrs.update(x_attrs)
        coords["yc"].attrs.update(y_attrs)
        return {GRID_MAPPING: ref}, coords
    x, y = pixel_centres(corner, height, width)
    return {"x": xr.Variable("x", x, x_attrs), "y": xr.Variable("y", y, y_attrs),
            GRID_MAPPING: ref}, None


def centre_affine(corner: Sequence[float]) -> Any:
    """Return the ``affine.Affine`` mapping integer pixel positions to pixel centres."""
    from affine import Affine

    return Affine(*(float(v) for v in corner[:6])) @ Affine.translation(0.5, 0.5)


def pixel_centres(corner: Sequence[float], height: int, width: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Return 1-D pixel-centre ``x`` and ``y`` of an axis-aligned corner transform.

    Computed exactly as rioxarray (and xarray's former rasterio backend) do,
    ``(transform @ translation(0.5, 0.5)) @ (i, 0)`` with the ``affine``
    package, so a Rumi copy of a GeoTIFF aligns with
    ``rioxarray.open_rasterio`` of it under ``join="exact"``: computing
    ``c + a * (i + 0.5)`` instead differs in the last bits whenever the pixel
    size is not binary-exact (0.0015 degrees, 300.0379266750948 m).

    Parameters
    ----------
    corner : sequence of float
        Rasterio-order transform whose origin is the corner of pixel (0, 0).
    height, width : int

    Returns
    -------
    x, y : numpy.ndarray
        float64.
    """
    centre = centre_affine(corner)
    x, _ = centre @ (np.arange(width, dtype=np.float64), np.zeros(width))
    _, y = centre @ (np.zeros(height), np.arange(height, dtype=np.float64))
    return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)


def with_sidecar(transform: Sequence[float] | None, crs: int | str | None,
                 pixel_is_point: bool | None, facts: Mapping[str, Any], where: str = ""
                 ) -> tuple[tuple[float, ...] | None, int | str | None, bool | None]:
    """Return a file's georeferencing completed by its sidecar's.

    A sidecar ``crs_wkt`` (the full CRS of one that is not exactly an EPSG
    CRS) replaces the file's EPSG code, which is only its equivalent; a
    ``geotransform`` gives the grid of a file that stores none (a CRS with
    no EPSG equivalent).

    Parameters
    ----------
    transform, crs, pixel_is_point
        As the file stores them.
    facts : mapping
        The sidecar's ``crs_wkt`` and ``geotransform``, those known
        (:meth:`rumi_xarray.conventions.sidecar.Sidecar.georef`).
    where : str

    Returns
    -------
    transform, crs, pixel_is_point
    """
    wkt = facts.get("crs_wkt")
    text = facts.get("geotransform")
    if isinstance(wkt, str) and wkt.strip():
        crs = wkt
    if transform is None and text is not None and (crs is not None or
                                                   not (isinstance(wkt, str) and wkt)):
        # With a CRS the format cannot name, or with none at all (a GDAL raster
        # with a GeoTransform and no CRS).
        corner = parse_geotransform(text, where)
        transform = shift_half_pixel(corner, +1.0) if pixel_is_point else corner
    return (None if transform is None else tuple(transform)), crs, pixel_is_point


# --- write side -----------------------------------------------------------------


@dataclass(frozen=True)
class Georeference:
    """What a written file says about its grid, and what only its sidecar can hold.

    Attributes
    ----------
    transform : tuple of float or None
        Rumi transform for the file's trailer (None when the file stores none).
    epsg : int or None
        EPSG code for the file's trailer.
    pixel_is_point : bool
    facts : dict
        Sidecar facts: ``crs_wkt`` (WKT2) for a CRS that is not exactly an
        EPSG one, and ``geotransform`` (GDAL order, corner based) when the
        file cannot hold the transform (no EPSG equivalent at all).
    """

    transform: tuple[float, ...] | None
    epsg: int | None
    pixel_is_point: bool
    facts: dict[str, Any] = field(default_factory=dict)


def georeference(da: xr.DataArray, ds: xr.Dataset | None, where: str, crs: Any = None
                  ) -> Georeference:
    """Return what the file and its sidecar store of ``da``'s georeferencing.

    ``crs``, when given, replaces whatever CRS the data carry. An EPSG CRS
    goes to the file as its code. Any other CRS is kept whole (WKT2) in the
    sidecar, so reopening gives exactly that CRS; the file then also holds
    the EPSG code pyproj finds equivalent at its default confidence (70 %),
    with a warning saying so, or, without one, no georeferencing of its own
    (the Rumi format stores EPSG codes only) and the transform in the
    sidecar. Data without a CRS whose grid is GDAL's identity (an
    ungeoreferenced TIFF read by rioxarray) are written without
    georeferencing: no CRS is invented. Data without a CRS whose grid
    mapping has a ``GeoTransform`` (GDAL rasters with a transform and no
    CRS) keep that transform in the sidecar, still without a CRS; x/y
    coordinates alone without a CRS are refused (a forgotten ``crs=``).
    """
    mapping = _grid_mapping(da, ds)
    attrs = mapping.attrs if mapping is not None else {}
    point = _area_or_point(da, ds) == "point"
    corner, source = _corner_transform(da, attrs, where)
    parsed = _data_crs(da, attrs, where, ds) if crs is None else parse_crs(crs, where)
    if corner is None and parsed is None:
        return Georeference(None, None, False)
    if parsed is None:
        if corner == IDENTITY:
            return Georeference(None, None, False)
        if corner is not None and _geotransform(attrs, where) is not None:
            # GDAL's georeferenced rasters without a CRS (its float.tif family), as
            # rioxarray reads them: a GeoTransform and no CRS. The format stores a
            # transform only with an EPSG code: the sidecar keeps it, no CRS invented.
            return Georeference(None, None, point, {"geotransform": format_geotransform(corner)})
        raise ValueError(
            f"{where}: the data have a transform (from {source}) but no CRS; pass crs= "
            f"(e.g. crs='EPSG:4326'; --crs on the command line) or set one "
            f"(.rio.write_crs(...)), or drop the x/y coordinates to write without "
            f"georeferencing")
    epsg, wkt = file_crs(parsed, where)
    if corner is None:
        raise ValueError(
            f"{where}: the data have a CRS ({parsed.name}) but no transform: give regularly "
            f"spaced 1-D x/y coordinates or a GeoTransform attribute on the grid mapping")
    _check_transform(corner, where)
    facts: dict[str, Any] = {}
    if wkt is not None:
        facts["crs_wkt"] = wkt
    if epsg is None:
        facts["geotransform"] = format_geotransform(corner)
        return Georeference(None, None, point, facts)
    if point:
        corner = shift_half_pixel(corner, +1.0)
    return Georeference(corner, epsg, point, facts)


#: GDAL's default geotransform for rasters without one (rasterio's identity).
IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)


def file_crs(parsed: Any, where: str) -> tuple[int | None, str | None]:
    """Return the EPSG code a file stores for a CRS, and its WKT2 when the code is not it.

    Parameters
    ----------
    parsed : pyproj.CRS
    where : str
        Named in the warning.

    Returns
    -------
    epsg : int or None
        The CRS's own EPSG code; else the EPSG code pyproj finds equivalent
        at its default confidence (70 %, e.g. EPSG:5070 for ESRI:102039,
        whose definition is the same), with a warning; else None.
    wkt : str or None
        WKT2 (2019) of a CRS that is not exactly an EPSG one, for the sidecar.
    """
    authority = parsed.to_authority(min_confidence=100)
    if authority is not None and authority[0] == "EPSG":
        return int(authority[1]), None
    wkt = parsed.to_wkt("WKT2_2019")
    label = ":".join(authority) if authority else repr(parsed.name)
    code = parsed.to_epsg()
    if code is not None:
        warnings.warn(
            f"{where}: the CRS {label} has no EPSG code of its own; pyproj finds EPSG:{code} "
            f"equivalent, which the file stores (the Rumi format holds EPSG codes); the full "
            f"CRS is kept in the sidecar, so reopening gives {label} back",
            UserWarning, stacklevel=_caller_level())
        return int(code), wkt
    warnings.warn(
        f"{where}: the CRS {label} has no EPSG equivalent pyproj is confident of; the Rumi "
        f"format holds EPSG codes only, so the CRS (WKT2) and the transform are kept in the "
        f"sidecar ({where}.aux.json) and the file itself stores no georeferencing",
        UserWarning, stacklevel=_caller_level())
    return None, wkt


def crs_fields(crs_wkt: str) -> dict[str, Any]:
    """Return STAC projection fields of a CRS that is not exactly an EPSG one.

    Parameters
    ----------
    crs_wkt : str

    Returns
    -------
    dict
        ``proj:code`` (the CRS's own ``AUTHORITY:CODE`` such as
        ``"ESRI:102039"``, None without one), ``proj:wkt2`` and
        ``proj:projjson``, as the projection extension defines them.
    """
    import json

    parsed = parse_crs(crs_wkt, "")
    authority = parsed.to_authority(min_confidence=100)
    return {"proj:code": ":".join(authority) if authority else None,
            "proj:wkt2": parsed.to_wkt("WKT2_2019"),
            "proj:projjson": json.loads(parsed.to_json())}


def item_crs(crs: Any, where: str) -> tuple[int | None, str | None]:
    """Return the EPSG code and (when not exactly EPSG) the WKT2 of a CRS read from STAC.

    Parameters
    ----------
    crs : str, int or mapping
        ``proj:code``, ``proj:epsg``, ``proj:wkt2`` or ``proj:projjson``.
    where : str

    Returns
    -------
    epsg : int or None
        The CRS's EPSG code, or the equivalent pyproj finds at its default
        confidence (what :func:`file_crs` stores in a file), or None.
    wkt : str or None
        WKT2 of a CRS that is not exactly an EPSG one.
    """
    import json

    if isinstance(crs, (int, np.integer)):
        return int(crs), None
    parsed = parse_crs(json.dumps(crs) if isinstance(crs, Mapping) else crs, where)
    authority = parsed.to_authority(min_confidence=100)
    if authority is not None and authority[0] == "EPSG":
        return int(authority[1]), None
    code = parsed.to_epsg()
    return (None if code is None else int(code)), parsed.to_wkt("WKT2_2019")


def _caller_level() -> int:
    """Return the stacklevel of the first frame outside rumi_xarray and xarray."""
    import sys

    frame = sys._getframe(2)
    level = 3
    while frame.f_back is not None and frame.f_globals.get("__name__", "").partition(".")[0] in (
            "rumi_xarray", "xarray"):
        frame = frame.f_back
        level += 1
    return level


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

    A known transform is kept as given, bit for bit: the ``GeoTransform`` of
    the grid mapping (or rioxarray's ``transform`` attribute) when the 1-D
    x/y coordinates are its pixel centres, or a window or stride of them
    (the data were sliced after opening: the origin moves by whole pixels,
    the pixel size stays). Only coordinates that no known transform explains
    (reassigned, or none known) define the grid, as rioxarray's
    ``rio.transform(recalc=True)`` does. Recomputing the pixel size from
    the coordinates, ``(x[-1] - x[0]) / (n - 1)``, would change its last
    bits whenever it is not binary-exact, and then the copy no longer aligns
    with its source under ``join="exact"``.
    """
    geo = _geotransform(attrs, where)
    if geo is None:
        geo = _transform_attr(da)
    xs = _axis(da, "x")
    ys = _axis(da, "y")
    if xs is not None and ys is not None and (xs.size > 1 or ys.size > 1 or geo is not None):
        if geo is not None and (geo[1] != 0.0 or geo[3] != 0.0):
            raise ValueError(f"{where}: the GeoTransform is rotated but x/y are 1-D "
                             f"coordinates; drop one or the other")
        if geo is not None:
            window = _window_of(geo, xs, ys)
            if window is not None:
                return window, "the GeoTransform attribute"
        a = _spacing(xs, "x", where, None if geo is None else geo[0])
        e = _spacing(ys, "y", where, None if geo is None else geo[4])
        # rioxarray's transform(recalc=True): translation(left, top) * scale(a, e).
        left = float(xs[0]) - a / 2.0
        top = float(ys[0]) - e / 2.0
        return (a, 0.0, left, 0.0, e, top), "the x/y coordinates"
    if geo is not None:
        _check_2d_coords(da, geo, where)
        return geo, "the GeoTransform attribute"
    if xs is not None or ys is not None:
        raise ValueError(f"{where}: cannot derive a transform from one pixel along x or y "
                         f"without a GeoTransform attribute")
    return None, ""


def _transform_attr(da: xr.DataArray) -> tuple[float, ...] | None:
    """Return rioxarray's ``transform`` attribute (rasterio order), when present."""
    value = da.attrs.get("transform")
    if isinstance(value, (list, tuple)) and len(value) >= 6:
        try:
            return tuple(float(v) for v in value[:6])
        except (TypeError, ValueError):
            return None
    return None


def _window_of(geo: tuple[float, ...], xs: np.ndarray, ys: np.ndarray
               ) -> tuple[float, ...] | None:
    """Return ``geo`` moved to the window/stride the coordinates select, or None.

    The coordinates match when they are the pixel centres of ``geo`` at
    whole-pixel offsets and a whole-pixel stride, to a millionth of a pixel
    (coordinates stored as float32 are not held to that: they define the
    grid themselves). The unsliced grid returns ``geo`` itself, untouched.
    """
    a, _, c, _, e, f = geo
    if a == 0 or e == 0 or not all(math.isfinite(v) for v in geo):
        return None
    start_x, step_x = _offsets(xs, a, c)
    start_y, step_y = _offsets(ys, e, f)
    if start_x is None or start_y is None or step_x is None or step_y is None:
        return None
    if (start_x, start_y, step_x, step_y) == (0, 0, 1, 1):
        return geo
    from affine import Affine

    # A stride of n makes pixels n times as large, centred on the selected ones: the
    # corner is half a new pixel before the first selected centre.
    moved = (Affine(*geo) @ Affine.translation(start_x + 0.5 - step_x / 2,
                                               start_y + 0.5 - step_y / 2)
             @ Affine.scale(step_x, step_y))
    return tuple(float(v) for v in tuple(moved)[:6])


def _offsets(values: np.ndarray, size: float, origin: float) -> tuple[int | None, int | None]:
    """Return the first pixel index and the stride of centres along one axis, or Nones."""
    v = values.astype(np.float64)
    position = (v - origin) / size - 0.5
    index = np.rint(position)
    if not np.all(np.isfinite(position)) or float(np.max(np.abs(position - index))) > 1e-6:
        return None, None
    steps = np.diff(index)
    step = int(steps[0]) if steps.size else 1
    if step == 0 or (steps.size and not np.all(steps == step)):
        return None, None
    return int(index[0]), step


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


def _data_crs(da: xr.DataArray, attrs: dict[Hashable, Any], where: str,
              ds: xr.Dataset | None = None) -> Any:
    """Return the data's CRS (pyproj), None without one.

    From the grid mapping's attributes, else rioxarray's view of the variable,
    else of the Dataset it came from (its global ``crs`` attribute).
    """
    for key in ("crs_wkt", "spatial_ref"):
        text = attrs.get(key)
        if isinstance(text, str) and text.strip():
            parsed = parse_crs(text, where)
            code = attrs.get("epsg")
            # WKT written without its identifier, beside the code it was made from.
            if code is not None and parsed.to_authority(min_confidence=100) is None:
                by_code = parse_crs(code, where)
                if by_code.equals(parsed):
                    return by_code
            return parsed
    code = attrs.get("epsg")
    if code is not None:
        return parse_crs(code, where)
    crs = _rio_crs(da)
    if crs is None and ds is not None:
        # A Dataset-wide CRS (a global ``crs`` attribute, as some netCDF products
        # carry it): what ``ds.rio.crs`` finds.
        crs = _rio_crs(ds)
        if crs is None and isinstance(ds.attrs.get("crs"), (str, int)):
            crs = ds.attrs["crs"]
    return None if crs is None else parse_crs(crs, where)


def parse_crs(crs: Any, where: str) -> Any:
    """Return a CRS given in any form pyproj reads as a ``pyproj.CRS``.

    Raises
    ------
    ValueError
        pyproj cannot parse it.
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        return CRS.from_user_input(int(crs) if isinstance(crs, np.integer) else crs)
    except CRSError as exc:
        raise ValueError(f"{where}: cannot parse the CRS: {exc}") from exc


def _rio_crs(da: xr.DataArray | xr.Dataset) -> Any:
    """Return rioxarray's view of the CRS, when rioxarray is installed."""
    try:
        import rioxarray  # noqa: F401  (registers the .rio accessor)
    except ImportError:
        return None
    try:
        return da.rio.crs
    except Exception:  # rioxarray raises various errors on non-geospatial arrays
        return None
