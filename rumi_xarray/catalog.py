"""Cubes from many scenes: catalogs of path + header, and open_mfdataset.

A catalog is a pandas DataFrame with one row per file: its path, its external
header and the labels its trailer holds (time, bands, georeferencing). With
the header in hand, librumi plans exact byte ranges without touching the
file, so :func:`open_catalog` builds a cube of a thousand scenes with zero
requests to the data files; only the reads that a computation needs happen.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from rumi_xarray import api, dataset, engine, metadata, sources
from rumi_xarray.cube import Cube
from rumi_xarray.grid import Grid

#: Catalog columns, in order. Times are POSIX seconds so Parquet round trips
#: them exactly; ``time`` (first step) is a convenience for filtering.
COLUMNS = ("path", "header", "time", "time_seconds", "time_bounds", "bands", "transform",
           "crs", "pixel_is_point", "time_count", "band_count", "height", "width", "dtype",
           "tile_height", "tile_width", "frame_layout")

DUPLICATES = ("keep", "first", "last", "error")


def _expand(sources_: str | os.PathLike[str] | Sequence[Any],
            storage_options: dict[str, Any] | None) -> list[str]:
    """Return the list of sources, globbing patterns through fsspec."""
    items = [sources_] if isinstance(sources_, (str, os.PathLike)) else list(sources_)
    out: list[str] = []
    for item in items:
        text = os.fspath(item) if isinstance(item, os.PathLike) else item
        if isinstance(text, str) and any(ch in text for ch in "*?["):
            out.extend(_glob(text, storage_options))
        else:
            out.append(text)
    return out


def _glob(pattern: str, storage_options: dict[str, Any] | None) -> list[str]:
    import fsspec

    fs, _, paths = fsspec.get_fs_token_paths(pattern, storage_options=storage_options or {})
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple) else fs.protocol
    found = sorted(paths)
    if not found:
        raise FileNotFoundError(f"{engine.redact.redact(pattern)}: no file matches")
    if protocol in ("file", "local"):
        return [os.path.abspath(p) for p in found]
    return [fs.unstrip_protocol(p) for p in found]


def _row(source: str | bytes, meta: Any) -> dict[str, Any]:
    seconds, bounds = metadata.time_seconds(meta.time or [])
    g = Grid.from_metadata(meta)
    return {
        "path": source,
        "header": bytes(meta.header),
        "time": pd.Timestamp(int(seconds[0]), unit="s") if len(seconds) else pd.NaT,
        "time_seconds": seconds.tolist(),
        "time_bounds": None if bounds is None else bounds.ravel().tolist(),
        "bands": list(meta.bands or []),
        "transform": None if meta.transform is None else list(meta.transform),
        "crs": meta.crs,
        "pixel_is_point": meta.pixel_is_point,
        "time_count": g.time_count,
        "band_count": g.bands,
        "height": g.height,
        "width": g.width,
        "dtype": g.dtype.str,
        "tile_height": g.tile_height,
        "tile_width": g.tile_width,
        "frame_layout": g.frame_layout,
    }


def catalog(sources_: str | os.PathLike[str] | Sequence[Any], *,
            storage_options: dict[str, Any] | None = None,
            max_workers: int = 16) -> pd.DataFrame:
    """Read the metadata of many Rumi files into a catalog table.

    Parameters
    ----------
    sources_ : str, os.PathLike or sequence of them
        Paths or URLs; glob patterns (``s3://bucket/tile/*.rumi``) are
        expanded with fsspec.
    storage_options : dict, optional
        fsspec options for globbing and fsspec-only protocols.
    max_workers : int, default 16
        Files inspected concurrently (librumi releases the GIL).

    Returns
    -------
    pandas.DataFrame
        One row per file, columns :data:`COLUMNS`; ``header`` holds bytes.
        ``to_parquet``/``read_parquet`` round trip it losslessly.
    """
    paths = _expand(sources_, storage_options)
    resolved = [sources.resolve(p, storage_options=storage_options) for p in paths]

    def inspect(src: Any) -> dict[str, Any]:
        return _row(src if isinstance(src, (str, bytes)) else str(src), engine.info(src))

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(resolved)))) as pool:
        rows = list(pool.map(inspect, resolved))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _load(table: pd.DataFrame | str | os.PathLike[str]) -> pd.DataFrame:
    if isinstance(table, pd.DataFrame):
        return table.reset_index(drop=True)
    return pd.read_parquet(os.fspath(table)).reset_index(drop=True)


def _as_list(value: Any) -> list[Any] | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return list(value)


def _check(rows: pd.DataFrame, grids: list[Grid]) -> None:
    """Raise a ValueError naming the first row that cannot join the cube."""
    ref = rows.iloc[0]
    g0 = grids[0]
    for i in range(1, len(rows)):
        row, g = rows.iloc[i], grids[i]
        problems = []
        if (g.height, g.width) != (g0.height, g0.width):
            problems.append(f"size {g.height}x{g.width} != {g0.height}x{g0.width}")
        if not g.same_layout(g0):
            problems.append(
                f"frame grid (tile {g.tile_height}, layout {g.frame_layout!r}, bands "
                f"{g.bands}, dtype {g.dtype}, T {g.time_count}) differs from row 0 (tile "
                f"{g0.tile_height}, layout {g0.frame_layout!r}, bands {g0.bands}, dtype "
                f"{g0.dtype}, T {g0.time_count})")
        if _as_list(row["bands"]) != _as_list(ref["bands"]):
            problems.append(f"bands {_as_list(row['bands'])} != {_as_list(ref['bands'])}")
        if _as_list(row["transform"]) != _as_list(ref["transform"]):
            problems.append("transform differs")
        if _nullable(row["crs"]) != _nullable(ref["crs"]):
            problems.append(f"CRS EPSG:{row['crs']} != EPSG:{ref['crs']}")
        if problems:
            name = engine.Scene(row["path"], b"").name
            raise ValueError(
                f"catalog row {int(row['_row'])} ({name}) cannot be stacked with row "
                f"{int(ref['_row'])}: " + "; ".join(problems))


def _nullable(value: Any) -> Any:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return int(value) if isinstance(value, (int, np.integer, float)) else value


def _order(rows: pd.DataFrame, duplicates: str) -> pd.DataFrame:
    """Sort rows by time (then path) and apply the duplicates policy."""
    if duplicates not in DUPLICATES:
        raise ValueError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
    key = rows["time_seconds"].map(lambda s: tuple(s))
    rows = rows.assign(_key=key).sort_values(["_key", "path", "_row"], kind="stable")
    dup = rows["_key"].duplicated(keep=False)
    if dup.any():
        if duplicates == "error":
            first = rows[dup].iloc[0]
            raise ValueError(
                f"catalog rows {list(rows[dup]['_row'][:2])} share the time "
                f"{first['time']}; pass duplicates='first', 'last' or 'keep'")
        if duplicates in ("first", "last"):
            rows = rows[~rows["_key"].duplicated(keep=duplicates)]
    return rows.drop(columns="_key").reset_index(drop=True)


def open_catalog(table: pd.DataFrame | str | os.PathLike[str], *, chunks: Any = None,
                 duplicates: str = "keep", band_as_variable: bool = False,
                 decode_times: bool = True, group_bytes: int | None = None,
                 storage_options: dict[str, Any] | None = None) -> xr.Dataset:
    """Open the scenes of a catalog as one cube, without any request to the files.

    Rows are stacked along ``time``, sorted by time and then by path. Every
    scene must share size, transform, CRS, bands, dtype, tile size and frame
    layout; the first row that does not is named in a ``ValueError``.

    Parameters
    ----------
    table : pandas.DataFrame or path to a Parquet file
        As built by :func:`catalog`.
    chunks : dict, int, str or tuple, optional
        ``{}``: one chunk per frame (one time step per chunk for single-date
        files); without chunks the cube is lazily indexed.
    duplicates : {"keep", "first", "last", "error"}, default "keep"
        Scenes with identical time steps: keep all (deterministic order by
        path), keep the first or last by path, or raise.
    band_as_variable : bool, default False
    decode_times : bool, default True
    group_bytes : int, optional
        Decoded bytes per grouped read.
    storage_options : dict, optional
        fsspec options for fsspec-only protocols (never stored in the graph's
        reprs).

    Returns
    -------
    xarray.Dataset
        ``band_data(time, band, y, x)``; extra scalar columns of the table
        (e.g. ``cloud_cover``) become coordinates along ``time``. A missing or
        unreadable file fails at compute time, naming its path and catalog
        row.
    """
    rows = _load(table)
    if rows.empty:
        raise ValueError("the catalog has no rows")
    missing = [c for c in ("path", "header") if c not in rows.columns]
    if missing:
        raise ValueError(f"the catalog lacks column(s) {missing}")
    rows = rows.assign(_row=np.arange(len(rows)))
    rows = _order(rows, duplicates)
    grids = []
    for i in range(len(rows)):
        try:
            grids.append(Grid.from_metadata(engine.header_info(bytes(rows["header"].iloc[i]))))
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"catalog row {int(rows['_row'].iloc[i])} "
                f"({engine.Scene(rows['path'].iloc[i], b'').name}): bad header: {exc}"
            ) from exc
    _check(rows, grids)
    scenes = tuple(
        engine.Scene(sources.resolve(p, storage_options=storage_options), bytes(h), row=int(r))
        for p, h, r in zip(rows["path"], rows["header"], rows["_row"], strict=True))
    steps = tuple((s, t) for s, g in enumerate(grids) for t in range(g.time_count))
    cube = Cube(scenes, grids[0], steps)
    labels = _labels(rows)
    ds = dataset.build(cube, labels, has_time=True, band_as_variable=band_as_variable,
                       decode_times=decode_times)
    ds = ds.assign_coords(_extra_coords(rows, [g.time_count for g in grids]))
    if chunks is None:
        return ds
    return api.chunk(ds, chunks, group_bytes=group_bytes)


def _extra_coords(rows: pd.DataFrame, steps: list[int]) -> dict[str, Any]:
    """Return the catalog's own columns (cloud cover, tile id...) as time coordinates.

    Columns of scalars beyond :data:`COLUMNS` follow their scene along time;
    columns of lists or other containers are left out.
    """
    out = {}
    for column in rows.columns:
        if column in COLUMNS or column.startswith("_"):
            continue
        values = rows[column].to_numpy()
        if values.dtype == object and not all(
                isinstance(v, (str, bool, int, float, np.generic)) or v is None for v in values):
            continue
        out[column] = ("time", np.repeat(values, steps))
    return out


def _labels(rows: pd.DataFrame) -> dataset.Labels:
    seconds = np.concatenate([np.asarray(s, dtype=np.int64) for s in rows["time_seconds"]])
    bounds_col = [_as_list(b) for b in rows["time_bounds"]]
    bounds = None
    if all(b is not None for b in bounds_col):
        bounds = np.concatenate([np.asarray(b, dtype=np.int64).reshape(-1, 2)
                                 for b in bounds_col])
    elif any(b is not None for b in bounds_col):
        raise ValueError("the catalog mixes scenes with instants and with intervals")
    ref = rows.iloc[0]
    transform = _as_list(ref["transform"])
    pip = ref["pixel_is_point"]
    return dataset.Labels(
        bands=tuple(_as_list(ref["bands"]) or ()), seconds=seconds, bounds=bounds,
        transform=None if transform is None else tuple(float(v) for v in transform),
        crs=_nullable(ref["crs"]), pixel_is_point=None if pip is None else bool(pip))


def open_mfdataset(sources_: str | os.PathLike[str] | Iterable[Any], *, chunks: Any = None,
                   duplicates: str = "keep", band_as_variable: bool = False,
                   decode_times: bool = True, group_bytes: int | None = None,
                   storage_options: dict[str, Any] | None = None,
                   max_workers: int = 16) -> xr.Dataset:
    """Open many Rumi files (a list or a glob) as one cube.

    Equivalent to ``open_catalog(catalog(sources))``: metadata are read
    concurrently once, then the cube is built from the rows.

    Parameters
    ----------
    sources_ : str, os.PathLike or iterable
        Paths, URLs or glob patterns (``s3://bucket/tile/*.rumi``).
    chunks, duplicates, band_as_variable, decode_times, group_bytes
        As for :func:`open_catalog`.
    storage_options : dict, optional
    max_workers : int, default 16

    Returns
    -------
    xarray.Dataset
    """
    table = catalog(list(sources_) if not isinstance(sources_, (str, os.PathLike)) else sources_,
                    storage_options=storage_options, max_workers=max_workers)
    return open_catalog(table, chunks=chunks, duplicates=duplicates,
                        band_as_variable=band_as_variable, decode_times=decode_times,
                        group_bytes=group_bytes, storage_options=storage_options)


__all__ = ["COLUMNS", "catalog", "open_catalog", "open_mfdataset"]
