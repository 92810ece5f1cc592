"""What every ``rumi-xarray`` subcommand shares: the program name, argument types, errors."""

from __future__ import annotations

import argparse

from rumi_xarray.formatting import human_size

__all__ = ["PROG", "CommandError", "add_progress", "human_size", "positive_int",
           "tile_size_arg"]

PROG = "rumi-xarray"


class CommandError(Exception):
    """A runtime failure whose message is meant for the user as it is."""


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
