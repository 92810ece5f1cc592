"""The ``rumi-xarray`` command (also ``python -m rumi_xarray``): parser and dispatch.

One module per subcommand: :mod:`~rumi_xarray.cli.info` (what a Rumi file
holds), :mod:`~rumi_xarray.cli.convert` (anything xarray opens -> Rumi),
:mod:`~rumi_xarray.cli.catalog` (index many Rumi files into Parquet) and
:mod:`~rumi_xarray.cli.demo` (write a synthetic time series and analyse it).
Each one adds its parser with ``register`` and runs with ``run``.

Exit codes: 0 success, 1 runtime failure (one clear line on standard error;
``--debug`` shows the traceback), 2 usage error (argparse).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rumi_xarray.cli import catalog, convert, demo, info, ingest, stac
from rumi_xarray.cli.common import PROG, CommandError, UsageError

COMMANDS = (info, convert, catalog, ingest, demo, stac)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``rumi-xarray`` and its subcommands.

    Returns
    -------
    argparse.ArgumentParser
    """
    from importlib.metadata import version

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback on failure")
    parser = argparse.ArgumentParser(
        prog=PROG, parents=[common],
        description="Inspect, convert, catalog and demo Rumi rasters with xarray + dask.")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {version('rumi-xarray')}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``rumi-xarray`` and return its exit code.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 on success, 1 on a runtime failure, 2 on a usage error.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    debug = bool(getattr(args, "debug", False))
    try:
        return int(args.run(args))
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): stop quietly,
        # and keep Python from complaining again when it flushes stdout.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # A usage error is no failure to debug: no traceback, even with --debug.
        if debug and not isinstance(exc, UsageError):
            raise
        print(f"{PROG} {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, CommandError) or not text:
        return text or type(exc).__name__
    if isinstance(exc, (OSError, ValueError, TypeError, KeyError, RuntimeError)):
        return text
    return f"{type(exc).__name__}: {text}"
