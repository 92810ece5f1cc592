"""Catalog tables on disk or in object storage as indexes: cubes that read only what defines them.

A catalog written to Parquet (``rx.catalog(...).to_parquet(...)``, a folder
of such files, partitioned or not, on any fsspec filesystem) opens as a cube
by reading:

- every file's footer: the row-group statistics, which prune row groups a
  ``time=`` selection cannot touch and check that every row shares the
  reference row's grid (size, CRS, bands, dtype, tile, layout);
- the time column of the row groups left (``time_seconds``, 8 bytes a step);
- one row (the first scene in time order): grid, band texts, georeferencing,
  nodata/scale/offset.

Paths and headers stay in the table. The cube's scenes are a
:class:`TableScenes` sequence: a reference to the table (its files, the row
groups chosen and the order of their rows, as runs: a few numbers per row
group, not per scene), so the dask graph holds the same few kilobytes
whatever the number of scenes. A chunk task looks its scenes up when it runs:
it reads the row groups holding them (columns ``path``, ``header`` and the
grid facts, through pyarrow and fsspec with the catalog's storage options or
the environment), checks each scene it uses against the reference row
(naming the row and file when it differs), and keeps the row group in a
bounded per-process cache (:data:`CACHE_GROUPS`) for the next task.

Appending is writing another Parquet file into the folder: the next open
lists it; nothing is rewritten. Every file is identified by its content (size
and footer digest, :mod:`rumi_xarray.catalogs.identity`) at open and again at
every task read: a file rewritten after an open is refused by name, and the
row cache is keyed by that identity, so a fresh open of a rewritten table
never gets the old rows. Remote reads (footers, row groups) are retried as
Karu retries the scenes' own reads; what still fails is a typed error naming
the table and row group.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import pandas as pd

from rumi_xarray import options
from rumi_xarray.catalogs import identity, levels
from rumi_xarray.catalogs.identity import FileIdentity
from rumi_xarray.catalogs.table import (
    ATTRIBUTES,
    ROW_DIGEST,
    SECONDS_RANGE,
    SECONDS_RANGE_TEXT,
    check_row,
    check_row_digest,
    row_attributes,
)
from rumi_xarray.conventions import sidecar as sidecars
from rumi_xarray.conventions.attributes import Attributes
from rumi_xarray.conventions.sidecar import Sidecar
from rumi_xarray.errors import RumiCatalogError, RumiCatalogKeyError, RumiFileChangedError
from rumi_xarray.formatting import human_size
from rumi_xarray.model.cube import Scene, source_name
from rumi_xarray.model.grid import Grid
from rumi_xarray.sources import retry
from rumi_xarray.sources.hrefs import Hrefs

#: Row groups a process keeps decoded (paths, headers, grid facts) for later tasks.
CACHE_GROUPS = 64
#: File name endings taken as Parquet inside a catalog folder.
SUFFIXES = (".parquet", ".pq", ".parq")
#: Scalar columns of a row's grid, read with it: every row shares the first
#: ones with the reference row (checked on the row-group statistics at open, and
#: per scene when a task reads it); :data:`LAYOUT` may differ (a ragged cube).
UNIFORM = ("crs", "height", "width", "band_count", "time_count", "dtype", "tile_height",
           "tile_width", "frame_layout")
#: The grid columns rows may differ in: series files of periods hold different
#: numbers of dates, and frames of one date have another layout than frames of several.
LAYOUT = ("time_count", "frame_layout")
#: Columns a task reads to use and check a scene.
ROW_COLUMNS = ("path", "header", "time_seconds", "bands", "transform", "crs", "pixel_is_point",
               *sidecars.COLUMNS, levels.COLUMN)
#: The other columns a row's digest covers, read with it to check it
#: (:func:`rumi_xarray.catalogs.table.check_row`).
DIGEST_COLUMNS = ("time", "time_seconds", "time_bounds", ATTRIBUTES, ROW_DIGEST)


@dataclass(frozen=True)
class Group:
    """One row group chosen at open: file index, row-group number, its rows, its first row."""

    file: int
    group: int
    rows: int
    start: int = 0


@dataclass
class OpenCost:
    """What opening read from the table (reported by ``explain()``)."""

    files: int = 0
    groups_total: int = 0
    groups_read: int = 0
    rows: int = 0
    time_bytes: int = 0
    reference_bytes: int = 0
    coords: list[str] = field(default_factory=list)
    coord_bytes: int = 0
    attribute_bytes: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        text = (f"catalog table: {self.files} file(s); {self.groups_read} of "
                f"{self.groups_total} row group(s) chosen by their statistics, {self.rows} "
                f"scene row(s); open read their time column "
                f"({human_size(self.time_bytes)}) and one row group for the reference row "
                f"({human_size(self.reference_bytes)})")
        if self.coords:
            text += (f"; coordinate column(s) {', '.join(self.coords)} "
                     f"({human_size(self.coord_bytes)})")
        if self.attribute_bytes:
            text += (f"; the attributes column, for what the scenes agree on "
                     f"({human_size(self.attribute_bytes)})")
        if self.skipped:
            left = ", ".join(f"{k} ({human_size(v)})" for k, v in self.skipped.items())
            text += (f"; left in the table (coords=[...] or coords='all' reads them): {left}")
        return text + ". Chunk tasks read the rows of their own scenes when they run."


@dataclass(frozen=True)
class Reference:
    """The reference row: what every scene must share, as stored in the table."""

    bands: tuple[str, ...]
    transform: tuple[float, ...] | None
    crs: int | None
    sidecar: Sidecar
    grid: Grid


class TableIndex:
    """A picklable reference to the row groups of a catalog table and the order of their rows.

    Scene ``i`` of the cube is row ``offset[k] + (i - start[k])`` of row group
    ``groups[group[k]]``, where ``k`` is the run holding ``i``: a table
    already in time order is one run per row group.

    Parameters
    ----------
    url : str
        The table as the user named it: what fsspec opens (and, redacted, what
        messages name).
    files : tuple of str
        Paths of the Parquet files on their filesystem.
    groups : tuple of Group
    runs : numpy.ndarray
        ``(n_runs, 3)`` int64: first scene, group index, row offset.
    scenes : int
    reference : Reference
    storage_options : dict
    local : bool
        The files are local paths (pyarrow reads them directly).
    identities : tuple of FileIdentity
        What each file was at open (size, footer digest): every task read
        compares, and the row cache is keyed by them.
    hrefs : Hrefs, optional
        How the table's paths resolve (relative ones against the table's own
        location) and where they may lead, fixed at open so that every worker
        resolves a row as the client does; by default the table's location
        with no allow-list.
    overview : (int, int), optional
        ``(level, factor)`` when every scene is read at that overview level
        (``resolution=``), with ``factors`` the levels every row must record.
    factors : tuple of int
    ragged : bool, default False
        Rows differ in their number of time steps or frame layout: each scene
        keeps its own grid (``Scene.grid``), checked against the reference
        row for what a cube shares (:attr:`Grid.stack_key`) only.
    """

    def __init__(self, url: str, files: tuple[str, ...], groups: tuple[Group, ...],
                 runs: np.ndarray, scenes: int, reference: Reference,
                 storage_options: Mapping[str, Any] | None, local: bool,
                 identities: tuple[FileIdentity, ...], hrefs: Hrefs | None = None,
                 overview: tuple[int, int] | None = None,
                 factors: tuple[int, ...] = (),
                 ragged: bool = False) -> None:
        self.url = url
        self.hrefs = hrefs if hrefs is not None else Hrefs.of_catalog(url)
        self.files = files
        self.groups = groups
        self.runs = np.ascontiguousarray(runs, dtype=np.int64)
        self.scenes = scenes
        self.reference = reference
        self.storage_options = dict(storage_options or {})
        self.local = local
        self.identities = identities
        self.overview = overview
        self.factors = tuple(factors)
        self.ragged = ragged
        self.token = (url, files, identities,
                      tuple((g.file, g.group, g.rows) for g in groups), self.runs.tobytes(),
                      overview)

    def locate(self, scene: int) -> tuple[int, int]:
        """Return ``(group index, row within the group)`` of cube scene ``scene``."""
        k = int(np.searchsorted(self.runs[:, 0], scene, side="right")) - 1
        start, group, offset = self.runs[k].tolist()
        return group, offset + scene - start

    def name(self) -> str:
        """Return the table's credential-free name."""
        return source_name(self.url)

    def file_name(self, file: int) -> str:
        """Return a file of the table by name, as short as still says which."""
        return file_label(self.url, self.files, file)


def file_label(url: str, files: tuple[str, ...], file: int) -> str:
    """Return the name of one file of a table: the table's name, then the file in it."""
    if len(files) == 1:
        return source_name(url)
    root = url.split("://", 1)[-1].split("?", 1)[0].rstrip("/")
    path = files[file]
    if root and root in path:
        rel = path[path.index(root) + len(root):].lstrip("/")
        return f"{source_name(url).rstrip('/')}/{rel}"
    return source_name(path)


def _filesystem(url: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(url, **dict(storage_options or {}))


def _open_file(index: TableIndex, file: int) -> Any:
    """Return a ``pyarrow.parquet.ParquetFile`` of one of the table's files, as opened.

    Raises :class:`~rumi_xarray.errors.RumiFileChangedError` when the file is not
    the one the open read.
    """
    fs = None if index.local else _filesystem(index.url, index.storage_options)[0]
    pf, _ = identity.open_file(fs, index.files[file], index.file_name(file), local=index.local,
                               expected=index.identities[file])
    return pf


# --- open -------------------------------------------------------------------------


def list_files(url: str, storage_options: Mapping[str, Any] | None
               ) -> tuple[Any, tuple[str, ...], bool]:
    """Return the filesystem, the Parquet files of a table (a file or a folder) and locality.

    Folders are walked (hive partitions such as ``year=2024/`` included);
    files and folders whose names start with ``_`` or ``.`` are metadata or
    work in progress (``_SUCCESS``, ``.part``), as Spark and pyarrow treat them.
    """
    fs, root = _filesystem(url, storage_options)
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple) else fs.protocol
    local = protocol in ("file", "local")
    if protocol in ("http", "https"):
        return fs, (root,), False  # a server has no listing: one file
    if not fs.isdir(root):
        if not fs.exists(root):
            raise FileNotFoundError(root)
        return fs, (root,), local
    found = []
    for path in sorted(fs.find(root)):
        rel = path[len(root.rstrip("/")):].strip("/")
        if any(part.startswith(("_", ".")) for part in rel.split("/")):
            continue
        if path.endswith(SUFFIXES):
            found.append(path)
    if not found:
        raise RumiCatalogError(f"{source_name(url)}: the folder holds no Parquet file "
                               f"({', '.join(SUFFIXES)})")
    return fs, tuple(found), local


def table_hrefs(url: str, storage_options: Mapping[str, Any] | None,
                files: tuple[str, ...] | None = None) -> Hrefs:
    """Return how the paths of a table on disk resolve and where they may lead.

    Relative paths resolve against the table's own location: beside a Parquet
    file, inside a folder of them; the allow-list is the caller's now.

    Parameters
    ----------
    url : str
    storage_options : mapping, optional
    files : tuple of str, optional
        The table's files, as :func:`list_files` found them (listed again if not given).

    Returns
    -------
    Hrefs
    """
    _, root = _filesystem(url, storage_options)
    if files is None:
        files = list_files(url, storage_options)[1]
    return Hrefs.of_catalog(url, folder=files != (root,),
                            allowed=options.option("allowed_hrefs"))


def read_all_rows(url: str, storage_options: Mapping[str, Any] | None) -> pd.DataFrame:
    """Read every row of a table on disk, for the few uses that need them all at the client.

    Opening a cube never calls this (tasks read their own rows); splitting a
    catalog by grid does, since which grid a row belongs to is in the row.
    """
    import pyarrow as pa  # type: ignore[import-untyped]

    def read() -> pd.DataFrame:
        fs, files, local = list_files(url, storage_options)
        parts = [identity.open_file(fs, f, file_label(url, files, k), local=local)[0].read()
                 for k, f in enumerate(files)]
        return pa.concat_tables(parts, promote_options="default").to_pandas()

    return retry.retrying(read, f"reading the catalog table {source_name(url)}",
                          source=source_name(url))


def _column_index(md: Any, name: str) -> int | None:
    """Return the leaf column of ``name`` (a scalar, or the elements of a list)."""
    return _leaf_columns(md).get(name)


def _leaf_columns(md: Any) -> dict[str, int]:
    """Return each top-level column's first leaf column (a scalar, or a list's elements).

    One walk of the schema per file: pyarrow builds a new object for every
    ``schema.column(j)`` (and ``ParquetFile.schema_arrow``) it is asked for,
    which cost an open of a small table milliseconds when asked per column.
    """
    out: dict[str, int] = {}
    schema = md.schema
    for j in range(md.num_columns):
        path = schema.column(j).path
        out.setdefault(path, j)
        out.setdefault(path.split(".", 1)[0], j)
    return out


def _stats(rg: Any, j: int | None) -> tuple[Any, Any] | None:
    if j is None:
        return None
    st = rg.column(j).statistics
    if st is None or not st.has_min_max:
        return None
    return st.min, st.max


def _seconds(value: Any, end: bool) -> int:
    """Return POSIX seconds of a ``time=`` bound (a partial date string spans its period)."""
    if isinstance(value, str):
        period = pd.Period(value)
        stamp = period.end_time if end else period.start_time
    else:
        stamp = pd.Timestamp(value)
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    # Whole seconds inside the bound: a period's end (23:59:59.999999999) keeps its last
    # second and never reaches the next period's first.
    seconds = stamp.value / 1e9
    return int(np.floor(seconds)) if end else int(np.ceil(seconds))


def time_bounds(time: Any) -> tuple[int | None, int | None]:
    """Return the inclusive POSIX-second bounds of a ``time=`` selection.

    Parameters
    ----------
    time : slice, str, datetime or None
        A slice of labels (``slice("2024-01", "2024-12")``, either end open), or
        one label (``"2024-06"``: that month).

    Returns
    -------
    tuple
        ``(first, last)`` seconds, None where open.
    """
    if time is None:
        return None, None
    if isinstance(time, slice):
        if time.step is not None:
            raise RumiCatalogError(f"time= takes a slice without a step, got {time!r}")
        lo = None if time.start is None else _seconds(time.start, end=False)
        hi = None if time.stop is None else _seconds(time.stop, end=True)
        return lo, hi
    if isinstance(time, (str, dt.date, np.datetime64)):
        return _seconds(time, end=False), _seconds(time, end=True)
    raise RumiCatalogError(f"time= takes a slice of dates or one date, got {time!r}")


def _uniform_check(stats: dict[str, tuple[Any, Any]], ref: dict[str, Any], where: str) -> None:
    """Raise when a row group's statistics show a row that differs from the reference."""
    for key, (lo, hi) in stats.items():
        want = ref.get(key)
        if want is None:
            continue
        if isinstance(lo, bytes):
            lo, hi = lo.decode(), hi.decode()
        if lo != want or hi != want:
            show = epsg_label if key == "crs" else _plain_number
            raise RumiCatalogError(
                f"{where}: rows have {key} from {show(lo)} to {show(hi)}, the reference row "
                f"{show(want)}: every scene of a cube shares one grid (select one grid's "
                f"rows). {GRIDS_HINT}")


def _plain_number(value: Any) -> str:
    """Return a value for messages, an integral float (a column with nulls) as an int."""
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value)


#: What to do with a table of several grids (CRS, size, transform), for messages.
GRIDS_HINT = ("rx.open_catalog_grids(table) opens one cube per grid; "
              "rx.open_stac(rx.to_stac(table), crs=..., resolution=...) reprojects every "
              "scene onto one grid")


def epsg_label(value: Any) -> str:
    """Return ``EPSG:<code>`` of a catalog ``crs`` value (an integer, maybe stored as float)."""
    if value is None or value is pd.NA or (isinstance(value, (float, np.floating))
                                           and not np.isfinite(value)):
        return "no CRS"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f"EPSG:{int(number)}" if number == int(number) else str(value)


def _list_values(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return the flat int64 values and offsets of a list<int> Arrow column."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = np.asarray(array.offsets, dtype=np.int64)
    values = np.asarray(array.values.fill_null(0), dtype=np.int64)
    return values, offsets


def open_index(url: str, *, storage_options: Mapping[str, Any] | None, time: Any,
               duplicates: str, coords: Any, resolution: Any = None
               ) -> tuple[TableIndex, dict[str, Any]]:
    """Read what defines a cube over a catalog table, and the index its tasks use.

    Parameters
    ----------
    url : str
        A Parquet file or folder, local or any fsspec URL.
    storage_options : mapping, optional
    time : slice, str, datetime or None
        Scenes with a time step in this selection (see :func:`time_bounds`).
    duplicates : {"keep", "first", "last", "error"}
        Scenes with identical times, in table order (a table on disk is not
        read for paths to order ties by).
    coords : "numeric", "all", sequence of str or None
        Extra columns read as time coordinates.
    resolution : float or (float, float), optional
        Read every scene at the overview level this resolution picks
        (``rumi_xarray.catalogs.levels``), chosen on the reference row.

    Returns
    -------
    tuple
        The index and the open-time facts: ``seconds`` (``(n, T)`` int64 in
        cube order), ``bounds`` (``(n, T, 2)`` or None), ``reference`` (a
        row as a dict, at the level read), ``coords`` (name -> values in
        cube order), ``cost``.

    Raises
    ------
    RumiCatalogError
        A table that cannot be a cube (corrupt footer, missing columns, rows
        of several grids...).
    RumiIOError
        A remote read still failing after Karu's retries.
    """
    # One open is one read of the table: a transient failure anywhere in it makes the
    # whole open again (nothing of a half-read table is kept).
    return retry.retrying(lambda: _open_index(url, storage_options=storage_options, time=time,
                                              duplicates=duplicates, coords=coords,
                                              resolution=resolution),
                          f"opening the catalog table {source_name(url)}",
                          source=source_name(url))


def _open_index(url: str, *, storage_options: Mapping[str, Any] | None, time: Any,
                duplicates: str, coords: Any, resolution: Any = None
                ) -> tuple[TableIndex, dict[str, Any]]:
    fs, files, local = list_files(url, storage_options)
    lo, hi = time_bounds(time)
    cost = OpenCost(files=len(files))
    metas = []
    identities = []
    for k, path in enumerate(files):
        pf, known = identity.open_file(fs, path, file_label(url, files, k), local=local)
        metas.append(pf)
        identities.append(known)
    import pyarrow as pa

    # Files appended later may add or lack extra columns: one schema for all of them.
    schemas = [m.schema_arrow for m in metas]  # built anew on every access: once here
    schema = pa.unify_schemas(schemas)
    missing = [c for c in ("path", "header", "time_seconds", "bands") if c not in schema.names]
    if missing:
        raise RumiCatalogKeyError(f"{source_name(url)}: the catalog lacks column(s) "
                                  f"{missing}; build it with rumi_xarray.catalog(...)")
    chosen: list[Group] = []
    uniform: list[tuple[str, dict[str, tuple[Any, Any]]]] = []
    for f, pf in enumerate(metas):
        md = pf.metadata
        first_row = 0
        leaves = _leaf_columns(md)
        t_col = leaves.get("time_seconds")
        cols = {k: leaves.get(k) for k in UNIFORM if k in schemas[f].names}
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            cost.groups_total += 1
            start, first_row = first_row, first_row + rg.num_rows
            if rg.num_rows == 0:
                continue
            span = _stats(rg, t_col)
            if span is not None and ((lo is not None and span[1] < lo)
                                     or (hi is not None and span[0] > hi)):
                continue  # pruned by its statistics: never read
            chosen.append(Group(f, g, rg.num_rows, start))
            found = {k: s for k, j in cols.items() if (s := _stats(rg, j)) is not None}
            uniform.append((f"{source_name(files[f])} row group {g}", found))
    if not chosen:
        raise RumiCatalogError(f"{source_name(url)}: no catalog row has a time in "
                               f"{time!r}" if time is not None else
                               f"{source_name(url)}: the catalog has no rows")
    cost.groups_read = len(chosen)

    # The time column of the chosen row groups (and interval bounds when present).
    by_file: dict[int, list[int]] = {}
    for grp in chosen:
        by_file.setdefault(grp.file, []).append(grp.group)
    seconds_parts, bounds_parts = [], []
    has_bounds = "time_bounds" in schema.names
    for f, gs in by_file.items():
        here = has_bounds and "time_bounds" in schemas[f].names
        tab = metas[f].read_row_groups(gs, columns=["time_seconds",
                                                    *(["time_bounds"] if here else [])])
        cost.time_bytes += int(tab.nbytes)
        seconds_parts.append(tab.column("time_seconds"))
        if has_bounds:
            bounds_parts.append(tab.column("time_bounds") if here else pa.chunked_array(
                [pa.nulls(tab.num_rows, schema.field("time_bounds").type)]))
    tcol = pa.chunked_array([c for part in seconds_parts for c in part.chunks])
    values, offsets = _list_values(tcol)
    counts = np.diff(offsets)
    if len(counts) == 0 or counts.min() == 0:
        raise RumiCatalogError(f"{source_name(url)}: a catalog row has no time step "
                               f"(time_seconds)")
    flat = tcol.combine_chunks()
    if flat.null_count or flat.values.null_count:
        raise RumiCatalogError(f"{source_name(url)}: a catalog row has a null time "
                               f"(time_seconds)")
    # One row of the matrix per catalog row; rows of fewer steps (series files of
    # periods) are padded with a value below every time, so that rows order and
    # compare as the tuples of their steps do (a shorter prefix first).
    seconds, valid = _padded(values, offsets)
    outside = valid & ((seconds < SECONDS_RANGE[0]) | (seconds > SECONDS_RANGE[1]))
    if outside.any():
        bad = int(np.flatnonzero(outside.any(axis=1))[0])
        raise RumiCatalogError(f"{source_name(url)}: catalog row {bad} (of the rows read, "
                               f"in table order) has a time outside "
                               f"{SECONDS_RANGE_TEXT}: "
                               f"{seconds[bad][valid[bad]].tolist()}")
    bounds = None
    if has_bounds:
        bcol = pa.chunked_array([c for part in bounds_parts if part is not None
                                 for c in part.chunks])
        nulls = bcol.null_count
        if nulls == 0:
            bvals, boffsets = _list_values(bcol)
            if not np.array_equal(np.diff(boffsets), 2 * counts):
                raise RumiCatalogError(f"{source_name(url)}: a catalog row's time_bounds do "
                                       f"not hold two bounds per time step")
            bounds = bvals.reshape(-1, 2)  # flat, in table order
        elif nulls != len(bcol):
            raise RumiCatalogError(f"{source_name(url)}: the catalog mixes scenes with "
                                   "instants and with intervals")
    # Rows with a step in the selection, in time order (ties in table order).
    keep = np.ones(len(seconds), dtype=bool)
    if lo is not None:
        keep &= (valid & (seconds >= lo)).any(axis=1)
    if hi is not None:
        keep &= (valid & (seconds <= hi)).any(axis=1)
    rows = np.flatnonzero(keep)
    if len(rows) == 0:
        raise RumiCatalogError(f"{source_name(url)}: no catalog row has a time in {time!r}")
    order = rows[np.lexsort(seconds[rows].T[::-1])] if seconds.shape[1] > 1 else rows[
        np.argsort(seconds[rows, 0], kind="stable")]
    order = _duplicates(order, seconds, duplicates, url)
    cost.rows = len(order)

    # Global row number -> (group index, row within group), then runs of consecutive rows.
    starts = np.concatenate([[0], np.cumsum([g.rows for g in chosen])]).astype(np.int64)
    group_of = np.searchsorted(starts, order, side="right") - 1
    within = order - starts[group_of]
    breaks = np.ones(len(order), dtype=bool)
    breaks[1:] = (group_of[1:] != group_of[:-1]) | (within[1:] != within[:-1] + 1)
    first = np.flatnonzero(breaks)
    runs = np.stack([first, group_of[first], within[first]], axis=1)

    # The reference row: the first scene in time order.
    ref_group = chosen[int(group_of[0])]
    names = [c for c in (*ROW_COLUMNS, *UNIFORM, *DIGEST_COLUMNS) if c in schema.names]
    ref_tab = metas[ref_group.file].read_row_group(ref_group.group, columns=names)
    cost.reference_bytes = int(ref_tab.nbytes)
    reference = {k: v[0] for k, v in ref_tab.slice(int(within[0]), 1).to_pydict().items()}
    check_row_digest(reference, f"catalog row {ref_group.start + int(within[0])} of "
                                f"{file_label(url, files, ref_group.file)} "
                                f"({source_name(reference['path'])})")
    for where, found in uniform:
        _uniform_check({k: v for k, v in found.items() if k not in LAYOUT}, reference, where)
    # Rows of other numbers of steps, or (by the statistics) of other frame layouts.
    ragged = bool(counts[order].min() != counts[order].max()) or any(
        _varies(found, reference, LAYOUT) for _, found in uniform)
    extra = _coords(metas, by_file, chosen, schema, coords, order, cost)
    described = _attributes(metas, by_file, chosen, schema, order, cost, url)
    from rumi_xarray.native import reads

    label = f"{ref_group.start + int(within[0])} of {file_label(url, files, ref_group.file)}"
    # At a resolution: the level it picks, on the reference row (checked as stored above).
    where = f"catalog row {label} ({source_name(reference['path'])})"
    factors = levels.factors_of(reference, where)
    overview = None
    if resolution is not None:
        level = levels.choose(reference.get("transform"), factors, resolution, where)
        if level is not None:
            reference = levels.row_at_level(reference, level, where)
            overview = (level, factors[level])
    try:
        grid = Grid.from_metadata(reads.header_info(bytes(reference["header"])))
    except (ValueError, TypeError) as exc:
        raise RumiCatalogError(f"catalog row {label} ({source_name(reference['path'])}): "
                               f"bad header: {exc}") from exc
    check_row(reference, grid, f"catalog row {label} ({source_name(reference['path'])})")
    ref = Reference(bands=tuple(reference["bands"] or ()),
                    transform=None if reference.get("transform") is None
                    else tuple(float(v) for v in reference["transform"]),
                    crs=reference.get("crs"),
                    sidecar=Sidecar.from_columns(
                        reference, grid.dtype,
                        f"catalog row {label} ({source_name(reference['path'])})"),
                    grid=grid)
    hrefs = table_hrefs(url, storage_options, files)
    index = TableIndex(url, files, tuple(chosen), runs, len(order), ref, storage_options,
                       local, tuple(identities), hrefs, overview, tuple(factors),
                       ragged=ragged)
    steps_in = np.concatenate([np.arange(offsets[r], offsets[r + 1]) for r in order])
    facts = {"seconds": values[steps_in], "counts": counts[order],
             "bounds": None if bounds is None else bounds[steps_in],
             "reference": reference, "reference_label": label, "coords": extra,
             "attributes": described, "cost": cost, "ragged": ragged}
    return index, facts


def _attributes(metas: list[Any], by_file: dict[int, list[int]], chosen: list[Group],
                schema: Any, order: np.ndarray, cost: OpenCost, url: str) -> Attributes:
    """Return what the chosen scenes' attributes agree on (``drop_conflicts``).

    The ``attributes`` column of the chosen row groups is read (its size is in
    ``explain()``); each distinct text is parsed once.
    """
    if ATTRIBUTES not in schema.names:
        return Attributes()
    cells: list[Any] = []
    for f, gs in by_file.items():
        if ATTRIBUTES in metas[f].schema_arrow.names:
            tab = metas[f].read_row_groups(gs, columns=[ATTRIBUTES])
            cost.attribute_bytes += int(tab.nbytes)
            cells.extend(tab.column(ATTRIBUTES).to_pylist())
        else:  # a file appended without the column: its rows have none
            cells.extend([None] * sum(g.rows for g in chosen if g.file == f))
    texts = dict.fromkeys(cells[int(i)] for i in order)
    return Attributes.combine(
        [row_attributes({ATTRIBUTES: t}, f"the attributes column of {source_name(url)}")
         for t in texts])


def _padded(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each row's steps as a padded ``(rows, most steps)`` matrix, and where they are.

    Padding is below every valid time (:data:`SECONDS_RANGE`), so rows compare
    and sort as the tuples of their steps.
    """
    counts = np.diff(offsets)
    width = int(counts.max())
    if int(counts.min()) == width:
        return values.reshape(-1, width), np.ones((len(counts), width), dtype=bool)
    valid = np.arange(width)[None, :] < counts[:, None]
    out = np.full((len(counts), width), SECONDS_RANGE[0] - 1, dtype=np.int64)
    out[valid] = values
    return out, valid


def _varies(found: Mapping[str, tuple[Any, Any]], reference: Mapping[str, Any],
            keys: Sequence[str]) -> bool:
    """Return whether a row group's statistics show rows unlike the reference row."""
    for key in keys:
        span = found.get(key)
        want = reference.get(key)
        if span is None or want is None:
            continue
        lo, hi = (v.decode() if isinstance(v, bytes) else v for v in span)
        if lo != want or hi != want:
            return True
    return False


def _duplicates(order: np.ndarray, seconds: np.ndarray, duplicates: str, url: str
                ) -> np.ndarray:
    """Apply the duplicates policy to rows in time order (ties in table order)."""
    if duplicates == "keep" or len(order) < 2:
        return order
    keys = seconds[order]
    same = np.all(keys[1:] == keys[:-1], axis=1)
    if not same.any():
        return order
    if duplicates == "error":
        i = int(np.flatnonzero(same)[0])
        raise RumiCatalogError(
            f"{source_name(url)}: catalog rows {int(order[i])} and {int(order[i + 1])} (in "
            f"table order) share the time {keys[i].tolist()}; pass duplicates='first', "
            f"'last' or 'keep'")
    if duplicates == "first":
        return order[np.concatenate([[True], ~same])]
    return order[np.concatenate([~same, [True]])]


def _coords(metas: list[Any], by_file: dict[int, list[int]], chosen: list[Group],
            schema: Any, coords: Any, order: np.ndarray, cost: OpenCost) -> dict[str, Any]:
    """Read the extra columns that become time coordinates, in cube order."""
    import pyarrow as pa

    from rumi_xarray.catalogs.table import COLUMNS

    candidates = [f for f in schema if f.name not in COLUMNS and not f.name.startswith("_")
                  and not (pa.types.is_list(f.type) or pa.types.is_struct(f.type)
                           or pa.types.is_map(f.type) or pa.types.is_large_list(f.type)
                           or pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type))]
    numeric = [f.name for f in candidates
               if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
               or pa.types.is_boolean(f.type) or pa.types.is_temporal(f.type)]
    if coords == "numeric":
        wanted = numeric
    elif coords == "all":
        wanted = [f.name for f in candidates]
    elif coords is None:
        wanted = []
    else:
        wanted = [str(c) for c in ([coords] if isinstance(coords, str) else coords)]
        unknown = [c for c in wanted if c not in schema.names]
        if unknown:
            raise RumiCatalogKeyError(f"coords= names column(s) {unknown} the catalog "
                                      f"does not have")
    out: dict[str, Any] = {}
    if wanted:
        parts = []
        for f, gs in by_file.items():
            have = [c for c in wanted if c in metas[f].schema_arrow.names]
            tab = metas[f].read_row_groups(gs, columns=have)
            cost.coord_bytes += int(tab.nbytes)
            for c in wanted:  # a column this file lacks is null in its rows
                if c not in have:
                    tab = tab.append_column(schema.field(c), pa.nulls(tab.num_rows,
                                                                      schema.field(c).type))
            parts.append(tab.select(wanted))
        table = pa.concat_tables(parts)
        for name in wanted:
            out[name] = table.column(name).to_numpy(zero_copy_only=False)[order]
        cost.coords = list(wanted)
    # What was left in the table, by its compressed size in the chosen row groups.
    for f in (c.name for c in candidates if c.name not in wanted):
        size = 0
        for grp in chosen:
            md = metas[grp.file].metadata
            j = _column_index(md, f)
            if j is not None:
                size += md.row_group(grp.group).column(j).total_compressed_size
        cost.skipped[f] = size
    return out


# --- run time: the rows of a task's scenes -----------------------------------------


@dataclass
class _Rows:
    """One row group's rows as a task uses them (cached per process)."""

    columns: dict[str, list[Any]]
    scenes: dict[int, Scene] = field(default_factory=dict)


_cache: OrderedDict[tuple[Any, ...], _Rows] = OrderedDict()
_cache_lock = threading.Lock()
#: Row groups (and their rows) this process has read for tasks, since it started.
GROUP_READS = {"groups": 0, "rows": 0}


def clear_row_cache() -> None:
    """Forget the row groups this process has read."""
    with _cache_lock:
        _cache.clear()


def _rows(index: TableIndex, group: int) -> _Rows:
    key = (index.token, group)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    grp = index.groups[group]
    where = f"{index.file_name(grp.file)} row group {grp.group}"

    def read() -> dict[str, list[Any]]:
        # The identity check and the read are one attempt: a retry checks again.
        pf = _open_file(index, grp.file)
        md = pf.metadata
        if grp.group >= md.num_row_groups or md.row_group(grp.group).num_rows != grp.rows:
            raise RumiFileChangedError(
                f"{where}: the catalog file changed since the cube was opened (its row "
                f"groups differ); open the catalog again")
        present = set(pf.schema_arrow.names)  # pyarrow builds the schema on every access
        names = [c for c in (*ROW_COLUMNS, *UNIFORM, *DIGEST_COLUMNS) if c in present]
        columns: dict[str, list[Any]] = pf.read_row_group(grp.group, columns=names).to_pydict()
        return columns

    rows = _Rows(retry.retrying(read, f"{where}: reading the rows of a task's scenes",
                                source=index.name()))
    with _cache_lock:
        GROUP_READS["groups"] += 1
        GROUP_READS["rows"] += grp.rows
        _cache[key] = rows
        while len(_cache) > CACHE_GROUPS:
            _cache.popitem(last=False)
    return rows


def _check_row(index: TableIndex, columns: dict[str, list[Any]], row: int, label: str,
               path: Any, header: bytes) -> Grid:
    """Return the row's grid; raise naming the row when it cannot join the cube."""
    from rumi_xarray.native import reads

    check_row_digest({k: v[row] for k, v in columns.items()},
                     f"catalog row {label} ({source_name(path)})")
    ref = index.reference
    problems = []
    try:
        g = Grid.from_metadata(reads.header_info(header))
    except (ValueError, TypeError) as exc:
        raise RumiCatalogError(f"catalog row {label} ({source_name(path)}): bad header: "
                               f"{exc}") from exc
    check_row({k: v[row] for k, v in columns.items()}, g,
              f"catalog row {label} ({source_name(path)})")
    g0 = ref.grid
    if (g.height, g.width) != (g0.height, g0.width):
        problems.append(f"size {g.height}x{g.width} != {g0.height}x{g0.width}")
    if g.stack_key[2:] != g0.stack_key[2:] or (not index.ragged and not g.same_layout(g0)):
        problems.append(f"frame grid (tile {g.tile_height}, layout {g.frame_layout!r}, "
                        f"bands {g.bands}, dtype {g.dtype}, T {g.time_count}) differs from "
                        f"the reference row's (tile {g0.tile_height}, layout "
                        f"{g0.frame_layout!r}, bands {g0.bands}, dtype {g0.dtype}, T "
                        f"{g0.time_count})")
    if tuple(columns["bands"][row] or ()) != ref.bands:
        problems.append(f"bands {columns['bands'][row]} != {list(ref.bands)}")
    transform = columns.get("transform", [None] * (row + 1))[row]
    if (None if transform is None else tuple(float(v) for v in transform)) != ref.transform:
        # check_row has refused null and non-finite coefficients
        problems.append("transform differs")
    crs = columns.get("crs", [None] * (row + 1))[row]
    if crs != ref.crs:
        problems.append(f"CRS EPSG:{crs} != EPSG:{ref.crs}")
    problems += Sidecar.from_columns({k: columns[k][row] for k in sidecars.COLUMNS
                                      if k in columns}, g.dtype,
                                     f"catalog row {label} ({source_name(path)})"
                                     ).differences(ref.sidecar)
    if problems:
        raise RumiCatalogError(f"catalog row {label} ({source_name(path)}) cannot be stacked "
                               f"with the reference row: " + "; ".join(problems))
    return g


class TableScenes(Sequence[Scene]):
    """The scenes of a cube over a catalog table, looked up when a task uses them.

    Pickles as its :class:`TableIndex` (plus the reference scene), never as rows.

    Parameters
    ----------
    table : TableIndex
    first : Scene
        Scene 0 (the reference row), known at open.
    cost : str
        What the open read from the table, said by ``explain()``.
    """

    def __init__(self, table: TableIndex, first: Scene, cost: str = "") -> None:
        self.table = table
        self.first = first
        self.cost = cost

    def __len__(self) -> int:
        return self.table.scenes

    @overload
    def __getitem__(self, i: int) -> Scene: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Scene]: ...

    def __getitem__(self, i: int | slice) -> Scene | Sequence[Scene]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        if i == 0:
            return self.first
        return self.scene(i)

    def __iter__(self) -> Iterator[Scene]:
        for i in range(len(self)):
            yield self[i]

    def scene(self, i: int) -> Scene:
        """Return scene ``i``, reading (or reusing) the row group that holds it."""
        from rumi_xarray.sources import resolve

        group, row = self.table.locate(i)
        rows = _rows(self.table, group)
        scene = rows.scenes.get(row)
        if scene is not None:
            return scene
        cols = rows.columns
        grp = self.table.groups[group]
        label = f"{grp.start + row} of {self.table.file_name(grp.file)}"
        overview = self.table.overview
        if overview is not None:
            # Checked as stored, then read as its level file (as the reference row is).
            stored = {k: v[row] for k, v in cols.items()}
            where = f"catalog row {label} ({source_name(stored.get('path'))})"
            check_row_digest(stored, where)
            if tuple(levels.factors_of(stored, where)) != self.table.factors:
                raise RumiCatalogError(
                    f"{where}: its overview levels (factors "
                    f"{levels.factors_of(stored, where)}) differ from the reference row's "
                    f"({list(self.table.factors)}); a cube read at a resolution needs the "
                    f"same levels in every scene")
            cols = {k: [v] for k, v in levels.row_at_level(stored, overview[0], where).items()}
        at = 0 if overview is not None else row
        path, header = cols["path"][at], cols["header"][at]
        if not isinstance(header, bytes):
            raise RumiCatalogError(f"catalog row {label} ({source_name(path)}): bad header: "
                                   f"{header!r} is not the bytes of a Rumi header")
        # Judged before anything is opened, by the rules fixed when the table was opened.
        target = self.table.hrefs.follow(path, f"catalog row {label}")
        grid = _check_row(self.table, cols, at, label, path, header)
        scene = Scene(resolve.resolve(target,
                                      storage_options=self.table.storage_options or None),
                      header, label, overview=overview,
                      grid=grid if self.table.ragged else None)
        rows.scenes[row] = scene
        return scene

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TableScenes) and other.table.token == self.table.token

    def __hash__(self) -> int:
        return hash(self.table.token)

    def __dask_tokenize__(self) -> Any:
        return ("rumi-table-scenes", self.table.token)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TableScenes, (self.table, self.first, self.cost))

    def __repr__(self) -> str:
        return f"TableScenes({self.table.name()}, {len(self)} scenes)"
