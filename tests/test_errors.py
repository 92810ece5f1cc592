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
    with pytest.raises(rx.RumiWriteValueError, match=wrong) as info:
        rx.to_rumi(_no_time(), target, time="2024-05-01", **keywords)
    err = info.value
    assert not isinstance(err, OSError)  # nothing was written: not an I/O error to retry
    assert isinstance(err, ValueError)  # what to_rumi raised before
    assert isinstance(err, rx.RumiError)
    assert str(err).startswith(f"{target}: ")
    assert err.filename == str(target) and err.source == str(target)
    assert os.listdir(tmp_path) == []  # raised before anything is written


def test_to_rumi_data_without_time_is_a_write_error(tmp_path: Path) -> None:
    target = tmp_path / "timeless.rumi"
    with pytest.raises(rx.RumiWriteValueError) as info:
        rx.to_rumi(_no_time(), target)
    assert isinstance(info.value, ValueError) and isinstance(info.value, rx.RumiError)
    assert not isinstance(info.value, OSError)
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


@pytest.mark.parametrize(("data", "wrong"), [
    (np.zeros((1, 1, 4, 4), dtype=np.uint16), "to_rumi takes an xarray DataArray or Dataset"),
    (xr.DataArray(np.zeros((1, 1, 4, 4), dtype="M8[s]"), dims=("time", "band", "y", "x"),
                  coords={"time": np.array(["2024-05-01"], "M8[ns]")}),
     r"Rumi cannot store samples of dtype datetime64\[s\]"),
])
def test_to_rumi_types_it_cannot_store_are_write_errors(tmp_path: Path, data: object,
                                                        wrong: str) -> None:
    target = tmp_path / "typed.rumi"
    with pytest.raises(rx.RumiWriteTypeError, match=wrong) as info:
        rx.to_rumi(data, target)  # type: ignore[arg-type]
    err = info.value
    assert isinstance(err, TypeError) and isinstance(err, rx.RumiError)
    assert not isinstance(err, OSError) and err.filename == str(target)
    assert str(err).startswith(f"{target}: ")
    assert os.listdir(tmp_path) == []


def test_open_stac_bad_arguments_are_catalog_errors(tmp_path: Path) -> None:
    pytest.importorskip("pystac")
    pytest.importorskip("odc.geo")
    path = tmp_path / "scene.rumi"
    rx.to_rumi(xr.DataArray(np.zeros((1, 1, 8, 8), dtype=np.uint16),
                            dims=("time", "band", "y", "x"),
                            coords={"time": np.array(["2024-05-01"], "M8[ns]"), "band": ["B04"],
                                    "y": 5000.0 - 10.0 * np.arange(8) - 5.0,
                                    "x": 300000.0 + 10.0 * np.arange(8) + 5.0}),
              path, crs="EPSG:32633")
    items = rx.to_stac([path])
    for keywords, wrong in (({"bands": []}, "bands= names no band"),
                            ({"bands": ["B04", "B04"]}, "bands= repeats a band")):
        with pytest.raises(rx.RumiCatalogError, match=wrong) as info:
            rx.open_stac(items, **keywords)
        assert isinstance(info.value, ValueError)
    with pytest.raises(rx.RumiSourceTypeError, match="cannot read a STAC Item from 'int'"):
        rx.open_stac([5])


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rumi_xarray.write.to_rumi import write_array

    path = tmp_path_factory.mktemp("keywords") / "scene.rumi"
    write_array(path, np.ones((1, 1, 8, 8), dtype=np.uint16), bands=["B04"],
                time=["2024-05-01"], transform=(10, 0, 0, 0, -10, 0), crs=32633, tile_size=8)
    return path


@pytest.mark.parametrize(("keywords", "kind", "wrong"), [
    ({"nodata": "abc"}, rx.RumiArgumentError, "nodata='abc' is not a number"),
    ({"nodata": True}, rx.RumiArgumentTypeError, "nodata=True must be a number"),
    ({"nodata": [1, 2]}, rx.RumiArgumentTypeError, "nodata=[1, 2] must be a number"),
    ({"nodata": 70000}, rx.RumiArgumentError, "nodata=70000 cannot be used with this file's "
     "uint16 samples"),
    ({"nodata": 1.5}, rx.RumiArgumentError, "nodata=1.5 cannot be used with this file's uint16"),
    ({"scale_factor": "x"}, rx.RumiArgumentTypeError, "scale_factor='x' must be a number"),
    ({"scale_factor": 0}, rx.RumiArgumentError, "scale_factor=0 must be a finite number"),
    ({"add_offset": float("inf")}, rx.RumiArgumentError, "add_offset=inf must be finite"),
    ({"add_offset": "y"}, rx.RumiArgumentTypeError, "add_offset='y' must be a number"),
    ({"units": 5}, rx.RumiArgumentTypeError, "units=5 must be a string"),
    ({"band_as_variable": "yes"}, rx.RumiArgumentTypeError,
     "band_as_variable='yes' must be True or False"),
    ({"mask_and_scale": "no"}, rx.RumiArgumentTypeError, "mask_and_scale='no' must be True"),
    ({"decode_times": "no"}, rx.RumiArgumentTypeError, "decode_times='no' must be True"),
    ({"decode_timedelta": 2}, rx.RumiArgumentTypeError, "decode_timedelta=2 must be True"),
    ({"use_cftime": "x"}, rx.RumiArgumentTypeError, "use_cftime='x' must be True"),
    ({"concat_characters": "x"}, rx.RumiArgumentTypeError, "concat_characters='x' must be"),
    ({"decode_coords": "bogus"}, rx.RumiArgumentError, "decode_coords='bogus' must be True"),
    ({"drop_variables": 5}, rx.RumiArgumentTypeError, "drop_variables=5 must be a variable"),
    ({"header": "abc"}, rx.RumiArgumentTypeError, "header='abc' must be the header's bytes"),
    ({"storage_options": 5}, rx.RumiArgumentTypeError, "storage_options=5 must be a dict"),
    ({"sidecar": 5}, rx.RumiArgumentTypeError, "sidecar=5 must be True, False or the path"),
    ({"sidecar": "yes"}, rx.RumiFileNotFoundError, "sidecar='yes' names no existing file"),
])
def test_bad_open_keywords_are_typed_and_name_keyword_and_file(
        scene: Path, keywords: dict, kind: type, wrong: str) -> None:
    for chunks in (None, {}):
        with pytest.raises(kind) as info:
            xr.open_dataset(scene, engine="rumi", chunks=chunks, **keywords)
        err = info.value
        assert isinstance(err, rx.RumiError)
        assert str(err).startswith(f"{scene}: ")
        assert wrong.replace("must be finite", "must be a finite number") in str(err), err
        if kind is not rx.RumiFileNotFoundError:
            assert err.keyword == next(iter(keywords))
            assert isinstance(err, ValueError)  # a wrong value, as such errors always were
            assert isinstance(err, TypeError) == (kind is rx.RumiArgumentTypeError)


def test_good_open_keywords_still_open(scene: Path) -> None:
    ds = xr.open_dataset(scene, engine="rumi", nodata="0", scale_factor=0.5, add_offset=1,
                         units="1", band_as_variable=np.bool_(False), decode_coords="all",
                         decode_times=xr.coders.CFDatetimeCoder(), drop_variables=["x_"],
                         header=bytearray(rx.open_dataset(scene).rumi.header))
    assert float(ds.band_data.isel(time=0, band=0, y=0, x=0)) == 1.5


def test_the_accessor_on_data_not_from_rumi_is_a_typed_error() -> None:
    with pytest.raises(rx.RumiArgumentError, match="not backed by a Rumi file") as info:
        _ = xr.Dataset({"v": ("x", [1, 2])}).rumi.header
    assert isinstance(info.value, ValueError)  # what it raised before
