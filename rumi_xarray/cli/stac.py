"""``rumi-xarray stac``: describe Rumi files as STAC Items (GeoJSON or stac-geoparquet)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rumi_xarray.cli.common import CommandError, add_command, add_progress, catalog_sources

#: Output endings: a GeoJSON ItemCollection, or a stac-geoparquet table.
JSON_SUFFIXES = (".json", ".geojson")
PARQUET_SUFFIXES = (".parquet", ".geoparquet", ".pq")


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``stac`` subcommand to the parser."""
    stac = add_command(
        commands, common, "stac", run, help="describe Rumi files as STAC Items",
        description="Read the header, labels and sidecar of Rumi files (paths, globs or URLs) "
                    "and write one STAC Item per file, with the projection, eo and raster "
                    "extensions and the Rumi header in the asset, as a GeoJSON ItemCollection "
                    "(OUT.json) or a stac-geoparquet table (OUT.parquet).")
    stac.add_argument("sources", nargs="+", metavar="SOURCE")
    stac.add_argument("output", metavar="OUT.json|OUT.parquet")
    stac.add_argument("--collection", default=None,
                      help="collection id to record in every Item")
    add_progress(stac)


def run(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray stac`` (one STAC Item per Rumi file); return the exit code."""
    from rumi_xarray.stac.items import to_stac

    started = time.perf_counter()
    table = catalog_sources(args, JSON_SUFFIXES + PARQUET_SUFFIXES, ".json or .parquet")
    try:
        items = to_stac(table, collection=args.collection)
    except ImportError as exc:
        raise CommandError(f"STAC output needs pystac and odc-geo (pip install "
                           f"'rumi-xarray[stac]'): {exc}") from exc
    if args.output.lower().endswith(PARQUET_SUFFIXES):
        try:
            from rumi_xarray.stac.geoparquet import write_geoparquet

            write_geoparquet(items, args.output)
        except ImportError as exc:
            raise CommandError(f"{args.output}: writing stac-geoparquet needs stac-geoparquet "
                               f"and pyarrow (pip install 'rumi-xarray[stac]'): {exc}") from exc
    else:
        _write_json(items, args.output)
    print(f"{args.output}: {len(items)} STAC item(s) in {time.perf_counter() - started:.1f} s")
    return 0


def _write_json(items: list[Any], path: str) -> None:
    from rumi_xarray.write.atomic import atomic_path

    collection = {"type": "FeatureCollection",
                  "features": [item.to_dict(transform_hrefs=False) for item in items]}
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as f:
        json.dump(collection, f, indent=1)
        f.write("\n")
