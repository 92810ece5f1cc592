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
from collections.abc import Iterable
from typing import Any

from rumi_xarray.errors import RumiCatalogError

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


def read_geoparquet(source: Any) -> list[dict[str, Any]]:
    """Read STAC Items from a stac-geoparquet file or Arrow table.

    Parameters
    ----------
    source : str, os.PathLike or pyarrow.Table
        A local path or URL pyarrow reads, or a table as
        :func:`to_table` returns it.

    Returns
    -------
    list of dict
        STAC Item dictionaries.
    """
    import pyarrow as pa  # type: ignore[import-untyped]
    from stac_geoparquet.arrow import stac_table_to_items

    if isinstance(source, pa.Table):
        table = source
    else:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        table = pq.read_table(os.fspath(source))
    return [_drop_nulls(item) for item in stac_table_to_items(table)]


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
