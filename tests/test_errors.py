"""Every error the public API raises on purpose is an ``rx.RumiError``.

Each case checks the rumi_xarray class, the builtin class code written
before it keeps catching, and that the message names the file or option and
what is wrong.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.write.to_rumi import to_rumi, write_array
from tests.scenes import EPSG, TEXTS, TRANSFORM, convert, packed_netcdf
from tests.truth import read


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
    # refused on its footer, before pyarrow reads it
    assert str(err).startswith(f"{table}: not a readable Parquet table (no PAR1 magic")


@pytest.mark.parametrize(("options", "wrong"), [
    ({"cache_bytes": -5}, "option cache_bytes must be a non-negative number of bytes, got -5"),
    ({"foo": 1}, "unknown option(s) ['foo']; valid options: ['allowed_hrefs', 'cache_bytes'"),
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


# --- no silent fallbacks --------------------------------------------------------------


def test_misspelt_codec_raises_naming_it_and_leaves_no_file(tmp_path: Path, tif: Path
                                                            ) -> None:
    rioxarray = pytest.importorskip("rioxarray")
    target = tmp_path / "x.rumi"
    with pytest.raises(ValueError, match=r"x\.rumi: unknown codec 'planar>zigzg>zstd'"):
        write_array(target, np.zeros((1, 1, 8, 8), np.uint16), bands=["a"],
                    time=["2024-01-01"], codec="planar>zigzg>zstd")
    with pytest.raises(ValueError, match="unknown codec 'zstdd'"):
        to_rumi(rioxarray.open_rasterio(tif), target, time="2024-01-01", codec="zstdd")
    code, _, err = convert("convert", tif, target, "--codec", "zsdt")
    assert code == 1 and "unknown codec 'zsdt'" in err and "nothing was written" in err
    assert sorted(os.listdir(tmp_path)) == ["scene.tif"]


# --- messages name the row, the format, the URL the user typed, the change ------------


def test_catalog_mismatch_names_the_reference_row(two_dates, tmp_path: Path) -> None:
    paths, data = two_dates  # paths[1] is the earlier date: the reference row
    odd = tmp_path / "odd.rumi"
    write_array(odd, data[:1, :2], bands=TEXTS[:2], time=["2024-06-01"],
                transform=TRANSFORM, crs=EPSG, tile_size=8)
    table = rx.catalog([paths[0], paths[1], odd])
    with pytest.raises(rx.RumiCatalogError) as info:
        rx.open_catalog(table)
    text = str(info.value)
    assert re.search(r"catalog row 2 \(.*odd\.rumi\) cannot be stacked with row 1 "
                     r"\(.*s1\.rumi\)", text), text
    assert "row 0" not in text


@pytest.mark.parametrize("kind", ["geotiff", "netcdf"])
def test_info_on_other_formats_suggests_convert(tmp_path: Path, tif: Path, kind: str) -> None:
    source = tif if kind == "geotiff" else tmp_path / "era.nc"
    if kind == "netcdf":
        packed_netcdf(source)
    code, _, err = convert("info", source)
    assert code == 1
    assert f"rumi-xarray convert {source.name} out.rumi" in err
    assert ("a TIFF" if kind == "geotiff" else "a netCDF") in err
    with pytest.raises(rx.RumiFormatError, match="convert it first"):
        xr.open_dataset(source, engine="rumi")


def test_s3_errors_name_the_url_the_user_typed(s3_server, remote_dir: Path,
                                               karu_fail_fast) -> None:
    from tests.conftest import BUCKET

    missing = f"s3://{BUCKET}/missing.rumi"
    with pytest.raises(FileNotFoundError) as info:
        xr.open_dataset(missing, engine="rumi")
    text = str(info.value)
    assert text.startswith(f"{missing}: no such file or object")
    assert "/vsis3/" not in text and "<?xml" not in text and "NoSuchKey" in text
    assert isinstance(info.value, rx.RumiFileNotFoundError)
    # A read that fails later (the object was replaced) names it the same way. A
    # bucket of its own: other tests list the shared bucket's objects.
    url = s3_server.put_bytes("fidelity", "scene.rumi", (remote_dir / "a.rumi").read_bytes())
    assert url == "s3://fidelity/scene.rumi"
    ds = xr.open_dataset(url, engine="rumi")
    s3_server.put_bytes("fidelity", "scene.rumi", b"RUMI" + bytes(64))
    with pytest.raises(OSError) as later:
        ds.band_data.load()
    assert str(later.value).startswith(url) and "/vsis3/" not in str(later.value)


@pytest.mark.parametrize("chunks", [None, {}], ids=["lazy", "dask"])
def test_reading_a_rewritten_file_says_it_changed(tmp_path: Path, chunks: dict | None
                                                  ) -> None:
    rng = np.random.default_rng(0)
    path = tmp_path / "scene.rumi"
    shape = (2, 2, 64, 64)
    write_array(path, rng.integers(0, 60000, shape).astype(np.uint16), bands=["a", "b"],
                time=["2024-01-01", "2024-01-02"], tile_size=16)
    ds = xr.open_dataset(path, engine="rumi", chunks=chunks)
    write_array(path, rng.integers(0, 600, shape).astype(np.uint16), bands=["a", "b"],
                time=["2024-01-01", "2024-01-02"], tile_size=16)
    with pytest.raises(rx.RumiFileChangedError,
                       match=rf"{re.escape(str(path))}: the file changed since it was opened "
                             r"\(its size went from \d+ to \d+ bytes\); open it again"):
        ds.band_data.isel(x=slice(0, 40)).load()
    np.testing.assert_array_equal(xr.open_dataset(path, engine="rumi").band_data.values,
                                  read(path))


@pytest.mark.parametrize("chunks", [None, {}])
def test_a_rewrite_that_still_decodes_is_refused(tmp_path: Path, chunks: dict | None
                                                 ) -> None:
    """Constant planes of the same layout decode fine with the old header: a rewrite
    must still be noticed (same size, same second), not read as new numbers."""
    path = tmp_path / "constant.rumi"
    shape = (2, 2, 64, 64)
    write_array(path, np.full(shape, 1, np.uint16), bands=["a", "b"],
                time=["2024-01-01", "2024-01-02"], tile_size=16)
    ds = xr.open_dataset(path, engine="rumi", chunks=chunks)
    size = path.stat().st_size
    write_array(path, np.full(shape, 7, np.uint16), bands=["a", "b"],
                time=["2024-01-01", "2024-01-02"], tile_size=16)
    assert path.stat().st_size == size  # the case a size check alone would miss
    with pytest.raises(rx.RumiFileChangedError,
                       match=rf"{re.escape(str(path))}: the file changed since it was opened"
                       ) as caught:
        ds.band_data.isel(time=0).load()
    assert caught.value.filename == str(path) and isinstance(caught.value, OSError)
    np.testing.assert_array_equal(xr.open_dataset(path, engine="rumi").band_data.values,
                                  read(path))
