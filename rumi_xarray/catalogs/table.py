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
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote

import numpy as np
import pandas as pd

from rumi_xarray import options
from rumi_xarray.catalogs import levels
from rumi_xarray.conventions import sidecar as sidecars
from rumi_xarray.conventions.attributes import KEY as ATTRIBUTES
from rumi_xarray.conventions.attributes import Attributes
from rumi_xarray.conventions.digests import digest
from rumi_xarray.conventions.facts import is_null
from rumi_xarray.conventions.sidecar import Sidecar
from rumi_xarray.conventions.time import time_seconds
from rumi_xarray.errors import (
    RumiCatalogError,
    RumiFileNotFoundError,
    RumiIntegrityError,
    os_error,
)
from rumi_xarray.model.cube import source_name
from rumi_xarray.model.grid import Grid
from rumi_xarray.native import reads
from rumi_xarray.sources import resolve
from rumi_xarray.sources.hrefs import refuse_nul
from rumi_xarray.sources.location import locate
from rumi_xarray.sources.redact import redact
from rumi_xarray.sources.transport import FsspecSource

#: Catalog columns, in order. Times are POSIX seconds so Parquet round trips
#: them exactly; ``time`` (first step) is a convenience for filtering. Then
#: seven are the sidecar's (:data:`rumi_xarray.conventions.sidecar.COLUMNS`, null
#: when unknown; NaN and null as :mod:`rumi_xarray.conventions.facts` says), then the
#: sidecar's attributes as compact JSON text (``attributes``, null without any), and
#: the last is the row's digest (:data:`ROW_DIGEST`).
DIGESTED = ("path", "header", "time", "time_seconds", "time_bounds", "bands", "transform",
            "crs", "pixel_is_point", "time_count", "band_count", "height", "width", "dtype",
            "tile_height", "tile_width", "frame_layout", *sidecars.COLUMNS, ATTRIBUTES)
#: The column holding the digest of every other catalog column of its row
#: (:func:`rumi_xarray.conventions.digests.digest` of :data:`DIGESTED`, and of
#: ``overviews`` when the row has levels): Parquet as pandas writes it has no page
#: checksums, and a flipped bit must not move a scene in time or change its facts silently.
ROW_DIGEST = "row_digest"
#: The file's overview levels (JSON text, null without: ``rumi_xarray.catalogs.levels``).
#: Digested only when not null, so rows catalogued before it keep their digests.
OVERVIEWS = levels.COLUMN
COLUMNS = (*DIGESTED, OVERVIEWS, ROW_DIGEST)


def _expand(sources_: str | os.PathLike[str] | Sequence[Any],
            storage_options: dict[str, Any] | None) -> list[str]:
    """Return the list of sources, globbing patterns through fsspec."""
    items = [sources_] if isinstance(sources_, (str, os.PathLike)) else list(sources_)
    out: list[str] = []
    for item in items:
        text = os.fspath(item) if isinstance(item, os.PathLike) else item
        where = locate(text) if isinstance(text, str) else None
        if where is not None and any(ch in _glob_part(text, where.url) for ch in "*?["):
            # A GDAL virtual path is globbed as the URL it names.
            out.extend(_glob(where.target if where.url and where.target else text,
                             storage_options))
        else:
            out.append(text)
    return out


def _glob_part(text: str, url: bool) -> str:
    """Return the part of a source that may hold a glob pattern.

    A URL's query and fragment cannot: ``?`` there starts a signed query
    string, not a one-character wildcard.
    """
    if not url:
        return text
    return text.split("?", 1)[0].split("#", 1)[0]


def _glob(pattern: str, storage_options: dict[str, Any] | None) -> list[str]:
    import fsspec

    fs, _, paths = fsspec.get_fs_token_paths(pattern, storage_options=storage_options or {})
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple) else fs.protocol
    # fsspec hands back the pattern itself when an HTTP server gives no listing; a real
    # file may still have "*", "?" or "[" in its name.
    found = sorted(p for p in paths if unquote(fs.unstrip_protocol(p)) != unquote(pattern))
    if not found:
        # An HTTP server has no listing to glob: say so rather than "no match".
        why = (" (HTTP servers cannot be listed: pass the URLs themselves, or use a "
               "catalog or STAC Items)" if protocol in ("http", "https") else "")
        raise os_error(RumiFileNotFoundError, errno.ENOENT,
                       f"{redact(pattern)}: no file matches{why}", redact(pattern))
    if protocol in ("file", "local"):
        return [os.path.abspath(p) for p in found]
    return [fs.unstrip_protocol(p) for p in found]


def cell(value: Any) -> Any:
    """Return one cell of a catalog table as a plain Python value (None for a null).

    A null is ``None``, ``pd.NA`` or a float NaN (how pandas and Parquet spell a
    missing number); numpy scalars become Python numbers.

    Parameters
    ----------
    value : object

    Returns
    -------
    object
    """
    if is_null(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


def cell_list(value: Any) -> list[Any] | None:
    """Return a list cell of a catalog table (bands, transform, times) as a list, or None.

    Parameters
    ----------
    value : object

    Returns
    -------
    list or None
    """
    return None if cell(value) is None else list(value)


def catalog_row(path: Any, header: bytes, grid: Grid, seconds: Sequence[int],
                bounds: Sequence[Sequence[int]] | None, bands: Sequence[str],
                transform: Sequence[float] | None, crs: int | None,
                pixel_is_point: bool | None, sidecar: Sidecar,
                overviews: str | None = None) -> dict[str, Any]:
    """Return one catalog row (:data:`COLUMNS`) from what a file's metadata say.

    The one place a row is built: from a file's metadata (:func:`catalog`) and
    from a STAC Item (:mod:`rumi_xarray.stac`).

    Parameters
    ----------
    path : str or bytes
    header : bytes
    grid : Grid
    seconds : sequence of int
        POSIX seconds per time step (interval starts).
    bounds : sequence of (start, end) or None
    bands : sequence of str
        Band texts.
    transform : sequence of float or None
        As stored (rasterio order).
    crs : int or None
    pixel_is_point : bool or None
    sidecar : Sidecar
        The facts of the file's sidecar (its last columns).
    overviews : str, optional
        The file's overview levels (:func:`rumi_xarray.catalogs.levels.column_text`).

    Returns
    -------
    dict
        With its :data:`ROW_DIGEST`.
    """
    row = {
        "path": path,
        "header": bytes(header),
        "time": pd.Timestamp(int(seconds[0]), unit="s") if len(seconds) else pd.NaT,
        "time_seconds": [int(v) for v in seconds],
        "time_bounds": None if bounds is None else [int(v) for pair in bounds for v in pair],
        "bands": list(bands),
        "transform": None if transform is None else list(transform),
        "crs": crs,
        "pixel_is_point": pixel_is_point,
        "time_count": grid.time_count,
        "band_count": grid.bands,
        "height": grid.height,
        "width": grid.width,
        "dtype": grid.dtype.str,
        "tile_height": grid.tile_height,
        "tile_width": grid.tile_width,
        "frame_layout": grid.frame_layout,
        **sidecar.to_columns(),
        ATTRIBUTES: sidecar.attributes.text() or None,
        OVERVIEWS: overviews,
    }
    row[ROW_DIGEST] = row_digest(row)
    return row


def row_attributes(row: Mapping[Any, Any] | pd.Series, where: str) -> Attributes:
    """Return the attributes a catalog row holds (none without the column or a value).

    Parameters
    ----------
    row : mapping
    where : str
        The row, named in the error.

    Returns
    -------
    described : Attributes
        What the row records.

    Raises
    ------
    RumiCatalogError
        The cell is not what ``rx.catalog`` writes there.
    """
    value = cell(row.get(ATTRIBUTES))
    try:
        return Attributes.from_json(value)
    except ValueError as exc:
        raise RumiCatalogError(f"{where}: {exc}") from None


def check_row_digest(row: Mapping[Any, Any] | pd.Series, where: str) -> None:
    """Raise when a catalog row is not what :func:`catalog` recorded in its digest.

    Rows without a digest (tables built before rows had one, or by other
    tools) are not checked. A row changed on purpose gets a new digest from
    :func:`row_digest` (or a null one).

    Parameters
    ----------
    row : mapping
        Column name -> value (a dict, a pandas Series, an Arrow row).
    where : str
        The row, named in the error.

    Raises
    ------
    RumiIntegrityError
        The row's columns differ from its digest.

    Examples
    --------
    >>> check_row_digest({"path": "a.rumi"}, "catalog row 0")  # no digest: nothing to check
    """
    recorded = cell(row.get(ROW_DIGEST))
    if recorded is None:
        return
    if recorded != row_digest(row):
        raise RumiIntegrityError(
            f"{where}: the row differs from the digest rx.catalog recorded in its "
            f"{ROW_DIGEST!r} column (a damaged or edited table: path, header, labels, "
            f"time or facts changed); rebuild it with rx.catalog, or, for a row changed on "
            f"purpose, store rumi_xarray.catalogs.table.row_digest(row) (or null) in that column")


def row_digest(row: Mapping[Any, Any] | pd.Series) -> str:
    """Return the digest of a catalog row's columns (:data:`DIGESTED`).

    Parameters
    ----------
    row : mapping

    Returns
    -------
    str

    Examples
    --------
    >>> row_digest({"path": "a.rumi"})[:7]
    'sha256:'
    """
    # Rows without attributes or overviews digest as rows did before those columns
    # existed, so tables written then still check.
    keys = DIGESTED if cell(row.get(ATTRIBUTES)) is not None else DIGESTED[:-1]
    if not is_null(cell(row.get(OVERVIEWS))):
        keys = (*keys, OVERVIEWS)
    return digest(dict(row), keys)


def source_text(src: Any) -> str | bytes:
    """Return what a catalog row stores to reopen a resolved source.

    Parameters
    ----------
    src : str, bytes or RangeSource
        As :func:`rumi_xarray.sources.resolve.resolve` returns it.

    Returns
    -------
    str or bytes
        The path or URL (an fsspec URL as the user typed it), or the bytes.

    Raises
    ------
    RumiCatalogError
        A file object: nothing in a row could reopen it.
    """
    if isinstance(src, (str, bytes)):
        return src
    if isinstance(src, FsspecSource):
        return src.url
    raise RumiCatalogError(f"{src!r}: a catalog row stores a path or URL to reopen each "
                           "file; open file objects cannot be catalogued")


def _row(source: str | bytes, meta: Any, sidecar: Sidecar,
         overviews: str | None = None) -> dict[str, Any]:
    seconds, bounds = time_seconds(meta.time or [], str(source))
    return catalog_row(source, meta.header, Grid.from_metadata(meta), seconds.tolist(),
                       None if bounds is None else bounds.tolist(), meta.bands or [],
                       meta.transform, meta.crs, meta.pixel_is_point, sidecar, overviews)


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
        One row per file: ``path``, ``header`` (bytes), time, band, georeferencing,
        layout and sidecar columns, and ``overviews``, the overview levels its
        sidecar records with each level file's header (JSON text, null without;
        ``rumi_xarray.catalogs.table.COLUMNS`` names them all).
        ``to_parquet``/``read_parquet`` round trip it losslessly.

    Examples
    --------
    >>> table = rx.catalog("scenes/*.rumi")
    >>> len(table), int(table["band_count"].iloc[0])
    (4, 4)
    >>> table["path"].iloc[0]
    '...S2_33UUP_20240215.rumi'
    >>> table.to_parquet("tile.parquet")
    """
    paths = _expand(sources_, storage_options)
    resolved = [resolve.resolve(p, storage_options=storage_options) for p in paths]

    def inspect(src: Any) -> dict[str, Any]:
        meta = reads.info(src)
        found = (sidecars.read_sidecar(src, storage_options) if options.option("sidecar")
                 else Sidecar())
        found.check_labels(meta, source_name(source_text(src)))  # the row holds the file's labels
        # Each level file's header too, so a cube at a level is built from the rows alone.
        return _row(source_text(src), meta, found, levels.column_text(found.overviews, src))

    from rumi_xarray.progress import progress_map

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(resolved)))) as pool:
        rows = progress_map(pool, inspect, resolved, "cataloguing", unit="file")
    return pd.DataFrame(rows, columns=list(COLUMNS))




#: POSIX seconds of the times a cube labels: 0001-01-01 to 9999-12-31 (Python's datetime and
#: RFC 3339). Inside 1677-2262 they decode to ``datetime64[ns]``, outside to cftime objects,
#: as xarray decodes them (conventions/time.decoded_instants); beyond, nothing labels them.
SECONDS_RANGE = (-62_135_596_800, 253_402_300_799)
#: How errors name SECONDS_RANGE.
SECONDS_RANGE_TEXT = "the times a cube labels (years 1 to 9999)"


def check_times(value: Any, label: str) -> list[int]:
    """Return a row's ``time_seconds`` cell as ints; raise naming the row when it cannot be.

    Parameters
    ----------
    value : object
        The cell.
    label : str
        The row, as messages name it (``"catalog row 3 (s3.rumi)"``).

    Returns
    -------
    list of int

    Raises
    ------
    RumiCatalogError
        A null cell or step, a step that is not a whole number, or one outside
        the years 1 to 9999.

    Examples
    --------
    >>> check_times([1_700_000_000], "catalog row 0")
    [1700000000]
    """
    steps = cell_list(value)
    if not steps:
        raise RumiCatalogError(f"{label}: no time (time_seconds is null or empty)")
    out = []
    for step in steps:
        number = cell(step)
        if (number is None or isinstance(number, bool)
                or not isinstance(number, (int, float)) or number != number
                or int(number) != number):
            raise RumiCatalogError(f"{label}: time_seconds holds {step!r}, not a whole "
                                   f"number of seconds")
        if not SECONDS_RANGE[0] <= int(number) <= SECONDS_RANGE[1]:
            raise RumiCatalogError(f"{label}: time_seconds {int(number)} lies outside "
                                   f"{SECONDS_RANGE_TEXT}")
        out.append(int(number))
    return out


def check_row(row: Any, grid: Grid, label: str) -> None:
    r"""Raise naming the row when a catalog row's cells cannot describe its file.

    The same checks whatever holds the row (rows in memory, a table on disk at
    open and in tasks): a path without NUL bytes, one time step per step of the
    header, a transform of six finite numbers with a non-zero pixel size, an
    EPSG code PROJ knows.

    Parameters
    ----------
    row : mapping
        The row's cells by column name.
    grid : Grid
        The grid of the row's header.
    label : str
        The row, as messages name it.

    Raises
    ------
    RumiCatalogError

    Examples
    --------
    >>> try:
    ...     check_row({"path": "a\x00.rumi"}, None, "catalog row 0")
    ... except RumiCatalogError as exc:
    ...     print(exc)
    catalog row 0: href 'a\\x00.rumi' is refused: holds a NUL byte
    """
    path = row.get("path")
    if not isinstance(path, (str, bytes)):
        raise RumiCatalogError(f"{label}: path {path!r} is not a path or URL")
    if isinstance(path, str):
        refuse_nul(path, label)  # the href policy's refusal (a RumiCatalogError)
    steps = check_times(row.get("time_seconds"), label)
    if len(steps) != grid.time_count:
        raise RumiCatalogError(f"{label}: {len(steps)} time step(s) in time_seconds, the "
                               f"file's header {grid.time_count}")
    transform = cell_list(row.get("transform"))
    if transform is not None:
        numbers = [cell(v) for v in transform]
        if len(numbers) != 6 or any(not isinstance(v, (int, float)) or not np.isfinite(v)
                                    for v in numbers):
            raise RumiCatalogError(f"{label}: transform {transform} is not six finite "
                                   f"numbers")
        if numbers[0] * numbers[4] - numbers[1] * numbers[3] == 0:
            raise RumiCatalogError(f"{label}: transform {transform} has a zero pixel size")
    crs = cell(row.get("crs"))
    if crs is not None:
        from rumi_xarray.conventions.georef import epsg_known

        if (isinstance(crs, bool) or not isinstance(crs, (int, float))
                or int(crs) != crs or not epsg_known(int(crs))):
            raise RumiCatalogError(f"{label}: crs {crs!r} is not an EPSG code PROJ knows")
