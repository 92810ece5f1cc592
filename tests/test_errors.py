"""Every error the public API raises on purpose is an ``rx.RumiError``.

Each case checks the rumi_xarray class, the builtin class code written
before it keeps catching, and that the message names the file or option and
what is wrong.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx


def _no_time() -> xr.DataArray:
    return xr.DataArray(np.zeros((1, 4, 4), dtype=np.uint16), dims=("band", "y", "x"),
                        coords={"band": ["B04"]})


@pytest.mark.parametrize(("keywords", "wrong"), [
    ({"codec": "nonsense"}, "unknown codec 'nonsense'"),
    ({"frame": "bogus"}, "frame must be one of"),
    ({"tile_size": 0}, r"tile_size must be an integer in \[1, 65535\], got 0"),
])
def test_to_rumi_bad_options_are_write_errors(tmp_path: Path, keywords: dict,
                                              wrong: str) -> None:
    target = tmp_path / "bad.rumi"
    with pytest.raises(rx.RumiWriteError, match=wrong) as info:
        rx.to_rumi(_no_time(), target, time="2024-05-01", **keywords)
    err = info.value
    assert isinstance(err, rx.RumiWriteValueError)
    assert isinstance(err, ValueError)  # what to_rumi raised before
    assert isinstance(err, rx.RumiError)
    assert str(err).startswith(f"{target}: ")
    assert err.filename == str(target) and err.source == str(target)
    assert os.listdir(tmp_path) == []  # raised before anything is written


def test_to_rumi_data_without_time_is_a_write_error(tmp_path: Path) -> None:
    target = tmp_path / "timeless.rumi"
    with pytest.raises(rx.RumiWriteValueError) as info:
        rx.to_rumi(_no_time(), target)
    assert isinstance(info.value, ValueError) and isinstance(info.value, rx.RumiWriteError)
    assert str(info.value).startswith(f"{target}: the data have no time coordinate")
    assert "time=" in str(info.value)
    assert os.listdir(tmp_path) == []


def test_open_catalog_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.parquet"
    with pytest.raises(rx.RumiFileNotFoundError) as info:
        rx.open_catalog(missing)
    err = info.value
    assert isinstance(err, FileNotFoundError) and isinstance(err, rx.RumiError)
    assert str(err).startswith(f"{missing}: no such catalog file")
    assert err.filename == str(missing)


def test_open_catalog_of_a_json_file(tmp_path: Path) -> None:
    table = tmp_path / "catalog.json"
    table.write_text('{"path": ["a.rumi"]}\n')
    with pytest.raises(rx.RumiCatalogError) as info:
        rx.open_catalog(table)
    err = info.value
    assert isinstance(err, ValueError)  # pyarrow's ArrowInvalid was one
    assert str(err).startswith(f"{table}: not a readable Parquet catalog table")
    assert "ArrowInvalid" in str(err)


@pytest.mark.parametrize(("options", "wrong"), [
    ({"cache_bytes": -5}, "option cache_bytes must be a non-negative number of bytes, got -5"),
    ({"foo": 1}, "unknown option(s) ['foo']; valid options: ['cache_bytes'"),
])
def test_set_options_bad_settings(options: dict, wrong: str) -> None:
    before = rx.get_options()
    with pytest.raises(rx.RumiSettingsError) as info:
        rx.set_options(**options)
    assert isinstance(info.value, rx.RumiSettingsValueError)
    assert isinstance(info.value, ValueError)  # what set_options raised before
    assert wrong in str(info.value)
    assert rx.get_options() == before  # nothing was changed


def test_open_dataset_of_a_number() -> None:
    with pytest.raises(rx.RumiSourceTypeError) as info:
        xr.open_dataset(12345, engine="rumi")
    err = info.value
    assert isinstance(err, TypeError) and isinstance(err, rx.RumiError)
    assert str(err).startswith("cannot open 12345 (int) as a Rumi source")
    assert "a path" in str(err) and "a URL" in str(err) and "bytes" in str(err)
