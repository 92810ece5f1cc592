"""``rumi-xarray ingest``: GeoTIFFs, COGs or STAC Items -> Rumi files plus one catalog."""

from __future__ import annotations

import argparse
from typing import Any

from rumi_xarray.cli.common import add_command, add_overviews, add_progress, tile_size_arg


def _band(text: str) -> int | str:
    """Return a band number (1-based) or a name (a band description, an asset key)."""
    return int(text) if text.isdigit() else text


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``ingest`` subcommand to the parser."""
    ingest = add_command(
        commands, common, "ingest", run,
        help="ingest GeoTIFFs, COGs or STAC Items into Rumi files and one catalog",
        description="Turn raster files (paths, globs, folders, URLs) or STAC Items (a JSON "
                    "or stac-geoparquet file) into one Rumi file per Item or file (per grid) "
                    "plus the catalog OUT/catalog.parquet. Outputs whose sources and "
                    "parameters did not change are skipped, so a rerun finishes what is "
                    "left. With --scheduler, tasks run on that dask.distributed cluster; "
                    "else in local processes.")
    ingest.add_argument("sources", nargs="+", metavar="SOURCE",
                        help="raster files, globs, folders or URLs; or one STAC Items file "
                             "(.json, .parquet)")
    ingest.add_argument("--out", required=True, metavar="DIR",
                        help="folder of the Rumi files and the catalog")
    ingest.add_argument("--bands", nargs="+", type=_band, metavar="BAND",
                        help="asset keys of Items, or band numbers/descriptions of files")
    ingest.add_argument("--time", metavar="REGEX",
                        help="files: a regular expression whose first group in each file "
                             "name is its date (default: the files' TIFFTAG_DATETIME)")
    ingest.add_argument("--layout", choices=("scene", "series"), default="scene",
                        help="one file per Item/file, or dates stacked per period "
                             "(default: %(default)s)")
    ingest.add_argument("--period", metavar="FREQ",
                        help="with --layout series: pandas frequency such as YS or MS")
    ingest.add_argument("--resolution", type=float, metavar="RES",
                        help="put every band of an Item on one grid of this pixel size")
    ingest.add_argument("--resampling", default="nearest",
                        help="rasterio resampling with --resolution (default: %(default)s)")
    ingest.add_argument("--tile-size", type=tile_size_arg, default=512, metavar="N")
    ingest.add_argument("--scheduler", metavar="ADDRESS",
                        help="dask.distributed scheduler to run on (tcp://host:8786)")
    ingest.add_argument("--workers", type=int, default=None, metavar="N",
                        help="local processes without --scheduler (default: the cores)")
    ingest.add_argument("--retries", type=int, default=2, metavar="N")
    ingest.add_argument("--verify", action="store_true",
                        help="read every output back and compare it with its sources")
    ingest.add_argument("--dry-run", action="store_true",
                        help="plan only: say what would be written and skipped")
    add_overviews(ingest)
    add_progress(ingest)


def run(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray ingest``; return the exit code (1 when an output failed)."""
    from rumi_xarray.ingestion.run import ingest

    sources: Any = args.sources[0] if len(args.sources) == 1 else args.sources
    report = ingest(sources, args.out, bands=args.bands, time=args.time,
                    layout=args.layout, period=args.period, resolution=args.resolution,
                    resampling=args.resampling, tile_size=args.tile_size,
                    client=args.scheduler, max_workers=args.workers, retries=args.retries,
                    verify=args.verify, dry_run=args.dry_run, errors="report",
                    progress=args.progress, overviews=args.overviews,
                    overview_resampling=args.overview_resampling)
    if args.dry_run:
        print(f"{args.out}: would write {len(report.written)} of {report.planned} outputs, "
              f"skip {len(report.skipped)} (planned in {report.plan_seconds:.1f} s)")
        return 0
    for output, why in sorted(report.failed.items()):
        print(f"failed: {output}: {why}")
    print(f"{report.catalog}: {report.summary()}")
    return 1 if report.failed else 0
