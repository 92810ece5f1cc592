"""Catalog tables: one row per Rumi file, with its header and labels.

A catalog is a pandas DataFrame with one row per file: its path, its external
header and the labels its trailer holds (time, bands, georeferencing), plus
the CF facts of its sidecar. With the header in hand, librumi plans exact
byte ranges without touching the file, so :func:`~rumi_xarray.catalogs.cube.open_catalog`
builds a cube of a thousand scenes with zero requests to the data files.
It round-trips through Parquet losslessly.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd

from rumi_xarray import options
from rumi_xarray.conventions import cf
from rumi_xarray.conventions.time import time_seconds
from rumi_xarray.errors import RumiFileNotFoundError, os_error
from rumi_xarray.model.grid import Grid
from rumi_xarray.native import reads
from rumi_xarray.sources import resolve
from rumi_xarray.sources.redact import redact

#: Catalog columns, in order. Times are POSIX seconds so Parquet round trips
#: them exactly; ``time`` (first step) is a convenience for filtering. The last
#: five are the sidecar's facts (null when unknown).
COLUMNS = ("path", "header", "time", "time_seconds", "time_bounds", "bands", "transform",
           "crs", "pixel_is_point", "time_count", "band_count", "height", "width", "dtype",
           "tile_height", "tile_width", "frame_layout", *cf.FACTS)


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
        raise os_error(RumiFileNotFoundError, errno.ENOENT,
                       f"{redact(pattern)}: no file matches", redact(pattern))
    if protocol in ("file", "local"):
        return [os.path.abspath(p) for p in found]
    return [fs.unstrip_protocol(p) for p in found]


def _row(source: str | bytes, meta: Any, facts: dict[str, Any]) -> dict[str, Any]:
    seconds, bounds = time_seconds(meta.time or [], str(source))
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
        **{key: facts.get(key) for key in cf.FACTS},
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
    resolved = [resolve.resolve(p, storage_options=storage_options) for p in paths]

    def inspect(src: Any) -> dict[str, Any]:
        meta = reads.info(src)
        facts = cf.read_sidecar(src, storage_options) if options.option("sidecar") else {}
        return _row(src if isinstance(src, (str, bytes)) else str(src), meta, facts)

    from rumi_xarray.progress import progress_map

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(resolved)))) as pool:
        rows = progress_map(pool, inspect, resolved, "cataloguing", unit="file")
    return pd.DataFrame(rows, columns=list(COLUMNS))


