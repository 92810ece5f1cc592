"""STAC Items as a stac-geoparquet table, the format large STAC catalogs use.

One row per Item, written and read with the ``stac_geoparquet`` library
(its Arrow API: ``parse_stac_items_to_arrow``, ``to_parquet``,
``stac_table_to_items``), so the files are what other stac-geoparquet tools
read and write. The Rumi header travels as the asset field ``rumi:header``
(base64 text), so a reader of the table plans every read without touching
the data files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rumi_xarray.errors import RumiCatalogError, RumiFileChangedError
from rumi_xarray.model.cube import source_name
from rumi_xarray.sources import retry

if TYPE_CHECKING:
    from rumi_xarray.catalogs.identity import FileIdentity

T = TypeVar("T")

#: File name endings taken for stac-geoparquet tables.
SUFFIXES = (".parquet", ".geoparquet", ".pq")


def _plain(items: Iterable[Any]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        out.append(item.to_dict(transform_hrefs=False) if hasattr(item, "to_dict")
                   else dict(item))
    return out


def to_table(items: Iterable[Any]) -> Any:
    """Return STAC Items as a stac-geoparquet Arrow table.

    Parameters
    ----------
    items : iterable of pystac.Item or dict

    Returns
    -------
    pyarrow.Table
    """
    from stac_geoparquet.arrow import parse_stac_items_to_arrow

    plain = _plain(items)
    if not plain:
        raise RumiCatalogError("no STAC items to write")
    return parse_stac_items_to_arrow(plain).read_all()


def write_geoparquet(items: Iterable[Any], path: str | os.PathLike[str]) -> str:
    """Write STAC Items to a stac-geoparquet file, atomically.

    Parameters
    ----------
    items : iterable of pystac.Item or dict
    path : str or os.PathLike
        Local destination; replaced only once complete.

    Returns
    -------
    str
        The path written.
    """
    from stac_geoparquet.arrow import to_parquet

    from rumi_xarray.write.atomic import atomic_path

    target = os.fspath(path)
    table = to_table(items)
    with atomic_path(target) as temporary:
        to_parquet(table, temporary)
    return target


def read_geoparquet(source: Any, *, bbox: Sequence[float] | None = None,
                    datetime: Any = None, query: Mapping[str, Any] | None = None,
                    storage_options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Read STAC Items from a stac-geoparquet file, folder or Arrow table.

    The selections are pushed down to the Parquet reader (pyarrow datasets):
    row groups whose statistics (``bbox``, ``datetime``, the queried
    properties) cannot match, and files of other partitions, are never read.

    Parameters
    ----------
    source : str, os.PathLike or pyarrow.Table
        A local path or fsspec URL of a file or a (partitioned) folder, or a
        table as :func:`to_table` returns it.
    bbox : (min lon, min lat, max lon, max lat), optional
        Items whose ``bbox`` intersects it.
    datetime : str, slice, tuple or datetime, optional
        Items at or within it: ``"2024-01-01/2024-06-30"`` (either end ``..``),
        ``slice(a, b)``, ``(a, b)`` or one instant; ends inclusive, a partial
        date spans its period. Intervals (``start_datetime``/``end_datetime``)
        match when they overlap it.
    query : mapping, optional
        STAC API query extension: ``{"eo:cloud_cover": {"lt": 20}}`` with
        ``eq``, ``neq``, ``lt``, ``lte``, ``gt``, ``gte``, ``in``.
    storage_options : mapping, optional
        fsspec options for a remote table.

    Returns
    -------
    list of dict
        STAC Item dictionaries.

    Raises
    ------
    RumiFileChangedError
        A file of the table is not the one ``expected`` describes.
    RumiCatalogError
        A file that is not a readable Parquet file (a corrupt footer).
    RumiIOError
        A remote read still failing after Karu's retries.
    """
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.dataset as pads  # type: ignore[import-untyped]
    from stac_geoparquet.arrow import stac_table_to_items

    def read(dataset: Any) -> list[dict[str, Any]]:
        expression = filter_expression(dataset.schema, bbox=bbox, datetime=datetime,
                                       query=query)
        table = dataset.to_table(filter=expression)
        if table.num_rows == 0:
            return []
        return [_drop_nulls(item) for item in stac_table_to_items(table)]

    if isinstance(source, pa.Table):
        return read(pads.dataset(source))
    url = os.fspath(source)
    return read_checked(url, storage_options, read)[0]


def read_checked(url: str, storage_options: Mapping[str, Any] | None,
                 read: Callable[[Any], T],
                 expected: tuple[tuple[str, FileIdentity], ...] | None = None
                 ) -> tuple[T, tuple[tuple[str, FileIdentity], ...]]:
    """Return ``read(dataset)`` of a table whose footers were checked first, retried.

    Every file's footer is read and checked (``rumi_xarray.catalogs.identity``)
    before pyarrow reads the table, so a corrupt one is a typed error, and
    compared with ``expected`` when given; the whole read is made again after a
    transient failure, as Karu retries.

    Parameters
    ----------
    url : str
        Local path or fsspec URL of a file or folder.
    storage_options : mapping, optional
    read : callable
        Reads what is wanted from the ``pyarrow.dataset.Dataset``.
    expected : tuple of (file, FileIdentity), optional
        The table's files as an open saw them (``identities``).

    Returns
    -------
    tuple
        What ``read`` returned, and each file of the table with its identity
        (size, footer digest).
    """
    name = source_name(url)

    def attempt() -> tuple[T, tuple[tuple[str, FileIdentity], ...]]:
        dataset, found = _checked_dataset(url, storage_options)
        if expected is not None and found != expected:
            _refuse_changed(name, dict(expected), dict(found))
        return read(dataset), found

    return retry.retrying(attempt, f"reading the stac-geoparquet table {name}", source=name)


def _checked_dataset(url: str, storage_options: Mapping[str, Any] | None
                     ) -> tuple[Any, tuple[tuple[str, FileIdentity], ...]]:
    """Return the dataset of a table and its files' identities, every footer checked."""
    import fsspec

    from rumi_xarray.catalogs import identity

    dataset = dataset_of(url, storage_options)
    fs, _ = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple) else fs.protocol
    local = protocol in ("file", "local")
    found = tuple((path, identity.read_footer(fs, path, source_name(path),
                                              local=local).identity)
                  for path in sorted(dataset.files))
    return dataset, found


def _refuse_changed(name: str, before: dict[str, FileIdentity],
                    now: dict[str, FileIdentity]) -> None:
    """Raise naming the files of a table that changed since its open."""
    from rumi_xarray.catalogs import identity

    for path in sorted(set(before) | set(now)):
        if path not in now:
            raise RumiFileChangedError(f"{name}: {source_name(path)} was removed from the "
                                       f"table since it was opened: open it again")
        if path not in before:
            raise RumiFileChangedError(f"{name}: {source_name(path)} was added to the table "
                                       f"since it was opened: open it again")
        identity.check(now[path], before[path], source_name(path) if path != name else name)


def dataset_of(url: str, storage_options: Mapping[str, Any] | None = None) -> Any:
    """Return the ``pyarrow.dataset`` of a stac-geoparquet file or (hive-partitioned) folder.

    Parameters
    ----------
    url : str
        Local path or fsspec URL.
    storage_options : mapping, optional

    Returns
    -------
    pyarrow.dataset.Dataset
    """
    import fsspec
    import pyarrow.dataset as pads

    fs, root = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    protocol = fs.protocol[0] if isinstance(fs.protocol, tuple) else fs.protocol
    if protocol in ("file", "local"):
        return pads.dataset(root, format="parquet", partitioning="hive")
    return pads.dataset(root if protocol not in ("http", "https") else [root],
                        filesystem=fs, format="parquet", partitioning="hive")


def datetime_bounds(value: Any) -> tuple[Any, Any]:
    """Return the inclusive UTC ``pandas.Timestamp`` bounds of a ``datetime=`` selection."""
    import datetime as dt

    import pandas as pd

    def stamp(v: Any, end: bool) -> Any:
        if v is None or v in ("..", ""):
            return None
        if isinstance(v, str):
            try:
                period = pd.Period(v.replace("Z", ""))
                t = period.end_time if end else period.start_time
            except ValueError:
                t = pd.Timestamp(v)
        else:
            t = pd.Timestamp(v)
        return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")

    if isinstance(value, slice):
        return stamp(value.start, False), stamp(value.stop, True)
    if isinstance(value, str) and "/" in value:
        a, b = value.split("/", 1)
        return stamp(a, False), stamp(b, True)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return stamp(value[0], False), stamp(value[1], True)
    if isinstance(value, (str, dt.date)) or hasattr(value, "dtype"):
        return stamp(value, False), stamp(value, True)
    raise RumiCatalogError(f"datetime= takes 'start/end', a slice, a pair or one date, got "
                           f"{value!r}")


_OPS = {"eq": "__eq__", "neq": "__ne__", "lt": "__lt__", "lte": "__le__", "gt": "__gt__",
        "gte": "__ge__"}


def filter_expression(schema: Any, *, bbox: Sequence[float] | None = None,
                      datetime: Any = None, query: Mapping[str, Any] | None = None) -> Any:
    """Return the pyarrow expression of STAC search selections over a stac-geoparquet schema.

    Parameters
    ----------
    schema : pyarrow.Schema
    bbox, datetime, query
        As for :func:`read_geoparquet`.

    Returns
    -------
    pyarrow.dataset.Expression or None
    """
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    names = set(schema.names)
    parts = []
    if bbox is not None:
        if "bbox" not in names:
            raise RumiCatalogError("bbox= needs the table's bbox column (stac-geoparquet)")
        west, south, east, north = (float(v) for v in bbox)
        box = pc.field
        parts.append((box("bbox", "xmin") <= east) & (box("bbox", "xmax") >= west)
                     & (box("bbox", "ymin") <= north) & (box("bbox", "ymax") >= south))
    if datetime is not None:
        lo, hi = datetime_bounds(datetime)

        def cmp(column: str, op: str, when: Any) -> Any:
            kind = schema.field(column).type
            # The bound in the column's own unit, rounded into the interval (up for a
            # lower bound, down for an upper one): a nanosecond bound such as a day's
            # end keeps exactly the rows it selects on a microsecond column, where a
            # datetime would truncate it (and pandas warn).
            per_unit = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[kind.unit]
            count = -(-when.value // per_unit) if op == "__ge__" else when.value // per_unit
            return getattr(pc.field(column), op)(pa.scalar(count, type=kind))

        instant = [cmp("datetime", "__ge__", lo)] if lo is not None else []
        instant += [cmp("datetime", "__le__", hi)] if hi is not None else []
        test = _all(instant)
        if {"start_datetime", "end_datetime"} <= names:
            span = ([cmp("end_datetime", "__ge__", lo)] if lo is not None else []) + (
                [cmp("start_datetime", "__le__", hi)] if hi is not None else [])
            if span:
                test = span_test = _all(span)
                test = span_test if not instant else (_all(instant) | span_test)
        if test is not None:
            parts.append(test)
    for prop, conditions in dict(query or {}).items():
        if prop not in names:
            raise RumiCatalogError(f"query= names property {prop!r}, which the table has no "
                                   f"column for")
        if not isinstance(conditions, Mapping):
            conditions = {"eq": conditions}
        for op, value in conditions.items():
            if op == "in":
                parts.append(pc.field(prop).isin(list(value)))
            elif op in _OPS:
                parts.append(getattr(pc.field(prop), _OPS[op])(value))
            else:
                raise RumiCatalogError(f"query= operator {op!r} is not one of "
                                       f"{sorted([*_OPS, 'in'])}")
    return _all(parts)


def _all(parts: list[Any]) -> Any:
    out = None
    for p in parts:
        out = p if out is None else out & p
    return out


def _drop_nulls(item: dict[str, Any]) -> dict[str, Any]:
    """Remove the null properties a table gives Items that lacked a column's field."""
    properties = item.get("properties")
    if isinstance(properties, dict):
        item["properties"] = {k: v for k, v in properties.items()
                              if v is not None or k == "datetime"}
    assets = item.get("assets")
    if isinstance(assets, dict):
        item["assets"] = {key: {k: v for k, v in asset.items() if v is not None}
                          if isinstance(asset, dict) else asset
                          for key, asset in assets.items()}
    return item
