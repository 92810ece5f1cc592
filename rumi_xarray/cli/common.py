"""What every ``rumi-xarray`` subcommand shares: the program name, argument types, errors."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rumi_xarray.formatting import human_size

__all__ = ["PROG", "CommandError", "UsageError", "add_command", "add_overviews",
           "add_progress", "catalog_sources", "human_size", "overviews_arg", "positive_int",
           "tile_size_arg"]

PROG = "rumi-xarray"


class CommandError(Exception):
    """A runtime failure whose message is meant for the user as it is."""


class UsageError(CommandError):
    """A command line the command cannot use (exit code 2, as argparse's usage errors)."""


def add_command(commands: Any, common: argparse.ArgumentParser, name: str,
                run: Callable[[argparse.Namespace], int], *, help: str,
                description: str) -> argparse.ArgumentParser:
    """Add subcommand ``name``, run by ``run(args)`` (which returns the exit code).

    Parameters
    ----------
    commands : argparse subparsers action
    common : argparse.ArgumentParser
        The options every subcommand takes (``--debug``).
    name : str
    run : callable
    help, description : str
        The one-line help in ``rumi-xarray --help`` and the subcommand's own.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser, for its own arguments.
    """
    parser = commands.add_parser(name, parents=[common], help=help, description=description)
    parser.set_defaults(run=run)
    return parser


def catalog_sources(args: argparse.Namespace, suffixes: tuple[str, ...], wanted: str) -> Any:
    """Return the catalog table of ``args.sources``, once ``args.output`` is known good.

    The last argument is the output: refusing names without one of
    ``suffixes`` keeps a forgotten OUT from overwriting the last source.

    Parameters
    ----------
    args : argparse.Namespace
        ``sources``, ``output`` and ``progress``.
    suffixes : tuple of str
        Lower-case endings the output may have.
    wanted : str
        Those endings as the message names them.

    Returns
    -------
    pandas.DataFrame
        As :func:`rumi_xarray.catalog` returns it.

    Raises
    ------
    UsageError
        The output's name has none of ``suffixes``.
    """
    from rumi_xarray import options
    from rumi_xarray.catalogs.table import catalog

    if not args.output.lower().endswith(suffixes):
        raise UsageError(f"the last argument is the output and must end in {wanted}, "
                         f"got {args.output!r}")
    with options.set_options(progress=args.progress):
        return catalog(list(args.sources))


def tile_size_arg(text: str) -> int:
    """Parse ``--tile-size``: an integer from 1 to 65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"tile size must be at most 65535, got {value}")
    return value


def positive_int(text: str) -> int:
    """Parse a positive integer argument."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_progress(parser: argparse.ArgumentParser) -> None:
    """Add ``--progress/--no-progress`` (default: the ``progress`` option)."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show progress bars (default: in terminals and notebooks)")


def overviews_arg(text: str) -> str | list[int]:
    """Parse ``--overviews``: ``auto`` or comma-separated factors such as ``2,4,8``."""
    from rumi_xarray.model.overviews import AUTO, check_factors

    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return list(check_factors(int(part) for part in text.split(",")))
    except ValueError as exc:
        hint = exc if "factor" in str(exc) else f"not a list of integers: {text!r}"
        raise argparse.ArgumentTypeError(f"--overviews takes 'auto' or factors such as 2,4,8 "
                                         f"({hint})") from None


def add_overviews(parser: argparse.ArgumentParser) -> None:
    """Add ``--overviews`` and ``--overview-resampling`` (GDAL COG overviews)."""
    from rumi_xarray.model.overviews import RESAMPLINGS

    parser.add_argument("--overviews", type=overviews_arg, default=None,
                        metavar="auto|F1,F2,...",
                        help="overview levels as GDAL's COG driver makes them: 'auto' halves "
                             "until a level fits within one tile, or factors such as 2,4,8; "
                             "each level is the Rumi file <output>.ovrF beside the output, "
                             "recorded in its sidecar (default: none)")
    parser.add_argument("--overview-resampling", choices=RESAMPLINGS, default="average",
                        help="how levels are computed, as GDAL computes them "
                             "(default: %(default)s)")
