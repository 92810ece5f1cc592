"""Cubes from catalog rows: ``open_catalog`` and ``open_mfdataset``.

The cube is built from the rows alone (headers parse without I/O), so
opening a catalog of a thousand remote scenes makes no request. With
``chunks``, the variables become plain dask arrays through xarray's own
chunking, one read group (scenes stacked along time, one ``read_many`` call)
per chunk.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from rumi_xarray import options
from rumi_xarray.backend import (
    accessor,  # noqa: F401  (registers the .rumi accessor)
    dataset,
)
from rumi_xarray.catalogs import levels
from rumi_xarray.catalogs.index import GRIDS_HINT, epsg_label
from rumi_xarray.catalogs.table import (
    COLUMNS,
    ROW_DIGEST,
    catalog,
    cell,
    cell_list,
    check_row,
    check_row_digest,
    check_times,
    row_attributes,
    row_digest,
)
from rumi_xarray.conventions import cf, decoding, georef
from rumi_xarray.conventions.attributes import Attributes
from rumi_xarray.conventions.sidecar import Sidecar
from rumi_xarray.errors import (
    RumiCatalogError,
    RumiCatalogKeyError,
    RumiFileNotFoundError,
    RumiIntegrityError,
    os_error,
    with_context,
)
from rumi_xarray.model.cube import Cube, RaggedSteps, Scene, source_name
from rumi_xarray.model.grid import Grid
from rumi_xarray.native import reads
from rumi_xarray.sources import resolve
from rumi_xarray.sources.hrefs import Hrefs
from rumi_xarray.sources.redact import redact_text

DUPLICATES = ("keep", "first", "last", "error")
#: The columns a catalog cannot do without.
REQUIRED = ("path", "header", "time_seconds", "bands")


@contextlib.contextmanager
def _reading_table(name: str) -> Iterator[None]:
    """Turn what reading a catalog table raises into typed errors without credentials."""
    try:
        yield
    except FileNotFoundError as exc:
        raise os_error(RumiFileNotFoundError, errno.ENOENT,
                       f"{name}: no such catalog file (open_catalog reads the Parquet table "
                       f"written by rx.catalog(...).to_parquet(path))", name) from exc
    except (RumiCatalogError, RumiCatalogKeyError, RumiIntegrityError):
        raise
    except OSError as exc:
        raise with_context(exc, f"{name}: cannot read the catalog", source=name) from exc
    except ImportError as exc:
        raise RumiCatalogError(
            f"{name}: reading a catalog table needs pyarrow: pip install "
            f"'rumi-xarray[catalog]' ({redact_text(str(exc))})") from exc
    except Exception as exc:  # pyarrow, fsspec and aiohttp raise their own types
        # pyarrow's ArrowInvalid (a ValueError) for files that are not Parquet, an
        # HTTP status from fsspec's aiohttp: typed, and without credentials.
        raise RumiCatalogError(
            f"{name}: not a readable Parquet catalog table ({type(exc).__name__}: "
            f"{redact_text(' '.join(str(exc).split()))})") from exc


def _check(rows: pd.DataFrame, grids: list[Grid]) -> None:
    """Raise naming the first row that cannot join the cube of the reference row."""
    ref = rows.iloc[0]
    g0 = grids[0]
    ref_row = int(ref["_row"])
    for i in range(1, len(rows)):
        row, g = rows.iloc[i], grids[i]
        problems = []
        if (g.height, g.width) != (g0.height, g0.width):
            problems.append(f"size {g.height}x{g.width} != {g0.height}x{g0.width}")
        if g.stack_key[2:] != g0.stack_key[2:]:
            # The number of time steps and the frame layout may differ (a ragged cube).
            problems.append(
                f"frame grid (tile {g.tile_height}, bands {g.bands}, dtype {g.dtype}) differs "
                f"from row {ref_row} (tile {g0.tile_height}, bands {g0.bands}, dtype "
                f"{g0.dtype})")
        if cell_list(row["bands"]) != cell_list(ref["bands"]):
            problems.append(f"bands {cell_list(row['bands'])} != {cell_list(ref['bands'])}")
        if cell_list(row.get("transform")) != cell_list(ref.get("transform")):
            problems.append("transform differs")
        if cell(row.get("crs")) != cell(ref.get("crs")):
            problems.append(f"CRS {epsg_label(row.get('crs'))} != "
                            f"{epsg_label(ref.get('crs'))}")
        problems += Sidecar.from_columns(
            row, g.dtype, f"catalog row {int(row['_row'])} ({source_name(row['path'])})"
        ).differences(Sidecar.from_columns(
            ref, g0.dtype, f"catalog row {ref_row} ({source_name(ref['path'])})"))
        if problems:
            raise RumiCatalogError(
                f"catalog row {int(row['_row'])} ({source_name(row['path'])}) cannot be "
                f"stacked with row {ref_row} ({source_name(ref['path'])}): "
                + "; ".join(problems) + f". {GRIDS_HINT}")


def _order(rows: pd.DataFrame, duplicates: str) -> pd.DataFrame:
    """Sort rows by time (ties in table order) and apply the duplicates policy.

    The tie rule of a table on disk (``catalogs/index.py``), which cannot read the
    paths at open: one rule, so ``duplicates="first"``/``"last"`` keep the same file
    whether the rows are given in memory or as a Parquet file.
    """
    if duplicates not in DUPLICATES:
        raise RumiCatalogError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
    key = rows["time_seconds"].map(lambda s: tuple(s))
    rows = rows.assign(_key=key).sort_values(["_key", "_row"], kind="stable")
    dup = rows["_key"].duplicated(keep=False)
    if dup.any():
        if duplicates == "error":
            first = rows[dup].iloc[0]
            raise RumiCatalogError(
                f"catalog rows {list(rows[dup]['_row'][:2])} share the time "
                f"{first.get('time')}; pass duplicates='first', 'last' or 'keep'")
        if duplicates == "first":
            rows = rows[~rows["_key"].duplicated(keep="first")]
        elif duplicates == "last":
            rows = rows[~rows["_key"].duplicated(keep="last")]
    return rows.drop(columns="_key").reset_index(drop=True)


def open_catalog(table: pd.DataFrame | str | os.PathLike[str], *, chunks: Any = None,
                 duplicates: str = "keep", band_as_variable: bool = False,
                 mask_and_scale: bool | None = None, decode_times: bool = True,
                 storage_options: dict[str, Any] | None = None, time: Any = None,
                 bbox: Any = None, coords: Any = "numeric",
                 resolution: Any = None) -> xr.Dataset:
    """Open the scenes of a catalog as one cube, without any request to the files.

    Rows are stacked along ``time``, sorted by time; rows with the same time
    keep table order (:func:`rumi_xarray.catalog` lists files sorted by path),
    in memory and on disk alike. Every
    scene must share size, transform, CRS, bands, dtype, tile size, nodata,
    scale and offset; the first row that does not is named in a
    :class:`~rumi_xarray.errors.RumiCatalogError`. Rows may hold different
    numbers of time steps (series files of periods, ``rx.ingest(...,
    layout="series")``) and frame layouts: each contributes its own dates, the
    cube equals ``xr.concat`` of the files opened one by one, and dask chunks
    along time follow the rows (one per row, the frames of one file).

    A table on disk or in object storage (a Parquet file, or a folder of them,
    partitioned or not) is an index, not a list: opening reads the footers
    (row-group statistics), the time column of the row groups a ``time=``
    selection keeps, and one row; every dask task reads the rows of its own
    scenes when it runs (``rumi_xarray.catalogs.index``). Its rows are
    checked against the reference row when a task uses them, so a row that
    cannot join the cube fails that task, naming the row and file. Ties in
    time keep table order (the paths are not read at open).

    Parameters
    ----------
    table : pandas.DataFrame, or path or URL of a Parquet file or folder
        As built by :func:`rumi_xarray.catalog` (``to_parquet``); a folder's
        files (any depth, hive partitions included; names starting with
        ``_`` or ``.`` skipped) are one table, so appending is writing
        another file.
    chunks : dict, int, str or tuple, optional
        As for :func:`xarray.open_dataset`: ``{}`` one read group per chunk
        (scenes stacked along time, one ``read_many`` each), ``"auto"``
        multiples of it; without chunks the cube is lazily indexed.
    duplicates : {"keep", "first", "last", "error"}, default "keep"
        Scenes with identical time steps: keep all (in table order), keep the
        first or last in table order, or raise; the same rows whether the
        table is in memory or on disk.
    band_as_variable : bool, default False
    mask_and_scale : bool, optional
        Unset (the default): xarray's CF decoding, as ``xr.open_dataset(...,
        engine="rumi")`` gives it (the catalog's nodata as NaN, scale and
        offset applied; integers with nothing to mask stay integers). True:
        rioxarray's masked floats (float32 up to 16-bit samples, float64
        above). False: the stored samples. The same on every door (see the
        table in the nodata and CF guide).
    decode_times : bool, default True
    storage_options : dict, optional
        fsspec options for the table and for fsspec-only protocols; dask
        workers read the table with them (or with their environment).
    time : slice, str or datetime, optional
        Only scenes with a time step in this selection
        (``slice("2024-01-01", "2024-12-31")``; a partial date string spans its
        period, as ``.sel`` does); on disk, row groups whose statistics lie
        outside are never read.
    bbox : (min lon, min lat, max lon, max lat), optional
        Crop the cube to the pixels intersecting this WGS84 box (odc-stac's
        ``bbox``), before any read.
    coords : "numeric", "all", list of str or None, default "numeric"
        For a table on disk: its extra columns read at open as time
        coordinates (numbers, booleans and times by default; strings cost
        more and are left in the table unless named, as ``explain()`` says).
        Rows in memory always give every scalar column.
    resolution : float or (float, float), optional
        The pixel size wanted, in the CRS's units: the scenes are read at
        the overview level odc-stac would read for it (the coarsest level
        whose factor is not larger than the shrink the resolution allows;
        full resolution when none is), as the catalog's ``overviews`` column
        records them (``rx.to_rumi(..., overviews=...)``, ``rx.ingest``). The
        cube has that level's grid (its pixel size is the level's, not
        exactly ``resolution``: nothing is resampled). Every scene needs the
        same levels.

    Returns
    -------
    xarray.Dataset
        ``band_data(time, band, y, x)``; extra scalar columns of the table
        (e.g. ``cloud_cover``) become coordinates along ``time``. A missing or
        unreadable file fails at compute time, naming its path and catalog
        row.

    Raises
    ------
    RumiFileNotFoundError
        The Parquet table does not exist (a ``FileNotFoundError``).
    RumiCatalogError
        The table is not Parquet, has no rows, or rows that cannot be
        stacked (a ``ValueError``); :class:`RumiCatalogKeyError` when it
        lacks a required column.

    Examples
    --------
    >>> cube = rx.open_catalog("catalog.parquet", chunks={})
    >>> dict(cube.band_data.sizes)
    {'time': 4, 'band': 4, 'y': 128, 'x': 128}
    >>> str(cube.time.values[0])[:10]
    '2024-02-15'
    """
    if duplicates not in DUPLICATES:
        raise RumiCatalogError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
    mask_and_scale = decoding.check_mask_and_scale(mask_and_scale, "open_catalog")
    if isinstance(table, (str, os.PathLike)):
        ds = _open_table(os.fsdecode(table), storage_options=storage_options, time=time,
                         duplicates=duplicates, coords=coords,
                         band_as_variable=band_as_variable,
                         mask_and_scale=mask_and_scale, decode_times=decode_times,
                         resolution=resolution)
        return _finish(ds, time, bbox, chunks)
    if hasattr(table, "to_pandas") and not isinstance(table, pd.DataFrame):
        table = table.to_pandas()  # a pyarrow Table of catalog rows
    if not isinstance(table, pd.DataFrame):
        raise RumiCatalogError(f"open_catalog takes catalog rows (a pandas DataFrame or "
                               f"pyarrow Table) or the path of a Parquet table, got "
                               f"{type(table).__name__}")
    rows = table.reset_index(drop=True)
    _check_digests(rows)
    if time is not None and not rows.empty and "time_seconds" in rows.columns:
        rows = _rows_in_time(rows, time)
    if rows.empty:
        raise RumiCatalogError("the catalog has no rows")
    missing = [c for c in REQUIRED if c not in rows.columns]
    if missing:
        raise RumiCatalogKeyError(f"the catalog lacks column(s) {missing}; build it with "
                                  f"rumi_xarray.catalog(...)")
    rows, overview = _at_resolution(rows, resolution)
    rows = rows.assign(_row=np.arange(len(rows)))
    for i, value in enumerate(rows["time_seconds"]):  # ordering needs every row's time
        check_times(value, f"catalog row {i} ({source_name(rows['path'].iloc[i])})")
    rows = _order(rows, duplicates)
    grids = []
    for i in range(len(rows)):
        label = f"catalog row {int(rows['_row'].iloc[i])} ({source_name(rows['path'].iloc[i])})"
        try:
            grids.append(Grid.from_metadata(reads.header_info(bytes(rows["header"].iloc[i]))))
        except (ValueError, TypeError) as exc:
            raise RumiCatalogError(f"{label}: bad header: {exc}") from exc
        check_row(rows.iloc[i], grids[-1], label)
    _check(rows, grids)
    # Rows in memory are the caller's: relative paths resolve against this process's
    # working directory, here, once (workers receive absolute paths).
    hrefs = Hrefs.of_catalog(None, allowed=options.option("allowed_hrefs"))
    # Rows of different numbers of steps or frame layouts (series files of periods): a
    # ragged cube, each scene carrying its own grid.
    ragged = any(not g.same_layout(grids[0]) for g in grids)
    scenes = tuple(
        Scene(resolve.resolve(hrefs.follow(p, f"catalog row {int(r)}"),
                              storage_options=storage_options), bytes(h), int(r),
              overview=overview, grid=g if ragged else None)
        for p, h, r, g in zip(rows["path"], rows["header"], rows["_row"], grids, strict=True))
    steps: Sequence[tuple[int, int]] = (
        RaggedSteps([g.time_count for g in grids]) if ragged
        else tuple((s, t) for s, g in enumerate(grids) for t in range(g.time_count)))
    cube = Cube(scenes, grids[0], steps, ragged=ragged)
    labels = _labels(rows, grids[0])
    ds = dataset.build(cube, labels, band_as_variable=band_as_variable,
                       decoders={"decode_times": decode_times}, mask_and_scale=mask_and_scale)
    ds = ds.assign_coords(_extra_coords(rows, [g.time_count for g in grids]))
    return _finish(ds, time, bbox, chunks)


def _at_resolution(rows: pd.DataFrame, resolution: Any
                   ) -> tuple[pd.DataFrame, tuple[int, int] | None]:
    """Return the rows rewritten to read the overview level ``resolution`` picks.

    The level is chosen on the first row (every row must record the same
    levels), by odc-stac's rule; ``(level, factor)`` is returned with the
    rows, ``None`` when full resolution is read.
    """
    if resolution is None:
        return rows, None
    records = rows.to_dict("records")
    label = f"catalog row 0 ({source_name(records[0].get('path'))})"
    factors = levels.factors_of(records[0], label)
    level = levels.choose(cell_list(records[0].get("transform")), factors, resolution, label)
    if level is None:
        return rows, None
    out = []
    for i, record in enumerate(records):
        where = f"catalog row {i} ({source_name(record.get('path'))})"
        if levels.factors_of(record, where) != factors:
            raise RumiCatalogError(
                f"{where}: its overview levels (factors {levels.factors_of(record, where)}) "
                f"differ from catalog row 0's ({factors}); a cube read at a resolution needs "
                f"the same levels in every scene")
        out.append(levels.row_at_level(record, level, where))
    return pd.DataFrame(out, columns=rows.columns), (level, factors[level])


def _check_digests(rows: pd.DataFrame, of: str = "") -> None:
    """Raise naming the first row whose columns differ from its recorded digest.

    Every row, before a time selection: a flipped bit may move a row into or out of it.
    ``of`` names the table the rows were read from (" of catalog.parquet"), if any.
    """
    if ROW_DIGEST not in rows.columns:
        return
    present = [c for c in COLUMNS if c in rows.columns]
    for i, record in enumerate(rows[present].to_dict("records")):
        check_row_digest(record, f"catalog row {i}{of} ({source_name(record.get('path'))})")


def _renew_digests(rows: pd.DataFrame) -> pd.DataFrame:
    """Return ``rows`` with each recorded digest renewed (a null one stays null).

    Only for rows just checked by :func:`_check_digests` and changed by this module
    on purpose (paths resolved against their table).
    """
    if ROW_DIGEST not in rows.columns:
        return rows
    present = [c for c in COLUMNS if c in rows.columns]
    renewed = [None if cell(record.get(ROW_DIGEST)) is None else row_digest(record)
               for record in rows[present].to_dict("records")]
    out = rows.copy()
    out[ROW_DIGEST] = pd.Series(renewed, index=rows.index, dtype=object)
    return out


def _rows_in_time(rows: pd.DataFrame, time: Any) -> pd.DataFrame:
    """Keep the rows with a time step in ``time`` (as a table on disk does)."""
    from rumi_xarray.catalogs.index import time_bounds

    lo, hi = time_bounds(time)
    keep = [(lo is None or max(s) >= lo) and (hi is None or min(s) <= hi)
            for s in rows["time_seconds"]]
    return rows[np.asarray(keep, dtype=bool)]


def _finish(ds: xr.Dataset, time: Any, bbox: Any, chunks: Any) -> xr.Dataset:
    """Apply the exact time and bbox selections, then chunk as open_dataset does."""
    if time is not None:
        from rumi_xarray.catalogs.index import time_bounds

        lo, hi = time_bounds(time)
        seconds = ds.time.values.astype("datetime64[s]").astype(np.int64) if (
            np.issubdtype(ds.time.dtype, np.datetime64)) else np.asarray(ds.time.values)
        keep = np.ones(len(seconds), dtype=bool)
        if lo is not None:
            keep &= seconds >= lo
        if hi is not None:
            keep &= seconds <= hi
        if not keep.all():
            ds = ds.isel(time=np.flatnonzero(keep))
    if bbox is not None:
        ds = ds.isel(_bbox_window(ds, bbox))
    if chunks is None:
        return ds
    from rumi_xarray.dask.chunks import chunk_like_open_dataset

    return chunk_like_open_dataset(ds, chunks)


def _bbox_window(ds: xr.Dataset, bbox: Any) -> dict[str, slice]:
    """Return the pixel window of the cube intersecting a WGS84 bbox."""
    try:
        west, south, east, north = (float(v) for v in bbox)
    except (TypeError, ValueError) as exc:
        raise RumiCatalogError(f"bbox= takes (min lon, min lat, max lon, max lat), got "
                               f"{bbox!r}") from exc
    if not (west < east and south < north):
        raise RumiCatalogError(f"bbox= {bbox!r} is empty: (min lon, min lat, max lon, max lat)")
    if "x" not in ds.dims or "spatial_ref" not in ds.coords or (
            "GeoTransform" not in ds.spatial_ref.attrs):
        raise RumiCatalogError("bbox= needs georeferenced scenes with an axis-aligned "
                               "transform (these have no x/y coordinates)")
    gt = [float(v) for v in str(ds.spatial_ref.attrs["GeoTransform"]).split()]
    x0, xres, row_rotation, y0, col_rotation, yres = gt
    if row_rotation != 0.0 or col_rotation != 0.0 or xres == 0.0 or yres == 0.0:
        # A window of rows and columns covers a rotated box only partly: refuse rather
        # than return pixels that miss part of the box.
        raise RumiCatalogError(
            f"bbox= needs scenes with an axis-aligned transform; these are rotated or "
            f"sheared (GeoTransform {ds.spatial_ref.attrs['GeoTransform']!r}): select "
            f"pixels with .isel, or reproject with rx.open_stac(..., bbox=...)")
    from pyproj import Transformer

    var = next(iter(ds.data_vars.values()))
    crs = ds.spatial_ref.attrs["crs_wkt"]
    left, bottom, right, top = Transformer.from_crs(
        "EPSG:4326", crs, always_xy=True).transform_bounds(west, south, east, north)
    width, height = var.sizes["x"], var.sizes["y"]
    cols = sorted(((left - x0) / xres, (right - x0) / xres))
    rows = sorted(((top - y0) / yres, (bottom - y0) / yres))
    c0, c1 = max(0, int(np.floor(cols[0]))), min(width, int(np.ceil(cols[1])))
    r0, r1 = max(0, int(np.floor(rows[0]))), min(height, int(np.ceil(rows[1])))
    if c0 >= c1 or r0 >= r1:
        raise RumiCatalogError(f"bbox= {bbox!r} does not intersect the cube")
    return {"y": slice(r0, r1), "x": slice(c0, c1)}


def _open_table(url: str, *, storage_options: dict[str, Any] | None, time: Any,
                duplicates: str, coords: Any, band_as_variable: bool,
                mask_and_scale: bool | None, decode_times: bool,
                resolution: Any = None) -> xr.Dataset:
    """Open a catalog table on disk as an index (see ``rumi_xarray.catalogs.index``)."""
    from rumi_xarray.catalogs import index as tables
    from rumi_xarray.model.cube import UniformSteps

    with _reading_table(source_name(url)):
        idx, facts = tables.open_index(url, storage_options=storage_options, time=time,
                                       duplicates=duplicates, coords=coords,
                                       resolution=resolution)
    ref, grid = facts["reference"], idx.reference.grid
    ragged, counts = bool(facts["ragged"]), facts["counts"]
    target = idx.hrefs.follow(ref["path"], f"catalog row {facts['reference_label']}")
    first = Scene(resolve.resolve(target, storage_options=storage_options),
                  bytes(ref["header"]), facts["reference_label"], overview=idx.overview,
                  grid=grid if ragged else None)
    scenes = tables.TableScenes(idx, first, str(facts["cost"]))
    steps: Sequence[tuple[int, int]] = (RaggedSteps(counts) if ragged
                                        else UniformSteps(idx.scenes, grid.time_count))
    cube = Cube(scenes, grid, steps, ragged=ragged)
    seconds, bounds = facts["seconds"], facts["bounds"]
    labels = _reference_labels(ref, f"catalog row {facts['reference_label']}", grid,
                               seconds.reshape(-1),
                               None if bounds is None else bounds.reshape(-1, 2),
                               facts["attributes"])
    ds = dataset.build(cube, labels, band_as_variable=band_as_variable,
                       decoders={"decode_times": decode_times}, mask_and_scale=mask_and_scale)
    extra = {k: ("time", np.repeat(v, counts)) for k, v in facts["coords"].items()}
    return ds.assign_coords(extra) if extra else ds


def open_catalog_grids(table: pd.DataFrame | str | os.PathLike[str], **kwargs: Any
                       ) -> list[xr.Dataset]:
    """Open a catalog whose scenes lie on several grids as one cube per grid.

    Rows are grouped by what a cube needs them to share (size, transform,
    CRS, bands, tile size, dtype), in order of first appearance, and each
    group is opened with :func:`open_catalog`:
    chips (``rumi_xarray.torch.ChipDataset(cubes, ...)``) then come from each
    scene's own pixel grid, with nothing reprojected.

    Parameters
    ----------
    table : pandas.DataFrame or path to a Parquet file
    **kwargs
        Passed to :func:`open_catalog`.

    Returns
    -------
    list of xarray.Dataset

    Examples
    --------
    >>> cubes = rx.open_catalog_grids("catalog.parquet")
    >>> len(cubes), dict(cubes[0].band_data.sizes)
    (1, {'time': 4, 'band': 4, 'y': 128, 'x': 128})
    """
    if isinstance(table, (str, os.PathLike)):
        from rumi_xarray.catalogs import index as tables

        url = os.fspath(table)
        with _reading_table(source_name(url)):
            rows = tables.read_all_rows(url, kwargs.get("storage_options"))
        # The rows leave their table here: their paths are resolved and judged against it.
        # Each row is checked against its digest as stored (the path as written), and the
        # digest renewed for the resolved path, which open_catalog checks again.
        _check_digests(rows, f" of {source_name(url)}")
        hrefs = tables.table_hrefs(url, kwargs.get("storage_options"))
        rows = rows.assign(path=[hrefs.follow(p, f"catalog row {i} of {source_name(url)}")
                                 for i, p in enumerate(rows["path"])])
        rows = _renew_digests(rows)
    else:
        rows = table.reset_index(drop=True)
    if rows.empty:
        raise RumiCatalogError("the catalog has no rows")
    if "header" not in rows.columns:
        raise RumiCatalogKeyError("the catalog lacks column(s) ['header']; build it with "
                                  "rumi_xarray.catalog(...)")
    keys = []
    for i in range(len(rows)):
        row = rows.iloc[i]
        try:
            g = Grid.from_metadata(reads.header_info(bytes(row["header"])))
        except (ValueError, TypeError) as exc:
            raise RumiCatalogError(f"catalog row {i} ({source_name(row['path'])}): bad "
                                   f"header: {exc}") from exc
        # What a cube shares (numbers of dates and frame layouts may differ).
        keys.append(repr((*g.stack_key, cell_list(row.get("transform")),
                          cell(row.get("crs")), cell_list(row.get("bands")))))
    groups = pd.Series(keys).groupby(keys, sort=False).groups
    return [open_catalog(rows.iloc[list(index)], **kwargs) for index in groups.values()]


def _extra_coords(rows: pd.DataFrame, steps: list[int]) -> dict[str, Any]:
    """Return the catalog's own columns (cloud cover, tile id...) as time coordinates.

    Columns of scalars beyond :data:`COLUMNS` follow their scene along time;
    columns of lists or other containers are left out.
    """
    out = {}
    for column in rows.columns:
        if column in COLUMNS or str(column).startswith("_"):
            continue
        values = rows[column].to_numpy()
        if values.dtype == object and not all(
                isinstance(v, (str, bool, int, float, np.generic)) or v is None for v in values):
            continue
        out[column] = ("time", np.repeat(values, steps))
    return out


def _labels(rows: pd.DataFrame, grid: Grid) -> dataset.CubeLabels:
    seconds = np.concatenate([np.asarray(s, dtype=np.int64) for s in rows["time_seconds"]])
    bounds_col = ([cell_list(b) for b in rows["time_bounds"]] if "time_bounds" in rows
                  else [None] * len(rows))
    bounds = None
    if all(b is not None for b in bounds_col):
        bounds = np.concatenate([np.asarray(b, dtype=np.int64).reshape(-1, 2)
                                 for b in bounds_col])
    elif any(b is not None for b in bounds_col):
        raise RumiCatalogError("the catalog mixes scenes with instants and with intervals")
    # What every scene agrees on, as xarray's combine_attrs="drop_conflicts" combines.
    described = Attributes.combine(dict.fromkeys(
        row_attributes(rows.iloc[i], f"catalog row {rows['_row'].iloc[i]} "
                                     f"({source_name(rows['path'].iloc[i])})")
        for i in range(len(rows))))
    return _reference_labels(rows.iloc[0], f"catalog row {rows['_row'].iloc[0]}", grid,
                             seconds, bounds, described)


def _reference_labels(ref: Any, where: str, grid: Grid, seconds: np.ndarray,
                      bounds: np.ndarray | None, attributes: Attributes) -> dataset.CubeLabels:
    """Return a cube's labels from its reference row (a mapping of catalog columns)."""
    transform = cell_list(ref.get("transform"))
    pip = cell(ref.get("pixel_is_point"))
    found = Sidecar.from_columns(ref, grid.dtype, f"{where} ({source_name(ref['path'])})")
    attrs = cf.cf_attributes(found.facts, grid.dtype, where)
    crs = cell(ref.get("crs"))
    grid_transform, grid_crs, point = georef.with_sidecar(
        None if transform is None else tuple(float(v) for v in transform),
        None if crs is None else int(crs), None if pip is None else bool(pip),
        found.georef(), where)
    return dataset.CubeLabels(
        bands=tuple(cell_list(ref["bands"]) or ()), seconds=seconds, bounds=bounds,
        transform=grid_transform, crs=grid_crs, pixel_is_point=point, cf=attrs,
        attributes=attributes)


def open_mfdataset(sources_: str | os.PathLike[str] | Iterable[Any], *, chunks: Any = None,
                   duplicates: str = "keep", band_as_variable: bool = False,
                   mask_and_scale: bool | None = None, decode_times: bool = True,
                   storage_options: dict[str, Any] | None = None,
                   max_workers: int = 16, resolution: Any = None) -> xr.Dataset:
    """Open many Rumi files (a list or a glob) as one dask-backed cube.

    Equivalent to ``open_catalog(catalog(sources), chunks=chunks)``: metadata
    are read concurrently once, then the cube is built from the rows. Like
    :func:`xarray.open_mfdataset`, the result is dask-backed: ``chunks=None``
    means ``{}`` (one read group per chunk).

    Parameters
    ----------
    sources_ : str, os.PathLike or iterable
        Paths, URLs or glob patterns (``s3://bucket/tile/*.rumi``).
    chunks : dict, int, str or tuple, optional
        As for :func:`open_catalog`; default ``{}``.
    duplicates, band_as_variable, mask_and_scale, decode_times
        As for :func:`open_catalog`.
    storage_options : dict, optional
    max_workers : int, default 16
    resolution : float or (float, float), optional
        Read the overview level this pixel size picks (as for
        :func:`open_catalog`).

    Returns
    -------
    xarray.Dataset

    Examples
    --------
    >>> cube = rx.open_mfdataset("scenes/*.rumi")
    >>> cube.sizes["time"], cube.band_data.chunks is not None
    (4, True)
    """
    table = catalog(list(sources_) if not isinstance(sources_, (str, os.PathLike)) else sources_,
                    storage_options=storage_options, max_workers=max_workers)
    return open_catalog(table, chunks={} if chunks is None else chunks,
                        duplicates=duplicates, band_as_variable=band_as_variable,
                        mask_and_scale=mask_and_scale, decode_times=decode_times,
                        storage_options=storage_options, resolution=resolution)

