"""``rumi-xarray catalog``: index Rumi files (paths, globs, URLs) into a Parquet table."""

from __future__ import annotations

import argparse
import time
from typing import Any

from rumi_xarray.cli.common import CommandError, add_command, add_progress, catalog_sources


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``catalog`` subcommand to the parser."""
    catalog = add_command(
        commands, common, "catalog", run, help="index Rumi files into a Parquet catalog",
        description="Read the header, labels and sidecar of Rumi files (paths, globs or "
                    "URLs) and write one row per file to a Parquet table.")
    catalog.add_argument("sources", nargs="+", metavar="SOURCE")
    catalog.add_argument("output", metavar="OUT.parquet")
    add_progress(catalog)


def run(args: argparse.Namespace) -> int:
    """Run ``rumi-xarray catalog`` (one Parquet row per Rumi file); return the exit code."""
    from rumi_xarray.write.atomic import atomic_path

    started = time.perf_counter()
    table = catalog_sources(args, (".parquet", ".pq"), ".parquet")
    try:
        with atomic_path(args.output) as temporary:
            table.to_parquet(temporary, index=False)
    except ImportError as exc:
        raise CommandError(f"{args.output}: writing Parquet needs pyarrow "
                           f"(pip install 'rumi-xarray[catalog]'): {exc}") from exc
    print(f"{args.output}: {len(table)} file(s) cataloged in "
          f"{time.perf_counter() - started:.1f} s")
    return 0
