"""``rumi-xarray demo``: write a synthetic time series and analyse it (``make demo``)."""

from __future__ import annotations

import argparse
from typing import Any

from rumi_xarray.cli.common import add_command, positive_int, tile_size_arg


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``demo`` subcommand to the parser."""
    demo = add_command(
        commands, common, "demo", run, help="write a synthetic time series and analyse it",
        description="Write a synthetic Sentinel-2-like series (one file per date and one "
                    "multi-date file), then compute NDVI statistics with dask from the "
                    "multi-date file and check them against librumi's plain read.")
    demo.add_argument("--out", default="demo-data", metavar="DIR",
                      help="output directory (default: %(default)s)")
    demo.add_argument("--dates", type=positive_int, default=24, metavar="N",
                      help="number of dates over one year (default: %(default)s)")
    demo.add_argument("--size", type=positive_int, default=512, metavar="N",
                      help="image height and width in pixels (default: %(default)s)")
    demo.add_argument("--tile-size", type=tile_size_arg, default=256, metavar="N",
                      help="tile size of the written files (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray demo``; return the exit code."""
    from rumi_xarray.demo.ndvi import demo

    demo(args.out, n_dates=args.dates, size=args.size, tile_size=args.tile_size)
    return 0
