"""STAC in: what a reader needs from each Item, read without touching the data files.

Accepts pystac Items, an ItemCollection (or anything with
``item_collection()``, such as a pystac-client search), plain dicts (Items
or a FeatureCollection), a stac-geoparquet Arrow table, or the path of a
stac-geoparquet (``.parquet``) or GeoJSON (``.json``) file. Each Item must
carry one Rumi asset (media type :data:`~rumi_xarray.stac.items.MEDIA_TYPE`,
else an href ending in ``.rumi``) with the projection extension
(``proj:code`` or ``proj:epsg``, ``proj:transform``, ``proj:shape``, on the
asset or the Item). Band names come from ``eo:bands`` (or STAC 1.1
``bands``), nodata/scale/offset/units from ``raster:bands``, and the
external header from ``rumi:header``. An Item without ``rumi:header`` (or
without band names) costs one metadata read of its file, as
:func:`rumi_xarray.catalog` makes; every Item rumi_xarray writes has both.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rumi_xarray.conventions.attributes import Attributes
from rumi_xarray.conventions.bands import BandCoords
from rumi_xarray.conventions.facts import Facts
from rumi_xarray.conventions.georef import shift_half_pixel
from rumi_xarray.conventions.sidecar import Sidecar
from rumi_xarray.errors import RumiCatalogError, RumiCatalogKeyError, RumiSourceTypeError
from rumi_xarray.model.grid import Grid
from rumi_xarray.sources.hrefs import Hrefs
from rumi_xarray.sources.location import locate
from rumi_xarray.stac import items as out

__all__ = ["StacLevel", "StacSource", "catalog_table", "item_dicts", "parse_items"]


@dataclass(frozen=True)
class StacLevel:
    """One overview level of an Item's Rumi asset (``rumi:overviews``).

    Attributes
    ----------
    factor : int
    file : str
        The level file's name, beside the asset.
    header : bytes
    """

    factor: int
    file: str
    header: bytes = field(repr=False)


@dataclass(frozen=True)
class StacSource:
    """One Rumi file as a STAC Item describes it.

    Attributes
    ----------
    item_id : str
    position : int
        Position of the Item in the input (named in errors, breaks ties).
    href : str
        Absolute path or URL of the Rumi asset.
    header : bytes
        External header (frame index).
    grid : Grid
        Frame grid parsed from the header.
    epsg : int or None
        EPSG code (for a CRS that is not exactly an EPSG one, its equivalent,
        as the file stores it), None without one.
    corner : tuple of float
        Corner-based affine transform, rasterio order (``proj:transform``).
    pixel_is_point : bool
    band_texts : tuple of str
        Band texts as stored in the file.
    seconds : tuple of int
        POSIX seconds of each stored time step (interval starts).
    bounds : tuple of (int, int) or None
        Interval bounds, for files labelled with intervals.
    facts : Facts
        Nodata, scale, offset, units where known (``raster:bands``).
    crs_wkt : str or None
        The full CRS (WKT2) when it is not exactly an EPSG one (``proj:wkt2``,
        ``proj:projjson`` or a non-EPSG ``proj:code``).
    properties : mapping
        The Item's properties (for grouping by a property).
    attributes : Attributes
        The file's attributes (``rumi:attributes``; none without it).
    overviews : tuple of StacLevel
        The file's overview levels (``rumi:overviews``), finest first.
    overview : (int, int), optional
        ``(level, factor)`` when this source is one of those levels
        (:meth:`at_level`), not the file itself.
    """

    item_id: str
    position: int
    href: str
    header: bytes = field(repr=False)
    grid: Grid = field(repr=False)
    epsg: int | None
    corner: tuple[float, ...]
    pixel_is_point: bool
    band_texts: tuple[str, ...]
    seconds: tuple[int, ...]
    bounds: tuple[tuple[int, int], ...] | None = None
    facts: Facts = field(default_factory=Facts)
    crs_wkt: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict, repr=False)
    attributes: Attributes = field(default_factory=Attributes, repr=False)
    overviews: tuple[StacLevel, ...] = field(default=(), repr=False)
    overview: tuple[int, int] | None = None

    def at_level(self, level: int) -> StacSource:
        """Return this source read at its overview level ``level``: the level file.

        Parameters
        ----------
        level : int

        Returns
        -------
        StacSource
            Its href, header, grid and transform are the level's (scaled as
            GDAL scales them); labels and facts stay.
        """
        from dataclasses import replace

        from rumi_xarray.conventions.sidecar import sibling
        from rumi_xarray.model.overviews import level_transform

        chosen = self.overviews[level]
        grid = _grid(chosen.header, f"{self.describe()} overview level {level}")
        corner = level_transform(self.corner, (self.grid.height, self.grid.width),
                                 (grid.height, grid.width))
        return replace(self, href=sibling(self.href, chosen.file), header=chosen.header,
                       grid=grid, corner=corner, overviews=(),
                       overview=(level, chosen.factor))

    @property
    def labels(self) -> BandCoords:
        """Return the parsed band texts (short names, common names, wavelengths)."""
        return BandCoords.from_texts(self.band_texts)

    @property
    def geobox(self) -> Any:
        """Return the file's pixel grid as an ``odc.geo.geobox.GeoBox``."""
        from affine import Affine
        from odc.geo.geobox import GeoBox

        return GeoBox((self.grid.height, self.grid.width), Affine(*self.corner[:6]),
                      self.crs_wkt if self.crs_wkt is not None else f"EPSG:{self.epsg}")

    @property
    def stored_transform(self) -> tuple[float, ...]:
        """Return the transform as the Rumi file stores it (centre origin for PixelIsPoint)."""
        if self.pixel_is_point:
            return shift_half_pixel(self.corner, +1.0)
        return tuple(self.corner)

    @property
    def nodata(self) -> float | None:
        """Return the nodata value, or None when unknown."""
        value = self.facts.nodata
        return None if value is None else float(value)

    def describe(self) -> str:
        """Return ``STAC item 'id' (href)`` for messages."""
        from rumi_xarray.model.cube import source_name

        return f"STAC item {self.item_id!r} ({source_name(self.href)})"


# --- inputs -> Item dictionaries ----------------------------------------------------


def item_dicts(items: Any, search: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Return STAC Item dictionaries, Rumi hrefs resolved and judged, from any accepted input.

    Each Item's Rumi asset href is resolved against where its Items came from
    (the JSON or stac-geoparquet file, an Item's own ``self`` link, or this
    process's working directory for Items in memory without one) and judged
    by :class:`~rumi_xarray.sources.hrefs.Hrefs`: a catalog read from a remote
    location may not send a reader to local files or private addresses.

    Parameters
    ----------
    items : pystac.Item, pystac.ItemCollection, dict, pyarrow.Table, str, os.PathLike
        or iterable of Items and dicts
        See the module documentation.

    Returns
    -------
    list of dict

    Raises
    ------
    RumiHrefError
        A Rumi asset's href is refused (before anything is opened).
    """
    search = {k: v for k, v in dict(search or {}).items() if v is not None}
    if isinstance(items, (str, os.PathLike)):
        return _from_file(os.fspath(items), search)
    if _is_arrow_table(items):
        from rumi_xarray.stac.geoparquet import read_geoparquet

        return with_hrefs(read_geoparquet(items, **search), catalog_hrefs(None))
    found = _item_dicts(items)
    return [d for d in found if _matches(d, search)] if search else found


def catalog_hrefs(location: str | None, folder: bool = False) -> Hrefs:
    """Return the rules for the hrefs of Items read from ``location`` (None: in memory).

    Parameters
    ----------
    location : str or None
        The Items file or stac-geoparquet file or folder.
    folder : bool, default False

    Returns
    -------
    Hrefs
    """
    from rumi_xarray import options

    return Hrefs.of_catalog(location, folder=folder, allowed=options.option("allowed_hrefs"))


def with_hrefs(items: list[dict[str, Any]], hrefs: Hrefs) -> list[dict[str, Any]]:
    """Resolve and judge the Rumi asset href of every Item by its catalog's rules.

    Parameters
    ----------
    items : list of dict
        STAC Items (changed in place: their Rumi asset gets the resolved href).
    hrefs : Hrefs

    Returns
    -------
    list of dict
        ``items``.

    Raises
    ------
    RumiHrefError
        An href is refused; nothing has been opened.
    """
    for item in items:
        assets = item.get("assets")
        if not isinstance(assets, Mapping):
            continue
        try:
            key, asset = rumi_asset(item)
        except RumiCatalogKeyError:
            continue  # parse_item names the Item without a Rumi asset
        href = asset.get("href")
        if href is None or href == "":
            continue  # parse_item names the asset without an href
        asset["href"] = hrefs.follow(href, f"STAC item {item.get('id')!r} (asset {key!r})")
        item["assets"] = {**assets, key: asset}
    return items


def _matches(item: Mapping[str, Any], search: Mapping[str, Any]) -> bool:
    """Apply ``datetime=`` and ``query=`` to an Item given as a dict (a table filters itself)."""
    import pandas as pd

    from rumi_xarray.stac.geoparquet import _OPS, datetime_bounds

    props = item.get("properties") or {}
    if search.get("datetime") is not None:
        lo, hi = datetime_bounds(search["datetime"])

        def when(key: str) -> Any:
            value = props.get(key)
            if value is None:
                return None
            t = pd.Timestamp(value)
            return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")

        start = when("start_datetime") or when("datetime")
        end = when("end_datetime") or when("datetime")
        if start is None or end is None:
            return False
        if (lo is not None and end < lo) or (hi is not None and start > hi):
            return False
    for prop, conditions in dict(search.get("query") or {}).items():
        value = props.get(prop)
        if not isinstance(conditions, Mapping):
            conditions = {"eq": conditions}
        for op, want in conditions.items():
            if op == "in":
                ok = value in list(want)
            elif op in _OPS:
                ok = value is not None and bool(getattr(value, _OPS[op])(want))
            else:
                raise RumiCatalogError(f"query= operator {op!r} is not one of "
                                       f"{sorted([*_OPS, 'in'])}")
            if not ok:
                return False
    return True


def _item_dicts(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, (str, os.PathLike)):
        return _from_file(os.fspath(items), {})
    if isinstance(items, Mapping):
        if items.get("type") == "FeatureCollection":
            return [_own_hrefs(dict(f)) for f in items.get("features", [])]
        return [_own_hrefs(dict(items))]
    if _is_arrow_table(items):
        from rumi_xarray.stac.geoparquet import read_geoparquet

        return with_hrefs(read_geoparquet(items), catalog_hrefs(None))
    if hasattr(items, "to_dict") and hasattr(items, "assets"):  # one pystac.Item
        return [_pystac_item(items)]
    if hasattr(items, "item_collection") and callable(items.item_collection):
        items = items.item_collection()  # a pystac-client search
    out_: list[dict[str, Any]] = []
    for entry in items:
        if hasattr(entry, "to_dict") and hasattr(entry, "assets"):
            out_.append(_pystac_item(entry))
        elif isinstance(entry, Mapping):
            out_.append(_own_hrefs(dict(entry)))
        else:
            raise RumiSourceTypeError(f"cannot read a STAC Item from {type(entry).__name__!r}: "
                                      "expected a pystac.Item or a dict")
    return out_


def _is_arrow_table(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyarrow") and hasattr(obj, "schema")


def _from_file(path: str, search: Mapping[str, Any]) -> list[dict[str, Any]]:
    where = locate(path)
    # A URL's query (a signed URL's) is not part of its name; a local folder's "?" is.
    lowered = (path.split("?", 1)[0] if where.url else path).lower()
    # A GDAL virtual path is opened as the URL it names.
    opened = where.target if where.url and where.target else path
    folder = where.local and os.path.isdir(path)
    if lowered.endswith(tuple(_suffixes())) or folder:
        from rumi_xarray.stac.geoparquet import read_geoparquet

        return with_hrefs(read_geoparquet(opened, **search), catalog_hrefs(opened, folder))
    if lowered.endswith((".json", ".geojson")):
        import fsspec

        with fsspec.open(opened, "rt", encoding="utf-8") as f:
            content = json.load(f)
        # Hrefs resolve against the file itself (the Items' self links could say anything).
        found = with_hrefs(_plain_dicts(content), catalog_hrefs(opened))
        rest = {k: v for k, v in search.items() if k != "bbox"}
        return [d for d in found if _matches(d, rest)] if rest else found
    raise RumiCatalogError(f"{path}: open_stac reads stac-geoparquet (.parquet) or GeoJSON (.json) "
                     f"files; pass Items for anything else")


def _plain_dicts(content: Any) -> list[dict[str, Any]]:
    """Return the Items of a GeoJSON document (an Item or a FeatureCollection)."""
    if isinstance(content, Mapping) and content.get("type") == "FeatureCollection":
        features = content.get("features") or []
    else:
        features = content if isinstance(content, list) else [content]
    found = []
    for feature in features:
        if not isinstance(feature, Mapping):
            raise RumiCatalogError(f"a STAC Items file holds {type(feature).__name__!r} "
                                   f"where an Item (a JSON object) belongs")
        found.append(dict(feature))
    return found


def _suffixes() -> tuple[str, ...]:
    from rumi_xarray.stac.geoparquet import SUFFIXES

    return SUFFIXES


def _pystac_item(item: Any) -> dict[str, Any]:
    # Raw hrefs, resolved by our rules against the Item's own location (its self href).
    plain = item.to_dict(transform_hrefs=False)
    return with_hrefs([plain], catalog_hrefs(item.get_self_href() or None))[0]


def _own_hrefs(item: dict[str, Any]) -> dict[str, Any]:
    """Resolve an Item's Rumi href against its ``self`` link (this process's folder without)."""
    base = next((link.get("href") for link in item.get("links") or []
                 if isinstance(link, Mapping) and link.get("rel") == "self"), None)
    return with_hrefs([item], catalog_hrefs(base if isinstance(base, str) and base else None)
                      )[0]


# --- Item dictionaries -> sources -----------------------------------------------------


def parse_items(items: Any, storage_options: dict[str, Any] | None = None,
                search: Mapping[str, Any] | None = None) -> list[StacSource]:
    """Return the Rumi source of every Item.

    Parameters
    ----------
    items : any accepted input
        See :func:`item_dicts`.
    storage_options : dict, optional
        fsspec options, for the metadata read of Items without a header (and
        for a remote table).
    search : mapping, optional
        ``bbox``, ``datetime``, ``query`` selections: pushed down to the
        Parquet reader for a stac-geoparquet table (row groups that cannot
        match are never read); ``datetime`` and ``query`` applied to Items
        given otherwise.

    Returns
    -------
    list of StacSource
        In input order.

    Raises
    ------
    RumiCatalogError
        No Items; missing projection information; times or bands that do
        not match the header.
    RumiCatalogKeyError
        An Item without a Rumi asset.
    """
    search = dict(search or {})
    if storage_options and isinstance(items, (str, os.PathLike)):
        search["storage_options"] = storage_options
    plain = item_dicts(items, search)
    if not plain:
        raise RumiCatalogError("no STAC items to load (the search or table is empty"
                               + (", or none matches bbox=/datetime=/query=)" if search
                                  else ")"))
    return [parse_item(d, i, storage_options) for i, d in enumerate(plain)]


def rumi_asset(item: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Return ``(key, asset)`` of an Item's Rumi asset.

    Parameters
    ----------
    item : dict
        A STAC Item.

    Returns
    -------
    tuple

    Raises
    ------
    RumiCatalogKeyError
        The Item has no asset of type ``application/vnd.rumi`` and none whose
        href ends in ``.rumi``.
    """
    assets = item.get("assets") or {}
    for key, asset in assets.items():
        media = str(asset.get("type") or "").split(";", 1)[0].strip().lower()
        if media == out.MEDIA_TYPE:
            return key, dict(asset)
    for key, asset in assets.items():
        href = str(asset.get("href") or "").split("?", 1)[0].lower()
        if href.endswith(".rumi"):
            return key, dict(asset)
    listed = ", ".join(f"{k!r} ({a.get('type') or 'no type'})" for k, a in assets.items())
    raise RumiCatalogKeyError(
        f"STAC item {item.get('id')!r} has no Rumi asset (type {out.MEDIA_TYPE!r} or an "
        f"href ending in .rumi); its assets: {listed or 'none'}")


def parse_item(item: Mapping[str, Any], position: int,
               storage_options: dict[str, Any] | None = None) -> StacSource:
    """Return the Rumi source an Item describes.

    Parameters
    ----------
    item : dict
    position : int
    storage_options : dict, optional

    Returns
    -------
    StacSource
    """
    item_id = str(item.get("id") or f"#{position}")
    key, asset = rumi_asset(item)
    href = asset.get("href")
    if not isinstance(href, str) or not href:
        raise RumiCatalogError(f"STAC item {item_id!r}: asset {key!r} has no href")
    if "\x00" in href:
        raise RumiCatalogError(f"STAC item {item_id!r}: asset {key!r} href {href!r} is not a "
                               f"path or URL (it holds a NUL byte)")
    where = f"STAC item {item_id!r} (asset {key!r})"
    properties = dict(item.get("properties") or {})
    (epsg, crs_wkt), corner, shape = _projection(asset, properties, where)
    fetched: Any = None
    header_text = asset.get(out.HEADER_FIELD)
    if header_text is None:
        fetched = _fetch(href, storage_options)
        header = bytes(fetched.header)
    else:
        try:
            header = base64.b64decode(str(header_text), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RumiCatalogError(f"{where}: {out.HEADER_FIELD} is not base64: {exc}"
                                   ) from exc
    grid = _grid(header, where)
    if shape != (grid.height, grid.width):
        raise RumiCatalogError(f"{where}: proj:shape {list(shape)} does not match the header "
                               f"({grid.height} x {grid.width})")
    texts = _band_texts(asset)
    if texts is None:
        fetched = fetched or _fetch(href, storage_options)
        texts = [str(b) for b in fetched.bands or []]
    if len(texts) != grid.bands:
        raise RumiCatalogError(f"{where}: {len(texts)} bands described, the header has "
                               f"{grid.bands}")
    try:
        described = Attributes.from_json(asset.get(out.ATTRIBUTES_FIELD))
    except ValueError as exc:
        raise RumiCatalogError(f"{where}: {exc}") from None
    seconds, bounds = _times(properties, where)
    if len(seconds) != grid.time_count:
        raise RumiCatalogError(
            f"{where}: {len(seconds)} time label(s) for {grid.time_count} time steps in the "
            f"header (several steps are listed in the property {out.TIMES_FIELD!r})")
    return StacSource(item_id=item_id, position=position, href=href, header=header, grid=grid,
                      epsg=epsg, corner=corner,
                      pixel_is_point=bool(asset.get(out.POINT_FIELD) or False),
                      band_texts=tuple(texts), seconds=tuple(seconds), bounds=bounds,
                      facts=_facts(asset, where, grid.dtype), properties=properties,
                      crs_wkt=crs_wkt, attributes=described,
                      overviews=_overviews(asset, where, grid))


def _overviews(asset: Mapping[str, Any], where: str, grid: Grid) -> tuple[StacLevel, ...]:
    """Return the overview levels an asset lists (``rumi:overviews``), checked."""
    from rumi_xarray.conventions.sidecar import OverviewLevel

    content = asset.get(out.OVERVIEWS_FIELD)
    if content is None:
        return ()
    found = []
    try:
        if not isinstance(content, Mapping) or not isinstance(content.get("levels"), list):
            raise ValueError("not an object with levels")
        for level in content["levels"]:
            # The header is base64 here (as rumi:header), hex in a sidecar.
            parsed = OverviewLevel.from_json({k: v for k, v in level.items() if k != "header"}
                                             | {"labels_digest": ""})
            header = base64.b64decode(str(level["header"]), validate=True)
            found.append(StacLevel(parsed.factor, parsed.file, header))
            level_grid = _grid(header, f"{where} overview {parsed.factor}")
            if ((level_grid.height, level_grid.width) != parsed.shape
                    or not level_grid.same_layout(grid)):
                raise ValueError(f"level {parsed.factor}'s header does not match its shape "
                                 f"or the file's bands, times and sample type")
    except (ValueError, TypeError, KeyError, binascii.Error) as exc:
        raise RumiCatalogError(f"{where}: {out.OVERVIEWS_FIELD} is not what rx.to_stac "
                               f"writes ({exc})") from None
    factors = [lv.factor for lv in found]
    if any(b <= a for a, b in itertools.pairwise(factors)):
        raise RumiCatalogError(f"{where}: {out.OVERVIEWS_FIELD} factors {factors} are not "
                               f"increasing")
    return tuple(found)


def _fetch(href: str, storage_options: dict[str, Any] | None) -> Any:
    from rumi_xarray.native import reads
    from rumi_xarray.sources import resolve

    # The file is the catalog's, not one the caller named: errors quote nothing of it.
    return reads.info(resolve.resolve(href, storage_options=storage_options), opaque=True)


def _grid(header: bytes, where: str) -> Grid:
    from rumi_xarray.native import reads

    try:
        return Grid.from_metadata(reads.header_info(header))
    except (ValueError, TypeError) as exc:
        raise RumiCatalogError(f"{where}: {out.HEADER_FIELD} is not a Rumi header: {exc}"
                               ) from exc


def _field(asset: Mapping[str, Any], properties: Mapping[str, Any], name: str) -> Any:
    value = asset.get(name)
    return properties.get(name) if value is None else value


def _projection(asset: Mapping[str, Any], properties: Mapping[str, Any], where: str
                ) -> tuple[tuple[int | None, str | None], tuple[float, ...], tuple[int, int]]:
    code = _field(asset, properties, "proj:code")
    epsg = _field(asset, properties, "proj:epsg")
    crs_text = (_field(asset, properties, "proj:wkt2")
                or _field(asset, properties, "proj:projjson"))
    # The full CRS wins over a code: proj:code names ESRI/IGNF CRSs too, and the
    # WKT2/PROJJSON is what describes a CRS without one.
    crs = crs_text if crs_text is not None else code if code is not None else epsg
    transform = _field(asset, properties, "proj:transform")
    shape = _field(asset, properties, "proj:shape")
    missing = [name for name, value in (("proj:code", crs), ("proj:transform", transform),
                                        ("proj:shape", shape)) if value is None]
    if missing:
        raise RumiCatalogError(
            f"{where} lacks projection information ({', '.join(missing)}); Rumi items need "
            f"the projection extension (proj:code, proj:transform, proj:shape) to be placed "
            f"on a grid: write them with rumi_xarray.to_stac")
    try:
        values = [float(v) for v in transform]
        rows, cols = (int(v) for v in shape)
    except (TypeError, ValueError) as exc:
        raise RumiCatalogError(f"{where}: proj:transform {transform!r} or proj:shape "
                               f"{shape!r} is malformed") from exc
    if len(values) not in (6, 9) or (len(values) == 9 and values[6:] != [0.0, 0.0, 1.0]):
        raise RumiCatalogError(f"{where}: proj:transform {transform!r} is not an affine "
                               f"transform (6 or 9 numbers)")
    if not all(math.isfinite(v) for v in values):
        raise RumiCatalogError(f"{where}: proj:transform {transform!r} holds a number that "
                               f"is not finite")
    if values[0] * values[4] - values[1] * values[3] == 0:
        raise RumiCatalogError(f"{where}: proj:transform {transform!r} has a zero pixel size")
    if rows <= 0 or cols <= 0:
        raise RumiCatalogError(f"{where}: proj:shape {shape!r} is not a size in pixels")
    return _crs(crs, where), tuple(values[:6]), (rows, cols)


def _crs(crs: Any, where: str) -> tuple[int | None, str | None]:
    from rumi_xarray.conventions.georef import item_crs

    try:
        return item_crs(crs, where)
    except ValueError as exc:
        raise RumiCatalogError(str(exc)) from exc


def _file_grid(s: StacSource) -> tuple[tuple[float, ...] | None, int | None]:
    """Return the transform and EPSG code the source's file stores (none without a code)."""
    if s.epsg is None:
        return None, None
    return s.stored_transform, s.epsg


def _grid_facts(s: StacSource) -> dict[str, Any]:
    """Return the sidecar georeferencing facts of a source (as its catalog row holds them)."""
    from rumi_xarray.conventions.georef import format_geotransform

    if s.crs_wkt is None:
        return {}
    facts: dict[str, Any] = {"crs_wkt": s.crs_wkt}
    if s.epsg is None:
        facts["geotransform"] = format_geotransform(s.corner)
    return facts


def _band_texts(asset: Mapping[str, Any]) -> list[str] | None:
    for name in ("eo:bands", "bands"):
        described = asset.get(name)
        if isinstance(described, list) and described and all(
                isinstance(b, Mapping) and (b.get("description") or b.get("name"))
                for b in described):
            return [str(b.get("description") or b.get("name")) for b in described]
    return None


def _times(properties: Mapping[str, Any], where: str
           ) -> tuple[list[int], tuple[tuple[int, int], ...] | None]:
    listed = properties.get(out.TIMES_FIELD)
    if listed is not None:
        entries = list(listed)
        if entries and all(isinstance(e, (list, tuple)) for e in entries):
            pairs = tuple((_seconds(a, where), _seconds(b, where)) for a, b in entries)
            return [a for a, _ in pairs], pairs
        return [_seconds(e, where) for e in entries], None
    single = properties.get("datetime")
    if single is not None:
        return [_seconds(single, where)], None
    start, end = properties.get("start_datetime"), properties.get("end_datetime")
    if start is not None and end is not None:
        pair = (_seconds(start, where), _seconds(end, where))
        return [pair[0]], (pair,)
    raise RumiCatalogError(f"{where} has no datetime (nor start_datetime and end_datetime)")


def _seconds(value: Any, where: str) -> int:
    if isinstance(value, (int, float, np.number)):
        # pd.Timestamp would read a number as nanoseconds since 1970: STAC times are
        # RFC 3339 text, and a number without units is refused, as on the write side.
        raise RumiCatalogError(f"{where}: the time {value!r} is a number without units; "
                               f"STAC times are RFC 3339 text (e.g. '2024-05-01T10:30:00Z')")
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError) as exc:
        raise RumiCatalogError(f"{where}: cannot read the time {value!r}: {exc}") from exc
    if stamp.tzinfo is None:
        stamp = stamp.tz_localize("UTC")
    # Rumi labels whole seconds; a finer STAC time is rounded down to its second.
    return math.floor(stamp.timestamp())


def _facts(asset: Mapping[str, Any], where: str, dtype: np.dtype) -> Facts:
    """Return nodata/scale/offset/units of the bands (Rumi applies one set per file)."""
    raster = asset.get("raster:bands")
    common = asset.get("bands")
    try:
        if isinstance(raster, list) and raster:
            return Facts.from_raster_bands(raster, dtype)
        if isinstance(common, list) and common:
            return Facts.from_raster_bands(common, dtype, spelling="bands")
    except ValueError as exc:
        raise RumiCatalogError(f"{where}: {exc}") from None
    return Facts()


# --- sources -> catalog table ------------------------------------------------------


def catalog_table(sources: Iterable[StacSource]) -> pd.DataFrame:
    """Return the catalog table (:func:`rumi_xarray.catalog`'s columns) of sources.

    Parameters
    ----------
    sources : iterable of StacSource

    Returns
    -------
    pandas.DataFrame
        One row per source, columns :data:`rumi_xarray.catalogs.table.COLUMNS`;
        what ``rx.catalog`` would read from the files, built without a request.
    """
    from rumi_xarray.catalogs.table import COLUMNS, catalog_row

    rows = [catalog_row(s.href, s.header, s.grid, s.seconds, s.bounds, s.band_texts,
                        *_file_grid(s), s.pixel_is_point,
                        Sidecar(s.facts, **_grid_facts(s), attributes=s.attributes))
            for s in sources]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def select_bands(sources: Sequence[StacSource], wanted: str | Sequence[str] | None
                 ) -> tuple[list[str], list[tuple[int, ...]]]:
    """Return output band names and, per source, the stored band of each.

    Parameters
    ----------
    sources : sequence of StacSource
    wanted : str, sequence of str or None
        By short name, stored text or STAC common name; None: the first
        source's bands.

    Returns
    -------
    tuple
        The names, and per source the stored band index of each name.

    Raises
    ------
    RumiCatalogError
        No band, or a band named twice.
    RumiCatalogKeyError
        A source lacks a band (naming it).
    """
    first = sources[0].labels
    names = list(first.names) if wanted is None else (
        [wanted] if isinstance(wanted, str) else [str(b) for b in wanted])
    if not names:
        raise RumiCatalogError("bands= names no band")
    if len(set(names)) != len(names):
        raise RumiCatalogError(f"bands= repeats a band: {names}")
    index = []
    for s in sources:
        labels = s.labels
        lookup: dict[str, int] = {}
        for i, common in enumerate(labels.common_names):
            if common:
                lookup.setdefault(common, i)
        for i, text in enumerate(labels.texts):
            lookup[text] = i
        for i, short in enumerate(labels.names):
            lookup[short] = i
        missing = [n for n in names if n not in lookup]
        if missing:
            raise RumiCatalogKeyError(
                f"{s.describe()} has no band {', '.join(map(repr, missing))}; its bands: "
                f"{list(labels.names)}")
        index.append(tuple(lookup[n] for n in names))
        if len(set(index[-1])) != len(names):
            raise RumiCatalogError(f"bands= names one band of {s.describe()} twice: {names}")
    return names, index
