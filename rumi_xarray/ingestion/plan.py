"""Planning an ingest on the client: what each output holds, where it comes from, what to skip.

An ingest turns sources (STAC Items whose assets are GeoTIFF/COG files, or
files matched by globs) into :class:`Task` objects, one per output Rumi file.
A task carries everything its worker needs (hrefs, band labels, times, write
parameters) as plain picklable values, and a *key*: a digest of the sources'
identity (size, modification time or ETag) and of the parameters. A rerun
compares each task's key with the one the catalog recorded for its output and
skips the outputs whose sources and parameters did not change, before any task
is sent.

Nothing here opens a raster: Items say their assets' grids through the
``proj`` extension (or are taken to be on one grid, which the worker checks);
files are one output each. Provenance needs one ``stat`` (local) or one
metadata request (URLs) per source.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from rumi_xarray.errors import (
    RumiArgumentError,
    RumiCatalogError,
    RumiError,
    RumiFileNotFoundError,
)
from rumi_xarray.sources.location import locate
from rumi_xarray.sources.redact import redact

#: File name endings ingested from globs and URL lists.
RASTER_SUFFIXES = (".tif", ".tiff", ".nc", ".nc4", ".zarr", ".vrt", ".jp2")

#: Asset media types (and roles) that hold rasters an ingest can read.
_RASTER_TYPES = ("image/tiff", "image/vnd.stac.geotiff", "application/x-netcdf",
                 "application/netcdf", "image/jp2")


@dataclass(frozen=True)
class Stamp:
    """The identity of one source when it was planned: what a rerun compares.

    Parameters
    ----------
    href : str
        Path or URL as read.
    size : int or None
        Bytes.
    modified : str or None
        Modification time (ISO text, local files) or ``Last-Modified``.
    etag : str or None
        The server's entity tag, for URLs that give one.
    """

    href: str
    size: int | None
    modified: str | None
    etag: str | None


@dataclass(frozen=True)
class Input:
    """One band of one time step: a band of a raster file.

    Parameters
    ----------
    href : str
        The raster file (path or URL).
    band : int or None
        1-based band of the file (GDAL's numbering); ``None`` takes every band
        (or the one ``name`` picks).
    label : str or None
        The band's label in the output (``None``: the file's own descriptions).
    name : str or None
        Pick the band whose description is ``name`` (a file's band asked by name).
    """

    href: str
    band: int | None
    label: str | None
    name: str | None = None


@dataclass(frozen=True)
class Step:
    """One time step of an output: its time and its bands, in order.

    Parameters
    ----------
    time : str or tuple of str
        An ISO instant, or an ISO ``(start, end)`` interval.
    inputs : tuple of Input
    origin : str
        The Item id or file the step comes from (named in errors).
    """

    time: str | tuple[str, str]
    inputs: tuple[Input, ...]
    origin: str


@dataclass(frozen=True)
class Task:
    """One output Rumi file and how to make it: what one worker task runs.

    Parameters
    ----------
    output : str
        Absolute local path of the Rumi file.
    steps : tuple of Step
        One per time step, in time order.
    params : dict
        Write parameters (tile size, codec, frame, resolution, resampling...);
        part of the key.
    stamps : tuple of Stamp
        The sources' identity at planning.
    key : str
        Digest of ``stamps`` and ``params``: equal keys mean the same output.
    """

    output: str
    steps: tuple[Step, ...]
    params: Mapping[str, Any]
    stamps: tuple[Stamp, ...]
    key: str = field(default="")

    @property
    def name(self) -> str:
        """The output's file name (how errors and the report name the task)."""
        return os.path.basename(self.output)

    @property
    def origins(self) -> list[str]:
        """The Items or files this output comes from."""
        return [step.origin for step in self.steps]


def task_key(stamps: Sequence[Stamp], steps: Sequence[Step], params: Mapping[str, Any]) -> str:
    """Return the digest that identifies an output's sources and parameters.

    Parameters
    ----------
    stamps : sequence of Stamp
    steps : sequence of Step
    params : mapping

    Returns
    -------
    str
        SHA-256 hex digest of a canonical JSON text.

    Examples
    --------
    >>> s = Stamp("a.tif", 10, "2024-01-01T00:00:00", None)
    >>> step = Step("2024-01-01T00:00:00", (Input("a.tif", 1, "red"),), "a")
    >>> task_key([s], [step], {"tile_size": 512}) == task_key([s], [step], {"tile_size": 512})
    True
    >>> task_key([s], [step], {"tile_size": 512}) == task_key([s], [step], {"tile_size": 256})
    False
    """
    # Plain lists, not dataclasses.asdict: planning a million Items digests a million keys.
    text = json.dumps({"stamps": [[s.href, s.size, s.modified, s.etag] for s in stamps],
                       "steps": [[s.time, s.origin, [[i.href, i.band, i.label, i.name]
                                                     for i in s.inputs]] for s in steps],
                       "params": dict(params)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# --- provenance ----------------------------------------------------------------


def stamp(href: str, storage_options: Mapping[str, Any] | None = None) -> Stamp:
    """Return the identity of one source: size and mtime, or size and ETag for URLs.

    Parameters
    ----------
    href : str
        Local path or URL.
    storage_options : mapping, optional
        fsspec options for URLs.

    Returns
    -------
    Stamp

    Raises
    ------
    RumiFileNotFoundError
        The source does not exist.
    """
    where = locate(href)
    if where.local:
        try:
            st = os.stat(href)
        except FileNotFoundError:
            raise RumiFileNotFoundError(f"{href}: no such file") from None
        if os.path.isdir(href):  # a Zarr store: its newest member stands for it
            size, mtime = _tree(href)
        else:
            size, mtime = st.st_size, st.st_mtime_ns
        return Stamp(href, int(size), _iso_ns(mtime), None)
    import fsspec

    url = where.target or href
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise RumiFileNotFoundError(f"{redact(href)}: no such file") from None
    etag = info.get("ETag") or info.get("etag")
    modified = info.get("LastModified") or info.get("last_modified") or info.get("mtime")
    size = info.get("size")
    return Stamp(href, None if size is None else int(size),
                 None if modified is None else str(modified),
                 None if etag is None else str(etag).strip('"'))


def _tree(path: str) -> tuple[int, int]:
    size, newest = 0, 0
    for root, _, files in os.walk(path):
        for name in files:
            st = os.stat(os.path.join(root, name))
            size += st.st_size
            newest = max(newest, st.st_mtime_ns)
    return size, newest


def _iso_ns(ns: int) -> str:
    return np.datetime_as_string(np.datetime64(int(ns), "ns"))


# --- sources -> steps ------------------------------------------------------------


def expand_files(sources: str | os.PathLike[str] | Sequence[Any],
                 storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Return the raster files that globs, folders and lists name, sorted within each pattern.

    Parameters
    ----------
    sources : str, os.PathLike or sequence of them
        Paths, URLs, glob patterns (``/data/*.tif``, ``s3://bucket/**/*.tif``)
        or folders (their raster files).
    storage_options : mapping, optional
        fsspec options for remote globs.

    Returns
    -------
    list of str

    Raises
    ------
    RumiFileNotFoundError
        A pattern that matches nothing.
    """
    items = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    out: list[str] = []
    for item in items:
        text = os.fspath(item)
        where = locate(text)
        if where.local:
            if os.path.isdir(text) and not text.rstrip("/").endswith(".zarr"):
                found = sorted(os.path.join(text, n) for n in os.listdir(text)
                               if n.lower().endswith(RASTER_SUFFIXES))
            elif any(ch in text for ch in "*?["):
                found = sorted(glob.glob(text, recursive=True))
            else:
                found = [text]
            if not found:
                raise RumiFileNotFoundError(f"{text}: no raster file matches")
            out.extend(os.path.abspath(p) for p in found)
        elif any(ch in urlsplit(text).path for ch in "*?["):
            import fsspec

            fs, _, paths = fsspec.get_fs_token_paths(text,
                                                     storage_options=dict(storage_options or {}))
            if not paths:
                raise RumiFileNotFoundError(f"{redact(text)}: no raster file matches")
            out.extend(sorted(fs.unstrip_protocol(p) for p in paths))
        else:
            out.append(text)
    return out


def file_time(href: str, rule: Any, position: int) -> str | tuple[str, str] | None:
    r"""Return a file's time by the caller's rule, or None to use the file's own tags.

    Parameters
    ----------
    href : str
    rule : None, str or sequence
        ``None``: the file's own tags (read by the worker). A regular
        expression: its first group (or the group named ``time``) in the
        file's name, parsed by pandas (``20240501``, ``2024-05-01``,
        ``2024-05-01T10:30``). A sequence: one time per file, in order.
    position : int
        The file's position among the sources (for a sequence rule).

    Returns
    -------
    str, tuple of str or None

    Raises
    ------
    RumiArgumentError
        The rule does not give this file a time.

    Examples
    --------
    >>> file_time("/d/LC08_L1TP_034032_20160521_B4.tif", r"_(\\d{8})_", 0)
    '2016-05-21T00:00:00'
    >>> file_time("/d/a.tif", ["2024-05-01"], 0)
    '2024-05-01T00:00:00'
    """
    if rule is None:
        return None
    if isinstance(rule, str):
        name = os.path.basename(urlsplit(href).path if locate(href).url else href)
        match = re.search(rule, name)
        if match is None:
            raise RumiArgumentError(f"{redact(href)}: time={rule!r} does not match the name "
                                    f"{name!r}")
        text = match.group("time") if "time" in match.re.groupindex else (
            match.group(1) if match.re.groups else match.group(0))
        return iso_time(text, href)
    values = list(rule)
    if position >= len(values):
        raise RumiArgumentError(f"time= gives {len(values)} times for more files; "
                                f"{redact(href)} has none")
    return iso_time(values[position], href)


def iso_time(value: Any, where: str) -> Any:
    """Return an instant (or a ``(start, end)`` pair) as ISO text in UTC, whole seconds.

    Parameters
    ----------
    value : str, datetime, datetime64, pandas.Timestamp or pair of them
    where : str
        Named in errors.

    Returns
    -------
    str or tuple of str

    Raises
    ------
    RumiArgumentError
        Not a time.

    Examples
    --------
    >>> iso_time("2024-05-01T10:30:00Z", "x")
    '2024-05-01T10:30:00'
    >>> iso_time(("2024-05-01", "2024-05-31"), "x")
    ('2024-05-01T00:00:00', '2024-05-31T00:00:00')
    """
    if isinstance(value, tuple | list) and len(value) == 2:
        return (iso_time(value[0], where), iso_time(value[1], where))
    try:
        stamp_ = pd.Timestamp(value)
    except (ValueError, TypeError) as exc:
        raise RumiArgumentError(f"{redact(where)}: {value!r} is not a time ({exc})") from None
    if pd.isna(stamp_):
        raise RumiArgumentError(f"{redact(where)}: {value!r} is not a time")
    if stamp_.tzinfo is not None:
        stamp_ = stamp_.tz_convert("UTC").tz_localize(None)
    return str(stamp_.floor("s").isoformat())


def file_inputs(href: str, bands: Sequence[Any] | None) -> tuple[Input, ...]:
    """Return the inputs of one file: its bands ``bands`` (1-based numbers or names), or all.

    Parameters
    ----------
    href : str
    bands : sequence of int or str, optional
        Band numbers (1-based, as GDAL and rioxarray count) or band
        descriptions; the worker resolves names against the file.

    Returns
    -------
    tuple of Input
    """
    if bands is None:
        return (Input(href, None, None),)
    out = []
    for band in bands:
        if isinstance(band, bool) or not isinstance(band, int | np.integer | str):
            raise RumiArgumentError(f"bands: {band!r} is neither a band number nor a name")
        if isinstance(band, int | np.integer):
            if band < 1:
                raise RumiArgumentError(f"bands: band numbers start at 1 (as GDAL's), "
                                        f"got {band}")
            out.append(Input(href, int(band), None))
        else:
            out.append(Input(href, None, None, band))
    return tuple(out)


# --- STAC Items ------------------------------------------------------------------


@dataclass(frozen=True)
class ItemGroup:
    """The assets of one Item on one grid, as one output's step."""

    item_id: str
    grid: str
    step: Step


def load_items(sources: Any, problems: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Return STAC Items as dicts, their asset hrefs resolved and judged.

    Relative hrefs resolve against the Items file (or the Item's own ``self``
    link), and hrefs of Items read from a remote location follow the one
    href policy (:mod:`rumi_xarray.sources.hrefs`): no local files, no
    loopback or private hosts, unless ``allowed_hrefs`` says so.

    Parameters
    ----------
    sources : Item, ItemCollection, sequence of Items or dicts, or a path
        A JSON file (an Item or a FeatureCollection) or a stac-geoparquet table.
    problems : dict, optional
        Where to record Items whose hrefs are refused (``"Item <id>"`` -> why),
        leaving them out, so one bad Item does not stop the others.

    Returns
    -------
    list of dict

    Raises
    ------
    RumiHrefError
        An asset href is refused (naming the Item and the asset), when
        ``problems`` is not given.
    """
    from rumi_xarray.stac.parse import catalog_hrefs

    if isinstance(sources, (str, os.PathLike)):
        path = os.fspath(sources)
        hrefs = catalog_hrefs(path, folder=os.path.isdir(path))
        if path.lower().endswith((".parquet", ".geoparquet")) or os.path.isdir(path):
            import pyarrow.parquet as pq  # type: ignore[import-untyped]
            import stac_geoparquet.arrow

            table = pq.read_table(path)
            return _all_followed(((dict(item), hrefs) for item in
                                  stac_geoparquet.arrow.stac_table_to_items(table)), problems)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        features = data.get("features", [data]) if isinstance(data, dict) else data
        return _all_followed(((dict(item), hrefs) for item in features), problems)
    listed = sources.items if hasattr(sources, "to_dict") and hasattr(sources, "items") \
        else sources
    pairs = []
    for item in ([listed] if isinstance(listed, Mapping) else listed):
        if isinstance(item, Mapping):
            data, where = dict(item), _self_href(item)
        else:  # a pystac Item: its own self link locates its relative hrefs
            data, where = item.to_dict(transform_hrefs=False), item.get_self_href()
        pairs.append((data, catalog_hrefs(where)))
    return _all_followed(pairs, problems)


def _all_followed(pairs: Iterable[tuple[dict[str, Any], Any]],
                  problems: dict[str, str] | None) -> list[dict[str, Any]]:
    out = []
    for item, hrefs in pairs:
        try:
            out.append(_followed(item, hrefs))
        except RumiError as exc:
            if problems is None:
                raise
            problems[f"Item {item.get('id')}"] = f"{type(exc).__name__}: {exc}"
    return out


def _self_href(item: Mapping[str, Any]) -> str | None:
    for link in item.get("links") or []:
        if isinstance(link, Mapping) and link.get("rel") == "self" and link.get("href"):
            return str(link["href"])
    return None


def _followed(item: dict[str, Any], hrefs: Any) -> dict[str, Any]:
    """Return ``item`` with every asset href resolved and judged by its catalog's rules."""
    assets = {}
    for key, asset in (item.get("assets") or {}).items():
        asset = dict(asset)
        if asset.get("href") is not None:
            asset["href"] = hrefs.follow(asset["href"],
                                         f"STAC item {item.get('id')!r} (asset {key!r})")
        assets[key] = asset
    item["assets"] = assets
    return item


def item_time(item: Mapping[str, Any]) -> str | tuple[str, str]:
    """Return an Item's time: its ``datetime``, or ``(start_datetime, end_datetime)``.

    Raises
    ------
    RumiCatalogError
        Neither is given.
    """
    props = item.get("properties") or {}
    name = str(item.get("id"))
    if props.get("datetime"):
        return iso_time(props["datetime"], f"Item {name}")
    if props.get("start_datetime") and props.get("end_datetime"):
        return iso_time((props["start_datetime"], props["end_datetime"]), f"Item {name}")
    raise RumiCatalogError(f"Item {name}: has no datetime (nor start_datetime and "
                           f"end_datetime); every Rumi time step is labelled")


def _raster_asset(asset: Mapping[str, Any]) -> bool:
    media = str(asset.get("type") or "").split(";")[0].strip().lower()
    roles = asset.get("roles") or []
    if media in _RASTER_TYPES:
        return True
    return not media and "data" in roles


def _asset_grid(item: Mapping[str, Any], asset: Mapping[str, Any]) -> str:
    """Return a text naming the grid of an asset (``proj`` extension), '' when unknown."""
    props = item.get("properties") or {}
    shape = asset.get("proj:shape") or props.get("proj:shape")
    transform = asset.get("proj:transform") or props.get("proj:transform")
    if shape is None or transform is None:
        return ""
    return f"{tuple(int(v) for v in shape)}:{tuple(float(v) for v in transform[:6])}"


def _grid_label(item: Mapping[str, Any], asset: Mapping[str, Any]) -> str:
    props = item.get("properties") or {}
    transform: Any = asset.get("proj:transform") or props.get("proj:transform")
    res = abs(float(transform[0]))
    return f"{res:g}m" if res >= 1 else f"{res:g}"


def item_groups(item: Mapping[str, Any], bands: Sequence[str] | None,
                common_grid: bool) -> list[ItemGroup]:
    """Return an Item's assets grouped by grid, as one step each.

    Parameters
    ----------
    item : mapping
    bands : sequence of str, optional
        Asset keys, in the output's band order; their keys are the band labels.
        By default every raster asset (GeoTIFF/COG, netCDF, or role ``data``).
    common_grid : bool
        Put every asset on one grid (the caller named a resolution): one group.

    Returns
    -------
    list of ItemGroup

    Raises
    ------
    RumiCatalogError
        A named asset is missing, the Item has no raster asset or no time.
    """
    name = str(item.get("id"))
    assets = item.get("assets") or {}
    if bands is None:
        keys = [k for k, a in assets.items() if _raster_asset(a)]
        if not keys:
            raise RumiCatalogError(f"Item {name}: has no raster asset (GeoTIFF, COG, netCDF "
                                   f"or role 'data'); name the assets with bands=")
    else:
        keys = list(bands)
        missing = [k for k in keys if k not in assets]
        if missing:
            raise RumiCatalogError(f"Item {name}: has no asset {missing} (it has "
                                   f"{sorted(assets)})")
    when = item_time(item)
    by_grid: dict[str, list[str]] = {}
    for key in keys:
        grid = "" if common_grid else _asset_grid(item, assets[key])
        by_grid.setdefault(grid, []).append(key)
    several = len(by_grid) > 1
    out = []
    for members in by_grid.values():
        label = _grid_label(item, assets[members[0]]) if several else ""
        inputs = tuple(Input(str(assets[k]["href"]), _asset_band(assets[k]), k)
                       for k in members)
        out.append(ItemGroup(name, label, Step(when, inputs, f"Item {name}")))
    return out


def _asset_band(asset: Mapping[str, Any]) -> int | None:
    """Single-band assets are band 1; a multi-band asset (``eo:bands``) is read whole."""
    listed = asset.get("eo:bands") or asset.get("raster:bands") or asset.get("bands")
    return None if listed is not None and len(listed) > 1 else 1


def safe_name(text: str) -> str:
    """Return ``text`` usable as a file name (Item ids may hold ``/`` or ``:``).

    Examples
    --------
    >>> safe_name("S2A_MSIL2A/2024:05")
    'S2A_MSIL2A_2024_05'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "item"


def when_sort_key(time: str | tuple[str, str]) -> str:
    """Return the text that orders steps in time (an interval by its start)."""
    return time[0] if isinstance(time, tuple) else time


def period_of(time: str | tuple[str, str], period: str | None) -> str:
    """Return the label of the period a time falls in (``None``: one period for all).

    Examples
    --------
    >>> period_of("2024-05-21T10:00:00", "YS")
    '2024'
    >>> period_of("2024-05-21T10:00:00", "MS")
    '2024-05'
    """
    if period is None:
        return "all"
    # A period's start anchor ("YS", "MS") names the same period as its end ("Y", "M").
    code = period.upper()
    code = code[:-1] if len(code) > 1 and code.endswith("S") else code
    code = {"A": "Y"}.get(code, code)
    try:
        return str(pd.Timestamp(when_sort_key(time)).to_period(code))
    except ValueError as exc:
        raise RumiArgumentError(f"period={period!r} is not a pandas period ({exc})") from None


def now_iso() -> str:
    """Return the current UTC time as ISO text (when an ingest ran)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(timespec="seconds")


def unique(values: Iterable[str]) -> list[str]:
    """Return values in order without repeats."""
    return list(dict.fromkeys(values))
