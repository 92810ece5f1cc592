"""``rumi-xarray catalog``: index Rumi files (paths, globs, URLs) into a Parquet table."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from rumi_xarray.cli.common import PROG, CommandError, add_progress


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``catalog`` subcommand to the parser."""
    catalog = commands.add_parser(
        "catalog", parents=[common], help="index Rumi files into a Parquet catalog",
        description="Read the header, labels and sidecar of Rumi files (paths, globs or "
                    "URLs) and write one row per file to a Parquet table.")
    catalog.add_argument("sources", nargs="+", metavar="SOURCE")
    catalog.add_argument("output", metavar="OUT.parquet")
    add_progress(catalog)
    catalog.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray catalog``: one Parquet row per Rumi file.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
    """
    from rumi_xarray import options
    from rumi_xarray.catalogs.table import catalog
    from rumi_xarray.write.atomic import atomic_path

    if not args.output.lower().endswith((".parquet", ".pq")):
        # The last argument is the output: refusing other names keeps a
        # forgotten OUT from overwriting the last source.
        print(f"{PROG} catalog: error: the last argument is the output and must end in "
              f".parquet, got {args.output!r}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    with options.set_options(progress=args.progress):
        table = catalog(list(args.sources))
    try:
        with atomic_path(args.output) as temporary:
            table.to_parquet(temporary, index=False)
    except ImportError as exc:
        raise CommandError(f"{args.output}: writing Parquet needs pyarrow "
                           f"(pip install 'rumi-xarray[catalog]'): {exc}") from exc
    print(f"{args.output}: {len(table)} file(s) cataloged in "
          f"{time.perf_counter() - started:.1f} s")
    return 0
