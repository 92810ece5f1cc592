"""The output grid of a STAC load (an odc-geo GeoBox), and when no reprojection is needed.

The grid follows odc-stac's rules, so the same arguments give the same grid
in both libraries:

- ``geobox=`` (or ``like=``, anything with ``.odc.geobox``) is used as it is;
- otherwise the CRS and resolution are the ones given, else those of the
  grid most Items share (with that grid's pixel anchor, unless both CRS and
  resolution are given: then pixel edges snap to multiples of the
  resolution);
- the extent is ``bbox`` (lon/lat) or ``geopolygon`` when given, else the
  union of the Items' footprints; when no argument is given and every Item
  has the same grid, that grid.

:func:`native_window` tells when the grid is a pixel-aligned window of the
one grid every Item shares: the load is then a plain selection of the
catalog cube, with no resampling.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rumi_xarray.errors import RumiCatalogError
from rumi_xarray.stac.parse import StacSource


def output_geobox(sources: Sequence[StacSource], *, crs: Any = None, resolution: Any = None,
                  anchor: Any = None, bbox: Sequence[float] | None = None,
                  geobox: Any = None, like: Any = None, geopolygon: Any = None) -> Any:
    """Return the output grid of a load.

    Parameters
    ----------
    sources : sequence of StacSource
    crs : str, int or CRS, optional
        Output CRS (``"EPSG:32633"``, ``32633``, a pyproj or odc-geo CRS).
    resolution : float or (x, y), optional
        Pixel size in units of the output CRS; a single number means square
        pixels with y pointing down.
    anchor : optional
        odc-geo anchor (``"edge"``, ``"center"``, or an ``XY`` fraction).
    bbox : (min lon, min lat, max lon, max lat), optional
    geobox : odc.geo.geobox.GeoBox, optional
        The exact output grid; excludes every other grid argument.
    like : xarray object, optional
        Use its ``.odc.geobox``.
    geopolygon : odc.geo.geom.Geometry or GeoJSON dict, optional
        Extent (GeoJSON dicts are lon/lat).

    Returns
    -------
    odc.geo.geobox.GeoBox

    Raises
    ------
    ValueError
        Conflicting arguments, or a CRS/resolution that cannot be derived.
    """
    from odc.geo import geom
    from odc.geo.geobox import GeoBox
    given = {name for name, value in (("crs", crs), ("resolution", resolution),
                                      ("anchor", anchor), ("bbox", bbox),
                                      ("geopolygon", geopolygon)) if value is not None}
    for name, value in (("geobox", geobox), ("like", like)):
        if value is not None:
            if given:
                raise RumiCatalogError(f"{name}= fixes the output grid: it cannot be combined with "
                                 f"{', '.join(sorted(given))}")
            return value if name == "geobox" else _like(value)
    if bbox is not None and geopolygon is not None:
        raise RumiCatalogError("pass bbox= or geopolygon=, not both")
    natives = [s.geobox for s in sources]
    first = natives[0]
    if not given and all(g == first for g in natives):
        return first
    # The grid most items share: its CRS, resolution and pixel anchor.
    counts = Counter((g.crs, g.resolution, g.anchor) for g in natives)
    (common_crs, common_res, common_anchor), _ = counts.most_common(1)[0]
    both_given = crs is not None and resolution is not None
    out_crs = common_crs if crs is None else _crs(crs)
    out_res = common_res if resolution is None else _resolution(resolution)
    if anchor is None:
        anchor = "default" if both_given else common_anchor
    if geopolygon is not None or bbox is not None:
        if geopolygon is not None:
            region = _geometry(geopolygon)
        else:
            assert bbox is not None
            west, south, east, north = (float(v) for v in bbox)
            region = geom.box(west, south, east, north, "epsg:4326")
        return GeoBox.from_geopolygon(region, resolution=out_res, crs=out_crs, anchor=anchor)
    boxes = [s.geobox.footprint(out_crs, wrapdateline=True).boundingbox for s in sources]
    return GeoBox.from_bbox(geom.bbox_union(boxes), out_crs, resolution=out_res,
                            anchor=anchor)


def _resolution(value: Any) -> Any:
    from odc.geo.types import Resolution, res_, resxy_

    if isinstance(value, Resolution):
        return value
    if isinstance(value, (tuple, list)):
        x, y = (float(v) for v in value)
        return resxy_(x, y)
    return res_(float(value))


def _crs(value: Any) -> Any:
    from odc.geo.crs import CRS

    return CRS(f"EPSG:{int(value)}" if isinstance(value, int) else value)


def _like(obj: Any) -> Any:
    import odc.geo.xr  # noqa: F401  (registers the .odc accessor)

    gbox = getattr(getattr(obj, "odc", None), "geobox", None)
    if gbox is None:
        raise RumiCatalogError("like= has no pixel grid (no .odc.geobox)")
    return gbox


def _geometry(value: Any) -> Any:
    from odc.geo.geom import Geometry

    if isinstance(value, Geometry):
        return value
    if isinstance(value, dict):
        return Geometry(value, "epsg:4326")
    interface = getattr(value, "__geo_interface__", None)
    if interface is None:
        raise RumiCatalogError(f"cannot read a geometry from {type(value).__name__!r}")
    return Geometry(interface, getattr(value, "crs", None) or "epsg:4326")


def shared_grid(sources: Sequence[StacSource]) -> bool:
    """Return whether every source has the same grid, tiles, bands and CF facts.

    Such sources stack into one catalog cube (one ``read_many`` across
    scenes per read group).

    Parameters
    ----------
    sources : sequence of StacSource

    Returns
    -------
    bool
    """
    first = sources[0]
    for s in sources[1:]:
        if (s.epsg, s.crs_wkt, s.corner, s.pixel_is_point, s.band_texts) != (
                first.epsg, first.crs_wkt, first.corner, first.pixel_is_point,
                first.band_texts):
            return False
        if (s.grid.height, s.grid.width) != (first.grid.height, first.grid.width):
            return False
        # Numbers of dates and frame layouts may differ (series files of periods):
        # the catalog cube is then ragged, read one layout per native call.
        if s.grid.stack_key != first.grid.stack_key or s.facts != first.facts:
            return False
        if (s.bounds is None) != (first.bounds is None):
            return False
    return True


def native_window(source: StacSource, gbox: Any, tol: float = 1e-6
                  ) -> tuple[slice, slice] | None:
    """Return the pixel window of ``source``'s grid that ``gbox`` is, if it is one.

    Parameters
    ----------
    source : StacSource
    gbox : odc.geo.geobox.GeoBox
    tol : float
        Tolerance on the pixel offsets, in pixels.

    Returns
    -------
    (slice, slice) or None
        Rows and columns, when ``gbox`` has the source's CRS, pixel size and
        orientation, an integer pixel offset, and lies inside the image;
        otherwise None (the load must resample or pad).
    """
    native = source.geobox
    if gbox.crs != native.crs:
        return None
    a, b, c, d, e, f = (float(v) for v in list(gbox.transform)[:6])
    na, nb, _, nd, ne, _ = (float(v) for v in list(native.transform)[:6])
    scale = max(abs(na), abs(ne))
    if max(abs(a - na), abs(b - nb), abs(d - nd), abs(e - ne)) > tol * scale:
        return None
    col, row = (~native.transform) @ (c, f)
    if abs(col - round(col)) > tol or abs(row - round(row)) > tol:
        return None
    row0, col0 = round(row), round(col)
    height, width = gbox.shape.yx
    if row0 < 0 or col0 < 0 or row0 + height > native.shape.y or col0 + width > native.shape.x:
        return None
    return slice(row0, row0 + height), slice(col0, col0 + width)


def read_levels(sources: Sequence[StacSource], gbox: Any) -> list[StacSource]:
    """Return each source as the overview level odc-stac would read for this output grid.

    odc-stac's rule (``odc.loader``'s ``pick_overview`` on odc-geo's
    ``read_shrink``): the shrink from the source's pixels to the output's
    (``compute_reproject_roi``, the smaller axis, snapped to an integer),
    then the coarsest level whose factor is not larger; full resolution when
    the output is as fine as the source, or the source has no levels.

    Parameters
    ----------
    sources : sequence of StacSource
    gbox : odc.geo.geobox.GeoBox
        The output grid.

    Returns
    -------
    list of StacSource
        The sources, those read at a level replaced by the level
        (:meth:`StacSource.at_level <rumi_xarray.stac.parse.StacSource.at_level>`).
    """
    from odc.geo.overlap import compute_reproject_roi

    from rumi_xarray.model.overviews import pick_level

    out = []
    for source in sources:
        if not source.overviews:
            out.append(source)
            continue
        shrink = compute_reproject_roi(source.geobox, gbox).read_shrink
        level = pick_level(int(shrink), [lv.factor for lv in source.overviews])
        out.append(source if level is None else source.at_level(level))
    return out
