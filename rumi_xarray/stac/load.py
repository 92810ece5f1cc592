"""STAC in: ``rx.open_stac``, cubes from STAC Items, onto one grid, as odc-stac lays them out.

Two paths, chosen from the Items alone (no request to the data files):

- **one shared grid**: every Item has the same CRS, transform, size, bands,
  frame layout and nodata, every output time step holds one Item's step,
  and the output grid is that grid or a pixel-aligned window of it. The
  Items become a catalog table (header included) and the cube is
  :func:`rumi_xarray.open_catalog`'s: zero requests at open, and reads
  grouped across scenes (one ``read_many`` per read group) at compute.
- **different grids** (UTM zones, overlapping footprints, another CRS or
  resolution, a bbox reaching past the images, several Items per time
  step): a dask array with one task per output chunk, which reads only the
  source windows covering its chunk (one native call per source group),
  reprojects them with odc-geo and mosaics them (first valid pixel, nodata
  respected). See :mod:`rumi_xarray.stac.plan` and
  :mod:`rumi_xarray.stac.graph`.

Either way the Dataset follows odc-stac's conventions, so code written for
``odc.stac.load`` runs unchanged: dimensions ``time, y, x`` (``latitude,
longitude`` for geographic grids), coordinates from odc-geo
(``xr_coords``: ``x``/``y`` with ``units``, ``resolution`` and ``crs``
attributes, and a ``spatial_ref`` coordinate), a ``time`` coordinate of
naive UTC ``datetime64[ns]`` (the first Item of each group), one variable
per band named as requested, raw samples (nodata, scale and offset are not
applied) with ``nodata`` in the variable's attributes and
``encoding["grid_mapping"] == "spatial_ref"``, so ``ds.odc.geobox`` and
``ds.rio`` work. The raw variables also carry their CF attributes
(``_FillValue`` equal to ``nodata``, ``scale_factor``, ``add_offset``,
``units``, as rioxarray's ``mask_and_scale=False`` gives them), so
``xr.decode_cf(ds)`` gives what ``mask_and_scale=True`` gives: the values
``xr.open_dataset(engine="rumi")`` gives for the same files. The files'
attributes (GDAL tags, netCDF globals: ``rumi:attributes`` of the Items) are
shown as every door shows them (``rumi_xarray.conventions.attributes``):
what the Items agree on.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import xarray as xr

from rumi_xarray.conventions import cf, decoding
from rumi_xarray.conventions.attributes import Attributes
from rumi_xarray.conventions.attributes import apply as apply_attributes
from rumi_xarray.conventions.bands import BandCoords
from rumi_xarray.conventions.facts import Facts
from rumi_xarray.conventions.time import decoded_instants
from rumi_xarray.errors import RumiCatalogError
from rumi_xarray.model.cube import Scene
from rumi_xarray.stac import grid as grids
from rumi_xarray.stac import plan as stac_plan
from rumi_xarray.stac.parse import StacSource, catalog_table, parse_items
from rumi_xarray.stac.parse import select_bands as _bands

VARIABLE = "band_data"


@dataclass(frozen=True)
class LoadOptions:
    """Every keyword of :func:`open_stac`, built once and handed to either path.

    A new option of a STAC load is a field here (with its check in
    ``__post_init__``), a keyword of :func:`open_stac`, and its use.
    """

    bands: str | Sequence[str] | None = None
    crs: Any = None
    resolution: Any = None
    bbox: Sequence[float] | None = None
    geobox: Any = None
    like: Any = None
    geopolygon: Any = None
    anchor: Any = None
    groupby: str | None = "time"
    chunks: Any = None
    resampling: str = "nearest"
    band_as_variable: bool = True
    nodata: float | None = None
    mask_and_scale: bool | None = False
    storage_options: dict[str, Any] | None = None
    datetime: Any = None
    query: Mapping[str, Any] | None = None
    lookup: str = "open"

    def __post_init__(self) -> None:
        stac_plan.groupby_name(self.groupby)  # refuses a groupby of the wrong type, now
        _check_resampling(self.resampling)
        decoding.check_mask_and_scale(self.mask_and_scale, "open_stac")
        if self.lookup not in ("open", "task"):
            raise RumiCatalogError(f"lookup= is 'open' or 'task', got {self.lookup!r}")

    @property
    def grouping(self) -> str:
        """What ``groupby`` names on either path: None is ``"id"``, as in odc-stac."""
        return stac_plan.groupby_name(self.groupby)

    def output_geobox(self, sources: Sequence[StacSource]) -> Any:
        """Return the output grid these options give for these sources."""
        return grids.output_geobox(sources, crs=self.crs, resolution=self.resolution,
                                   anchor=self.anchor, bbox=self.bbox, geobox=self.geobox,
                                   like=self.like, geopolygon=self.geopolygon)

    def fill_nodata(self, source: StacSource) -> float | None:
        """Return the output's nodata: ``nodata=``, else the (first) source's."""
        return source.nodata if self.nodata is None else float(self.nodata)


def open_stac(items: Any, bands: str | Sequence[str] | None = None, *, crs: Any = None,
              resolution: Any = None, bbox: Sequence[float] | None = None,
              geobox: Any = None, like: Any = None, geopolygon: Any = None,
              anchor: Any = None, groupby: str | None = "time", chunks: Any = None,
              resampling: str = "nearest", band_as_variable: bool = True,
              nodata: float | None = None, mask_and_scale: bool | None = False,
              storage_options: dict[str, Any] | None = None, datetime: Any = None,
              query: Mapping[str, Any] | None = None, lookup: str = "open") -> xr.Dataset:
    """Load STAC Items of Rumi files as one cube on one grid.

    Opening reads nothing from the data files when the Items carry
    ``rumi:header`` (as :func:`rumi_xarray.to_stac` writes them).

    Parameters
    ----------
    items : pystac.Item(s), pystac.ItemCollection, dict(s), pyarrow.Table, str or path
        Items, a pystac-client search (anything with ``item_collection()``),
        a FeatureCollection dict, a stac-geoparquet Arrow table, or the path
        of a stac-geoparquet (``.parquet``) or GeoJSON (``.json``) file.
    bands : str or sequence of str, optional
        Bands to load, by short name (``"B04"``), stored text, or STAC common
        name (``"red"``); variables are named as asked. Default: the bands of
        the first Item. Every Item must have them.
    crs : str, int or CRS, optional
        Output CRS; default: that of the grid most Items share.
    resolution : float or (x, y), optional
        Output pixel size in CRS units; default: that of the grid most Items
        share. A coarser output reads each Item's overview level
        (``rumi:overviews``, written by ``rx.to_rumi(..., overviews=...)``)
        by odc-stac's rule: the coarsest level whose factor is not larger
        than the shrink from the Item's pixels to the output's.
    bbox : (min lon, min lat, max lon, max lat), optional
        Output extent in WGS84; default: every Item's footprint.
    geobox : odc.geo.geobox.GeoBox, optional
        The exact output grid (excludes crs, resolution, bbox...).
    like : xarray object, optional
        Use the grid of this (odc-geo aware) object.
    geopolygon : odc.geo.geom.Geometry or GeoJSON dict, optional
        Output extent as a geometry.
    anchor : optional
        odc-geo pixel anchor of the output grid.
    groupby : {"time", "solar_day", "id"}, None or str, default "time"
        Items mosaicked into one time step: same timestamp; same local solar
        day (at the output grid's centre longitude, as odc-stac); none
        (``"id"``/None); or the same value of an Item property. Within a
        step the earliest Item (then the smallest id) wins where Items
        overlap.
    chunks : dict, int, str or None
        None: on one shared grid, lazily indexed variables (each access one
        planned read); across grids, the data are loaded now (like
        ``odc.stac.load`` without chunks). ``{}`` or ``"auto"``: dask arrays
        in read groups (``rx.set_options(group_bytes=...)``; across grids:
        the whole extent if it fits, then as many time steps as fit). A dict
        such as ``{"time": 1, "x": 2048, "y": 2048}`` fixes those sizes.
    resampling : str, default "nearest"
        rasterio resampling (``"nearest"``, ``"bilinear"``, ``"cubic"``,
        ``"average"``...), used where grids differ.
    band_as_variable : bool, default True
        One variable per band (odc-stac's layout); False gives
        ``band_data(time, band, y, x)``.
    nodata : float, optional
        Output fill value (and ``nodata`` attribute) instead of the Items'
        nodata.
    mask_and_scale : bool or None, default False
        As on every door (``rumi_xarray.conventions.decoding``; the table
        of defaults is in the nodata and CF guide). False: raw samples, as
        ``odc.stac.load`` returns them (nodata where nothing valid falls,
        ``nodata`` attribute), with their CF attributes
        (``_FillValue``, ``scale_factor``, ``add_offset``, ``units``) so that
        ``xr.decode_cf(ds)`` decodes them; ``ds.B04.rio.nodata`` is the raw
        nodata. True: decoded values, exactly what ``xr.open_dataset(path,
        engine="rumi", mask_and_scale=True)`` gives for the same files
        (floats, NaN where nodata, scale and offset applied; the packing in
        ``encoding`` as xarray's decoder leaves it, ``nodata`` attribute NaN),
        like stackstac's ``rescale=True``, and always floats (float32 up to
        16-bit samples, float64 above, as rioxarray). None: the same CF
        decoding, but integers with nothing to mask or scale stay integers
        (``xr.open_dataset``'s default). Reprojection and mosaicking work on
        the raw samples either way (nodata respected), decoding follows.
        Integer samples without a nodata (none in the Items, no ``nodata=``)
        have nothing to mask: pixels no Item covers are 0 before decoding.
    storage_options : dict, optional
        fsspec options for fsspec-only protocols (and a remote table).
    datetime : str, slice, tuple or datetime, optional
        Only Items at or within this time (``"2024-01-01/2024-06-30"``, either
        end ``..``; ``slice(a, b)``; one date: its whole period), as a STAC
        search's ``datetime``.
    query : mapping, optional
        Only Items whose properties match (STAC API query extension:
        ``{"eo:cloud_cover": {"lt": 20}}``).

    lookup : {"open", "task"}, default "open"
        ``"open"``: the Items are parsed and every output chunk planned at
        open. ``"task"`` (a stac-geoparquet file or folder, an explicit
        output grid, ``groupby`` "time" or "solar_day", not "id" nor None,
        which means "id"): opening reads only
        the selected Items' ``datetime`` column and one Item; each output
        chunk's task finds its Items through the table's ``bbox`` and
        ``datetime`` columns when it runs (``rumi_xarray.stac.archive``),
        so neither the open nor the graph grows with the archive.

    For a stac-geoparquet table (file, folder or Arrow table) ``bbox``,
    ``datetime`` and ``query`` are pushed down to the Parquet reader: row
    groups and partitions whose statistics cannot match are never read, and
    ``bbox`` also selects the Items (as a search would); for Items given
    otherwise ``bbox`` is the output extent only, as in ``odc.stac.load``.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    RumiCatalogError
        No Items, an Item without projection information, or times and bands
        that do not match its header; with ``mask_and_scale=True``, Items
        with different scales or offsets.
    RumiCatalogKeyError
        An Item without a Rumi asset, or without a requested band (the error
        names the Item).

    Examples
    --------
    >>> items = rx.to_stac("scenes/*.rumi")
    >>> stack = rx.open_stac(items, bands=["red", "nir"])
    >>> list(stack.data_vars), dict(stack.red.sizes)
    (['red', 'nir'], {'time': 4, 'y': 128, 'x': 128})
    >>> wgs84 = rx.open_stac(items, bands=["red"], crs="EPSG:4326", resolution=0.001)
    >>> wgs84.rio.crs.to_epsg()
    4326
    """
    from rumi_xarray.stac.items import require_stac_extra

    require_stac_extra()
    options = LoadOptions(
        bands=bands, crs=crs, resolution=resolution, bbox=bbox, geobox=geobox, like=like,
        geopolygon=geopolygon, anchor=anchor, groupby=groupby,
        chunks=chunks, resampling=resampling, band_as_variable=band_as_variable,
        nodata=nodata, mask_and_scale=mask_and_scale, storage_options=storage_options,
        datetime=datetime, query=query, lookup=lookup)
    if options.lookup == "task":
        return _open_archive(items, options)
    return _open_items(items, options)


def _open_items(items: Any, o: LoadOptions) -> xr.Dataset:
    """Open a load whose Items are parsed, and every output chunk planned, now."""
    from rumi_xarray.stac.mosaic import _same_nodata
    from rumi_xarray.stac.parse import _is_arrow_table

    search: dict[str, Any] = {"datetime": o.datetime, "query": o.query}
    if isinstance(items, (str, os.PathLike)) or _is_arrow_table(items):
        search["bbox"] = o.bbox
    sources = parse_items(items, o.storage_options, search)
    names, band_index = _bands(sources, o.bands)
    gbox = o.output_geobox(sources)
    # A coarser output reads each Item's overview level, as odc-stac reads a COG's.
    sources = grids.read_levels(sources, gbox)
    groups = stac_plan.time_groups(sources, o.grouping, gbox)
    dtype = np.result_type(*[s.grid.dtype for s in sources])
    fill_nodata = o.fill_nodata(sources[0])
    window = None
    if (grids.shared_grid(sources) and all(len(g) == 1 for g in groups)
            and _same_nodata(sources[0].nodata, fill_nodata)):
        window = grids.native_window(sources[0], gbox)
    packing = _packing(sources, dtype, fill_nodata, decoding.applies_cf(o.mask_and_scale))
    if window is not None:
        # The catalog cube decodes as open_dataset does (xarray's decoder, lazily).
        ds = _open_shared(sources, groups, names, band_index[0], window, o)
    else:
        ds = _open_warped(sources, groups, names, band_index, gbox, dtype, fill_nodata, o)
        ds = _decoded(ds, packing, o.mask_and_scale, eager=o.chunks is None)
    ds = _conform(ds, gbox, sources, groups, names, band_index, fill_nodata, packing,
                  decoding.applies_cf(o.mask_and_scale))
    # What the Items agree on (combine_attrs="drop_conflicts"), as catalogs show it.
    described = Attributes.combine(dict.fromkeys(s.attributes for s in sources))
    variables: dict[Hashable, int | None] = (
        dict(zip(names, band_index[0], strict=True)) if o.band_as_variable
        else {VARIABLE: None})
    return apply_attributes(ds, described, variables, o.mask_and_scale,
                            sources[0].labels.texts)


def _check_resampling(resampling: Any) -> None:
    """Refuse a resampling GDAL's warper does not run, now rather than in every task.

    odc-geo knows every name of rasterio's ``Resampling``, ``gauss`` included, but
    ``gauss`` is GDAL's overview resampling: its warper refuses it, so a load given it
    would fail in each output chunk.
    """
    from odc.geo.warp import resampling_s2rio
    from rasterio.warp import SUPPORTED_RESAMPLING  # type: ignore[import-untyped]

    warped = sorted(r.name for r in SUPPORTED_RESAMPLING)
    try:
        method = resampling_s2rio(resampling)
    except (ValueError, AttributeError, TypeError) as exc:
        raise RumiCatalogError(
            f"resampling={resampling!r} is not a resampling odc-geo knows ({exc}); use one "
            f"of {warped}") from None
    if method not in SUPPORTED_RESAMPLING:
        raise RumiCatalogError(
            f"resampling={resampling!r} is one GDAL computes overviews with, not one its "
            f"warper runs; use one of {warped}")


def _open_archive(items: Any, o: LoadOptions) -> xr.Dataset:
    """Open a load whose output chunks look their Items up in the table when they run."""
    from rumi_xarray.dask.chunks import stac_output_chunks
    from rumi_xarray.stac import archive
    from rumi_xarray.stac.graph import load_array

    if not isinstance(items, (str, os.PathLike)):
        raise RumiCatalogError("lookup='task' reads a stac-geoparquet file or folder: pass "
                               "its path or URL")
    if o.geobox is None and o.like is None and o.bbox is None and o.geopolygon is None:
        raise RumiCatalogError("lookup='task' needs the output grid's extent (bbox=, "
                               "geobox=, like= or geopolygon=): the Items are not read at "
                               "open to find it")
    url = os.fspath(items)
    seconds, first, files = archive.open_columns(url, bbox=o.bbox, datetime=o.datetime,
                                          query=o.query, storage_options=o.storage_options)
    ref = archive.reference_source(first, o.storage_options)
    names, band_index = _bands([ref], o.bands)
    gbox = o.output_geobox([ref])
    times, lo, hi = archive.time_groups(seconds, o.grouping, gbox)
    dtype = ref.grid.dtype
    fill_nodata = o.fill_nodata(ref)
    fill = _fill(dtype, fill_nodata)
    shape = (len(times), len(names), *gbox.shape.yx)
    sizes = stac_output_chunks(o.chunks, shape, dtype.itemsize)
    token = archive.token(url, gbox.crs.to_wkt(), tuple(gbox.transform), tuple(gbox.shape),
                          names, sizes, dtype.str, repr(fill), o.resampling, repr(o.datetime),
                          repr(o.query), repr(o.bbox), o.grouping)
    load = archive.TableLoad(url=url, storage_options=dict(o.storage_options or {}),
                             query=None if o.query is None else dict(o.query),
                             bands=tuple(names), geobox=gbox, chunks=sizes, group_lo=lo,
                             group_hi=hi, dtype=np.dtype(dtype), fill=fill,
                             resampling=o.resampling, token=token, files=files,
                             hrefs=archive.archive_hrefs(url))
    ds = _variables(load_array(load), names, o.band_as_variable)
    if o.chunks is None:
        ds = ds.load()
    packing = _packing([ref], dtype, fill_nodata, decoding.applies_cf(o.mask_and_scale))
    ds = _decoded(ds, packing, o.mask_and_scale, eager=o.chunks is None)
    groups = [(stac_plan.Unit(0, 0, int(t)),) for t in times]
    return _conform(ds, gbox, [ref], groups, names, band_index, fill_nodata, packing,
                    decoding.applies_cf(o.mask_and_scale))


def _variables(data: Any, names: list[str], band_as_variable: bool) -> xr.Dataset:
    """Return the Dataset of a ``(time, band, y, x)`` load: a variable per band, or one."""
    variables: dict[str, tuple[tuple[str, ...], Any]]
    if band_as_variable:
        variables = {name: (("time", "y", "x"), data[:, i]) for i, name in enumerate(names)}
    else:
        variables = {VARIABLE: (("time", "band", "y", "x"), data)}
    ds = xr.Dataset(variables)
    if not band_as_variable:
        ds = ds.assign_coords(band=("band", np.array(names, dtype=str)))
    return ds


def _packing(sources: Sequence[StacSource], dtype: np.dtype, nodata: float | None,
             mask_and_scale: bool) -> dict[str, Any]:
    """Return the CF attributes of the output's raw samples, as open_dataset builds them.

    :func:`rumi_xarray.conventions.cf.cf_attributes` types them as the backend
    does (``_FillValue`` a sample, ``scale_factor``/``add_offset`` in the type
    samples decode to), so xarray's decoder gives the backend's numbers. The
    output's nodata is the fill value of the load (``nodata=`` or the first
    Item's). Items whose scale or offset differ have no one scale: decoding
    refuses them, raw loads warn and carry none.
    """
    facts = replace(sources[0].facts, nodata=nodata)

    def scaling(f: Facts) -> dict[str, float | None]:
        return {"scale_factor": f.scale, "add_offset": f.offset}

    first = scaling(facts)
    for s in sources[1:]:
        other = scaling(s.facts)
        if other != first:
            problem = (f"{s.describe()} has scale/offset {other}, {sources[0].describe()} "
                       f"{first}")
            if mask_and_scale:
                raise RumiCatalogError(f"{problem}: mask_and_scale=True applies one scale and "
                                       f"offset to a mosaic; load these Items separately")
            warnings.warn(f"{problem}: the raw samples are mosaicked as they are, and carry "
                          f"no scale_factor/add_offset attribute", UserWarning, stacklevel=3)
            facts = replace(facts, scale=None, offset=None)
            break
    return cf.cf_attributes(facts, dtype, sources[0].describe())


def _decoded(ds: xr.Dataset, packing: Mapping[str, Any], mask_and_scale: bool | None, *,
             eager: bool) -> xr.Dataset:
    """Decode raw samples as every door does (``rumi_xarray.conventions.decoding``)."""
    if not decoding.applies_cf(mask_and_scale):
        return ds
    attrs = decoding.packing_of(packing)
    out = ds.copy()
    for name, var in ds.data_vars.items():
        raw = xr.Variable(var.dims, var.data, attrs, encoding=dict(var.encoding))
        out[name] = decoding.decode_variable(name, raw, mask_and_scale)
    # dask data stay dask; numpy data come back lazily wrapped: load them, as asked
    return out.load() if eager else out


def _open_shared(sources: Sequence[StacSource], groups: Sequence[Sequence[stac_plan.Unit]],
                 names: list[str], bands: tuple[int, ...], window: tuple[slice, slice],
                 o: LoadOptions) -> xr.Dataset:
    """Open the catalog cube of sources on one grid, in the groups' time order."""
    from rumi_xarray.catalogs.cube import open_catalog

    band_as_variable = o.band_as_variable
    ds = open_catalog(catalog_table(sources), chunks=o.chunks, band_as_variable=band_as_variable,
                      mask_and_scale=o.mask_and_scale, storage_options=o.storage_options)
    # open_catalog orders scenes by time, then table order (the sources' order here);
    # the groups may order them otherwise.
    order = sorted(range(len(sources)), key=lambda i: (tuple(sources[i].seconds), i))
    position: dict[tuple[int, int], int] = {}
    for i in order:
        for step in range(len(sources[i].seconds)):
            position[(i, step)] = len(position)
    wanted = [position[(g[0].source, g[0].step)] for g in groups]
    if wanted != list(range(ds.sizes["time"])):
        ds = ds.isel(time=wanted)
    ds = ds.isel(y=window[0], x=window[1])
    stored = sources[0].labels.names
    if band_as_variable:
        return ds[[stored[b] for b in bands]].rename(
            {stored[b]: name for b, name in zip(bands, names, strict=True) if stored[b] != name})
    ds = ds.isel(band=list(bands))
    labels = decoding.band_labels(names, [sources[0].labels.texts[b] for b in bands])
    return ds.assign_coords(band=("band", labels))


def _open_warped(sources: Sequence[StacSource], groups: Sequence[Sequence[stac_plan.Unit]],
                 names: list[str], band_index: list[tuple[int, ...]], gbox: Any,
                 dtype: np.dtype, nodata: float | None, o: LoadOptions) -> xr.Dataset:
    """Build the reprojecting load: one dask task per output chunk."""
    from rumi_xarray.dask.chunks import stac_output_chunks
    from rumi_xarray.sources import resolve
    from rumi_xarray.stac.graph import load_array

    fill = _fill(dtype, nodata)
    shape = (len(groups), len(names), *gbox.shape.yx)
    sizes = stac_output_chunks(o.chunks, shape, dtype.itemsize)
    scenes = tuple(Scene(resolve.resolve(s.href, storage_options=o.storage_options), s.header,
                         s.position, overview=s.overview) for s in sources)
    token = stac_plan.load_token(sources, gbox.crs.to_wkt(), tuple(gbox.transform),
                                 tuple(gbox.shape), band_index, groups, sizes, dtype.str,
                                 repr(fill), o.resampling)
    plan = stac_plan.LoadPlan(sources=tuple(sources), scenes=scenes,
                              band_index=tuple(band_index), geobox=gbox,
                              groups=tuple(tuple(g) for g in groups), chunks=sizes,
                              bins=stac_plan.bins(sources, gbox, sizes),
                              dtype=np.dtype(dtype), fill=fill, resampling=o.resampling,
                              token=token)
    ds = _variables(load_array(plan), names, o.band_as_variable)
    if o.chunks is None:
        ds = ds.load()
    return ds


def _fill(dtype: np.dtype, nodata: float | None) -> Any:
    if nodata is not None:
        return np.dtype(dtype).type(nodata)
    return np.dtype(dtype).type(np.nan) if np.dtype(dtype).kind == "f" else np.dtype(dtype).type(0)


def _conform(ds: xr.Dataset, gbox: Any, sources: Sequence[StacSource],
             groups: Sequence[Sequence[stac_plan.Unit]], names: list[str],
             band_index: list[tuple[int, ...]], nodata: float | None,
             packing: Mapping[str, Any], decoded: bool) -> xr.Dataset:
    """Give either path odc-stac's coordinates and attributes, and the CF ones."""
    from odc.geo.xr import xr_coords

    coords = xr_coords(gbox)
    dims = tuple(str(d) for d in gbox.dimensions)
    if dims != ("y", "x"):
        ds = ds.rename({"y": dims[0], "x": dims[1]})
    drop = [c for c in ("x", "y", "spatial_ref", "band_text", "common_name",
                        "center_wavelength") if c in ds.coords and c not in dims]
    ds = ds.drop_vars(drop)
    # Decoded as open_dataset and open_catalog decode it: naive UTC in nanoseconds, as
    # odc-stac gives it too, so every path concatenates and aligns with the others; times
    # outside datetime64[ns] as xarray decodes them there (not wrapped).
    times = decoded_instants([g[0].seconds for g in groups])
    new_coords: dict[Hashable, Any] = dict(coords)
    new_coords["time"] = xr.DataArray(times, dims=("time",))
    if "band" in ds.dims:
        # rumi_xarray's band companions (full text, common name, wavelength), both paths
        texts = sources[0].labels.texts
        chosen = [texts[i] for i in band_index[0]]
        companions = BandCoords.from_texts(chosen).coords()
        companions.pop("band")
        # unnamed bands are 1..n on every door (the policy's labels)
        labels = decoding.band_labels(names, chosen)
        new_coords["band"] = ("band", labels)
        if ("band_text" not in companions and labels.dtype.kind != "i"
                and list(names) != chosen):
            companions["band_text"] = xr.Variable(
                "band", np.array([texts[i] for i in band_index[0]], dtype=str),
                {"long_name": "band text as stored"})
        new_coords.update(companions)
    ds = ds.assign_coords(new_coords)
    ds.attrs = {}  # odc-stac's layout: the shared-grid path's open_dataset attributes go
    for name in ds.data_vars:
        var = ds[name]
        attrs: dict[str, Any] = {}
        if decoded:
            # Decoded as open_dataset decodes: the packing stays in encoding (where
            # rioxarray finds encoded_nodata and to_rumi/to_netcdf pack back), and
            # missing pixels are NaN.
            if "_FillValue" in packing and var.dtype.kind == "f":
                attrs["nodata"] = var.dtype.type(np.nan)
            if "units" in packing:
                attrs["units"] = packing["units"]
        else:
            if nodata is not None:
                attrs["nodata"] = var.dtype.type(nodata)
            # the same facts as CF attributes, so xr.decode_cf decodes them (and
            # rioxarray's rio.nodata, which reads _FillValue first, stays the raw nodata)
            attrs.update(packing)
            for key in cf.PACKING:
                var.encoding.pop(key, None)
        var.attrs = attrs
        var.encoding["grid_mapping"] = "spatial_ref"
        var.encoding.pop("units", None)
    return ds
