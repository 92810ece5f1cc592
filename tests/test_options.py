"""Sizes in the settings read as dask reads them, without the settings importing dask."""

from __future__ import annotations

import pytest
from dask.utils import parse_bytes as dask_parse_bytes
from hypothesis import given, settings
from hypothesis import strategies as st

import rumi_xarray as rx
from rumi_xarray.options import parse_bytes

UNITS = ["", "b", "B", "k", "kB", "KB", "kiB", "KiB", "Ki", "M", "MB", "MiB", "mib", "G", "GB",
         "GiB", "T", "TiB", "P", "PB", "PiB", "foos", "e", "iB"]


def dask_reads(text: str) -> int | None:
    try:
        return int(dask_parse_bytes(text))
    except (ValueError, OverflowError):  # dask's int(float("inf")) overflows
        return None


def ours_reads(text: str) -> int | None:
    try:
        return parse_bytes(text)
    except ValueError:
        return None


@settings(max_examples=2000, deadline=None, database=None)
@given(st.one_of(
    st.builds(lambda n, space, unit: f"{n}{space}{unit}",
              st.one_of(st.integers(-10, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                        st.sampled_from(["", "1e6", "5.4", ".5", "1e999", "-0", "1_000"])),
              st.sampled_from(["", " ", "  "]), st.sampled_from(UNITS)),
    st.text(alphabet="0123456789.eE-+ kKmMgGiIbB_x", max_size=12)))
def test_sizes_read_exactly_as_dask_reads_them(text):
    assert ours_reads(text) == dask_reads(text), text


@pytest.mark.parametrize(("text", "expected"), [
    ("128MiB", 128 * 2**20), ("64 MB", 64 * 10**6), ("5.4kB", 5400), ("1e6", 10**6),
    ("MiB", 2**20), ("2 GiB", 2 * 2**30)])
def test_size_options_take_dask_spellings(text, expected):
    with rx.set_options(group_bytes=text, cache_bytes=text):
        assert rx.get_options()["group_bytes"] == expected
        assert rx.get_options()["cache_bytes"] == expected


@pytest.mark.parametrize("text", ["5 foos", "lots", "1e999 B", "--1MB"])
def test_unreadable_sizes_are_refused_naming_the_option(text):
    with pytest.raises(rx.RumiSettingsValueError, match="option group_bytes: cannot read"):
        rx.set_options(group_bytes=text)
