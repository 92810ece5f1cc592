"""STAC loads over a stac-geoparquet archive: each output chunk finds its Items when it runs.

``rx.open_stac(table, ..., lookup="task")`` opens a load across grids (UTM
zones, overlapping footprints) without parsing or planning the archive's
Items on the client. Opening reads the ``datetime`` column of the rows the
selections keep (pushed down to pyarrow, so pruned row groups are never read)
and one Item (bands, dtype, nodata). The dask graph holds a :class:`TableLoad`:
the table's name, the selections, the output grid, its chunks and the time
groups (two numbers per output time step), never an Item. When an output
chunk's task runs, it asks the table for the Items whose ``bbox`` meets the
chunk's footprint and whose ``datetime`` falls in the chunk's time groups
(again pushed down to the row-group statistics), and plans that chunk alone
with :func:`rumi_xarray.stac.plan.block_plan`, exactly as an open-time plan
of the same Items would: the same windows, calls and mosaic order.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rumi_xarray.errors import RumiCatalogError
from rumi_xarray.model.cube import Scene
from rumi_xarray.sources.hrefs import Hrefs
from rumi_xarray.sources.location import locate
from rumi_xarray.stac import plan as stac_plan
from rumi_xarray.stac.parse import StacSource, catalog_hrefs, parse_item, with_hrefs

if TYPE_CHECKING:
    from rumi_xarray.catalogs.identity import FileIdentity

#: ``groupby`` values a task-time lookup supports.
GROUPBY = ("time", "solar_day")


@dataclass(frozen=True)
class TableLoad(stac_plan.Load):
    """A reprojecting load whose Items are looked up per output chunk, stored once in a graph.

    Parameters
    ----------
    url : str
        The stac-geoparquet file or folder.
    storage_options : mapping
    query : mapping or None
        The caller's property selection (STAC API query extension).
    bands : tuple of str
        Output bands, as the caller named them.
    group_lo, group_hi : numpy.ndarray
        POSIX seconds bounding each output time step's Items (inclusive).
    files : tuple of (str, FileIdentity)
        The table's files as the open saw them (size, footer digest): a task
        refuses a table whose files changed since.

    The output's (``geobox``, ``chunks``, ``dtype``, ``fill``, ``resampling``,
    ``token``) are those of :class:`~rumi_xarray.stac.plan.Load`.
    """

    url: str
    storage_options: Mapping[str, Any] = field(repr=False)
    query: Mapping[str, Any] | None
    bands: tuple[str, ...]
    group_lo: np.ndarray = field(repr=False)
    group_hi: np.ndarray = field(repr=False)
    #: How the archive's hrefs resolve and where they may lead, fixed at open (so a
    #: worker judges an Item as the client would, whatever its working directory).
    hrefs: Hrefs = field(default_factory=Hrefs, repr=False)
    files: tuple[tuple[str, FileIdentity], ...] = field(repr=False, default=())

    def items(self, it: int, iy: int, ix: int) -> list[dict[str, Any]]:
        """Return the Items one output chunk needs, read from the table now."""
        import pandas as pd

        from rumi_xarray.stac.geoparquet import _drop_nulls, filter_expression, read_checked

        t0, nt = sum(self.chunks[0][:it]), self.chunks[0][it]
        y0, x0 = sum(self.chunks[2][:iy]), sum(self.chunks[3][:ix])
        h, w = self.chunks[2][iy], self.chunks[3][ix]
        box = self.geobox[y0:y0 + h, x0:x0 + w].footprint("epsg:4326", npoints=16)
        west, south, east, north = box.boundingbox
        # Bounds are whole seconds, as Items' times are planned: the last one spans its second.
        when = (pd.Timestamp(int(self.group_lo[t0]), unit="s", tz="UTC"),
                pd.Timestamp(int(self.group_hi[t0 + nt - 1]) + 1, unit="s", tz="UTC")
                - pd.Timedelta(1, "ns"))
        def read(dataset: Any) -> list[dict[str, Any]]:
            from stac_geoparquet.arrow import stac_table_to_items

            expression = filter_expression(dataset.schema, bbox=(west, south, east, north),
                                           datetime=when, query=self.query)
            table = dataset.to_table(filter=expression)
            return [_drop_nulls(item) for item in stac_table_to_items(table)] if (
                table.num_rows) else []

        # The table is checked to be the one the open read, at every task.
        found = read_checked(self.url, self.storage_options, read, self.files or None)[0]
        return with_hrefs(found, self.hrefs)

    def local_plan(self, it: int, iy: int, ix: int) -> stac_plan.LoadPlan:
        """Return the open-time plan of exactly the Items of one output chunk."""
        from rumi_xarray.sources import resolve
        from rumi_xarray.stac.parse import select_bands

        t0, nt = sum(self.chunks[0][:it]), self.chunks[0][it]
        found = self.items(it, iy, ix)
        from rumi_xarray.stac.grid import read_levels

        sources = read_levels([parse_item(d, i, dict(self.storage_options) or None)
                               for i, d in enumerate(found)], self.geobox)
        for s in sources:
            if s.grid.dtype != self.dtype:
                raise RumiCatalogError(f"{s.describe()} stores {s.grid.dtype}, the load "
                                       f"{self.dtype}: load Items of one sample type")
        groups: list[list[stac_plan.Unit]] = [[] for _ in range(len(self.group_lo))]
        for i, s in enumerate(sources):
            for step, sec in enumerate(s.seconds):
                k = int(np.searchsorted(self.group_hi, sec, side="left"))
                if t0 <= k < t0 + nt and self.group_lo[k] <= sec:
                    groups[k].append(stac_plan.Unit(i, step, int(sec)))
        for k in range(t0, t0 + nt):
            groups[k].sort(key=lambda u: (u.seconds, sources[u.source].item_id, u.step))
        band_index: list[tuple[int, ...]] = []
        if sources:
            _, band_index = select_bands(sources, list(self.bands))
        scenes = tuple(Scene(resolve.resolve(s.href, storage_options=dict(
            self.storage_options) or None), s.header, s.position, overview=s.overview)
            for s in sources)
        return stac_plan.LoadPlan(
            sources=tuple(sources), scenes=scenes, band_index=tuple(band_index),
            geobox=self.geobox, groups=tuple(tuple(g) for g in groups), chunks=self.chunks,
            bins=stac_plan.bins(sources, self.geobox, self.chunks), dtype=self.dtype,
            fill=self.fill, resampling=self.resampling, token=self.token)

    def block_plan(self, it: int, ib: int, iy: int, ix: int) -> stac_plan.BlockPlan:
        """Plan one output chunk from the Items the table holds for it, looked up now."""
        return stac_plan.block_plan(self.local_plan(it, iy, ix), it, ib, iy, ix)


def open_columns(url: str, *, bbox: Sequence[float] | None, datetime: Any,
                 query: Mapping[str, Any] | None, storage_options: Mapping[str, Any] | None
                 ) -> tuple[np.ndarray, dict[str, Any], tuple[tuple[str, FileIdentity], ...]]:
    """Return the POSIX seconds of the selected Items, one of them, and the table's files.

    Parameters
    ----------
    url : str
    bbox, datetime, query
        As for :func:`rumi_xarray.stac.geoparquet.read_geoparquet`.
    storage_options : mapping, optional

    Returns
    -------
    tuple
        Sorted int64 seconds of every selected Item, the first Item (a dict),
        and each file of the table with its identity (for :class:`TableLoad`).
    """
    from stac_geoparquet.arrow import stac_table_to_items

    from rumi_xarray.stac.geoparquet import _drop_nulls, filter_expression, read_checked

    def read(dataset: Any) -> tuple[np.ndarray, dict[str, Any]]:
        expression = filter_expression(dataset.schema, bbox=bbox, datetime=datetime,
                                       query=query)
        times = dataset.to_table(columns=["datetime"], filter=expression).column("datetime")
        if len(times) == 0:
            raise RumiCatalogError(f"{url}: no STAC item matches bbox=/datetime=/query=")
        if times.null_count:
            raise RumiCatalogError(f"{url}: lookup='task' loads Items with a datetime; "
                                   f"{times.null_count} selected Item(s) have none "
                                   f"(intervals): use lookup='open'")
        seconds = np.sort(times.cast("int64").to_numpy() // _per_second(times.type))
        # No read-ahead: the scan stops in the first row group holding a match.
        first = dataset.scanner(filter=expression, batch_readahead=0,
                                fragment_readahead=0).head(1)
        item = _drop_nulls(next(iter(stac_table_to_items(first))))
        return seconds.astype(np.int64), with_hrefs([item], archive_hrefs(url))[0]

    (seconds, item), files = read_checked(url, storage_options, read)
    return seconds, item, files


def archive_hrefs(url: str) -> Hrefs:
    """Return how the hrefs of a stac-geoparquet file or folder resolve, and where they may lead.

    Parameters
    ----------
    url : str

    Returns
    -------
    Hrefs
    """
    return catalog_hrefs(url, folder=locate(url).local and os.path.isdir(url))


def _per_second(kind: Any) -> int:
    return {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[kind.unit]


def time_groups(seconds: np.ndarray, groupby: str, gbox: Any
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return per output time step: its time (first Item), and the bounds of its Items.

    Parameters
    ----------
    seconds : numpy.ndarray
        Sorted POSIX seconds of every selected Item.
    groupby : {"time", "solar_day"}
        As :func:`rumi_xarray.stac.plan.step_bounds` defines them for every load.
    gbox : odc.geo.geobox.GeoBox
        The output grid (its centre longitude for ``"solar_day"``).

    Returns
    -------
    tuple of numpy.ndarray
        Times, lower and upper bounds (inclusive POSIX seconds).
    """
    if groupby not in GROUPBY:
        raise RumiCatalogError(
            f"lookup='task' groups by {GROUPBY}, got groupby={groupby!r} ('id', which None "
            f"also means, gives every Item its own time step: use lookup='open')")
    lo, hi = stac_plan.step_bounds(seconds, groupby, gbox)
    unique, first = np.unique(lo, return_index=True)
    return seconds[first], unique, hi[first]


def token(url: str, *parts: Any) -> str:
    """Return a deterministic name for a load over a table (its files' sizes and times too)."""
    digest = hashlib.sha256(url.encode("utf-8", "replace"))
    if locate(url).local and os.path.exists(url):
        for root, _, names in os.walk(url) if os.path.isdir(url) else [("", [], [url])]:
            for name in sorted(names):
                st = os.stat(os.path.join(root, name))
                digest.update(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    digest.update(repr(parts).encode())
    return digest.hexdigest()[:32]


def reference_source(item: Mapping[str, Any], storage_options: Mapping[str, Any] | None
                     ) -> StacSource:
    """Parse the one Item an archive open reads."""
    return parse_item(dict(item), 0, dict(storage_options or {}) or None)
