"""CF facts: nodata, scale, offset and units survive, pack and decode like rioxarray.

Every standard xarray open keyword is honoured; sidecars are strict JSON; values that
cannot be stored packed are refused. Ground truth: real GeoTIFFs written by rasterio and
read by ``rioxarray.open_rasterio`` (the peer users compare with), netCDF written with
this environment's default engine, and librumi's plain ``rumi.read`` (tests/truth.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.write.to_rumi import to_rumi, write_array
from tests.scenes import EPSG, TEXTS, TRANSFORM, convert, packed_netcdf, reflectance, scene_geotiff
from tests.truth import read, sidecar, stored_dtype, strict_json

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")

pytestmark = pytest.mark.filterwarnings(
    # rasterio/affine and rioxarray note their own deprecations on every call.
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning:rioxarray")


# --- every standard keyword, through open_dataset and open_mfdataset ------------------


KEYWORDS = {
    "mask_and_scale=True": {"mask_and_scale": True},
    "mask_and_scale=False": {"mask_and_scale": False},
    "decode_times=False": {"decode_times": False},
    "decode_coords=all": {"decode_coords": "all"},
    "decode_coords=True": {"decode_coords": True},
    "decode_timedelta=False": {"decode_timedelta": False},
    "concat_characters=False": {"concat_characters": False},
    "lock=False": {"lock": False},
    "lock=object": {"lock": "threading"},
    "drop_variables": {"drop_variables": ["common_name"]},
}


@pytest.mark.parametrize("name", sorted(KEYWORDS))
def test_standard_keywords_are_accepted_and_honoured(two_dates, name: str) -> None:
    import threading

    paths, data = two_dates
    kwargs = dict(KEYWORDS[name])
    if kwargs.get("lock") == "threading":
        kwargs["lock"] = threading.Lock()
    one = xr.open_dataset(paths[1], engine="rumi", **kwargs)
    many = xr.open_mfdataset(paths, engine="rumi", **kwargs)
    assert many.band_data.chunks is not None  # dask, like every open_mfdataset
    for ds, expected in ((one, data[1:2]), (many, data[::-1])):
        var = ds.band_data
        if kwargs.get("mask_and_scale") is False:
            assert var.dtype == np.uint16
            assert var.attrs["_FillValue"] == 0 and var.attrs["scale_factor"] == np.float32(1e-4)
            np.testing.assert_array_equal(var.values, expected)
        else:
            assert var.dtype == np.float32 and var.encoding["_FillValue"] == 0
            want = np.where(expected == 0, np.nan,
                            expected.astype(np.float32) * np.float32(1e-4) + np.float32(-0.1))
            np.testing.assert_array_equal(var.values, want)
        if kwargs.get("decode_times") is False:
            assert ds.time.dtype.kind == "i" and "since" in ds.time.attrs["units"]
        else:
            assert ds.time.dtype == np.dtype("datetime64[ns]")
        if kwargs.get("decode_coords") == "all":
            assert "spatial_ref" in ds.coords and var.encoding["grid_mapping"] == "spatial_ref"
        if "drop_variables" in kwargs:
            assert "common_name" not in ds.variables
        assert ds.rio.crs.to_epsg() == EPSG
        assert list(ds.band.values) == ["B04", "B08", "B11"]


def test_use_cftime_gives_cftime_datetimes(two_dates) -> None:
    # Decided: use_cftime is xarray's own keyword (deprecated by xarray in favour
    # of decode_times=CFDatetimeCoder(use_cftime=True)); both give cftime objects.
    cftime = pytest.importorskip("cftime")
    paths, _ = two_dates
    with pytest.warns((FutureWarning, DeprecationWarning), match="use_cftime"):
        one = xr.open_dataset(paths[0], engine="rumi", use_cftime=True)
    assert isinstance(one.time.values[0], cftime.datetime)
    assert one.time.values[0] == cftime.DatetimeProlepticGregorian(2024, 5, 11)
    coder = xr.coders.CFDatetimeCoder(use_cftime=True)
    many = xr.open_mfdataset(paths, engine="rumi", decode_times=coder)
    assert [t.day for t in many.time.values] == [1, 11]
    assert isinstance(many.indexes["time"], xr.CFTimeIndex)
    with pytest.warns((FutureWarning, DeprecationWarning), match="use_cftime"):
        plain = xr.open_dataset(paths[0], engine="rumi", use_cftime=False)
    assert plain.time.dtype == np.dtype("datetime64[ns]")


# --- nodata, scale, offset and units survive, and decode like rioxarray ---------------


def test_convert_keeps_nodata_scale_offset_units_and_decodes_like_rioxarray(
        tif: Path, tmp_path: Path) -> None:
    out = tmp_path / "scene.rumi"
    code, stdout, err = convert("convert", tif, out, "--tile-size", "16")
    assert code == 0, err
    assert "nodata 0, scale_factor 0.0001, add_offset -0.1, units reflectance" in stdout
    assert sidecar(out) == {"format": "rumi-xarray-sidecar", "version": 2, "nodata": 0,
                            "scale_factor": 1e-4, "add_offset": -0.1, "units": "reflectance",
                            # the GeoTIFF's tag, kept as an attribute (and read as its time)
                            "attributes": {"variable": {"TIFFTAG_DATETIME":
                                                        "2024:05:01 10:20:30"}}}
    np.testing.assert_array_equal(read(out)[0], reflectance())  # stored packed, as uint16
    assert stored_dtype(out) == np.uint16

    peer = rioxarray.open_rasterio(tif, mask_and_scale=True)
    ours = xr.open_dataset(out, engine="rumi").band_data.isel(time=0)
    assert ours.dtype == peer.dtype == np.float32
    np.testing.assert_array_equal(ours.values, peer.values)  # bit for bit, NaN for nodata
    assert np.isnan(ours.rio.nodata) and np.isnan(peer.rio.nodata)
    assert ours.rio.encoded_nodata == peer.rio.encoded_nodata == 0
    assert ours.attrs["units"] == "reflectance"
    # The masked mean in reflectance (the issue saw 0.3970 instead of 0.3995).
    assert float(ours.mean()) == float(peer.mean())
    assert round(float(ours.mean()), 4) == round(float(peer.mean()), 4)

    raw_peer = rioxarray.open_rasterio(tif)
    raw = xr.open_dataset(out, engine="rumi", mask_and_scale=False).band_data.isel(time=0)
    assert raw.dtype == raw_peer.dtype == np.uint16
    np.testing.assert_array_equal(raw.values, raw_peer.values)
    assert raw.rio.nodata == raw_peer.rio.nodata == 0
    assert raw.attrs["scale_factor"] == pytest.approx(raw_peer.attrs["scale_factor"])
    assert raw.attrs["add_offset"] == pytest.approx(raw_peer.attrs["add_offset"])


@pytest.mark.parametrize("decoded", [False, True], ids=["raw", "decoded"])
def test_to_rumi_of_rioxarray_keeps_the_facts(tif: Path, tmp_path: Path, decoded: bool
                                              ) -> None:
    # rioxarray's mask_and_scale=True gives floats with the packing in encoding,
    # mask_and_scale=False the raw samples with CF attributes: both store packed.
    source = rioxarray.open_rasterio(tif, mask_and_scale=decoded)
    out = tmp_path / "x.rumi"
    to_rumi(source, out, time="2024-05-01", tile_size=16)
    assert stored_dtype(out) == np.uint16
    np.testing.assert_array_equal(read(out)[0], reflectance())
    facts = sidecar(out)
    assert (facts["nodata"], facts["scale_factor"], facts["add_offset"], facts["units"]) == (
        0, 1e-4, -0.1, "reflectance")
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True)
    np.testing.assert_array_equal(rx.open_dataset(out).band_data.values[0], peer.values)
    # Band names come from the GDAL descriptions (tests/test_bands.py).
    assert rumi.info(source=os.fspath(out)).bands == TEXTS


def test_decoded_values_on_request(tif: Path, tmp_path: Path) -> None:
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True)
    out = tmp_path / "decoded.rumi"
    to_rumi(peer, out, time="2024-05-01", tile_size=16, encode_cf=False)
    assert stored_dtype(out) == np.float32
    facts = sidecar(out)
    assert np.isnan(facts.pop("nodata"))
    # rioxarray's attrs (the GeoTIFF's tag) are kept as they were shown
    assert facts.pop("attributes") == {"variable": {"TIFFTAG_DATETIME": "2024:05:01 10:20:30"}}
    assert facts == {"format": "rumi-xarray-sidecar", "version": 2, "units": "reflectance"}
    back = rx.open_dataset(out).band_data
    np.testing.assert_array_equal(back.values[0], peer.values)
    assert np.isnan(back.rio.nodata)
    # Raw samples decoded on the way (xarray's decoder), stored as float32.
    cli = tmp_path / "cli.rumi"
    code, _, err = convert("convert", tif, cli, "--decode", "--dtype", "float32")
    assert code == 0, err
    assert stored_dtype(cli) == np.float32
    np.testing.assert_array_equal(read(cli)[0], peer.values)
    # float64 decoded values halve into float32 only when asked.
    wide = peer.astype(np.float64)
    wide.encoding = {}
    to_rumi(wide, tmp_path / "wide.rumi", time="2024-05-01", encode_cf=False)
    assert stored_dtype(tmp_path / "wide.rumi") == np.float64
    to_rumi(wide, tmp_path / "half.rumi", time="2024-05-01", encode_cf=False, dtype="float32")
    np.testing.assert_array_equal(read(tmp_path / "half.rumi")[0], peer.values)


def test_packed_netcdf_stays_packed_or_decodes_to_float32(tmp_path: Path) -> None:
    nc = tmp_path / "era.nc"
    source = packed_netcdf(nc)
    assert source["t2m"].dtype == np.float64  # xarray decodes it
    packed = tmp_path / "packed.rumi"
    code, _, err = convert("convert", nc, packed, "--crs", "EPSG:4326", "--tile-size", "8")
    assert code == 0, err
    assert stored_dtype(packed) == np.int16  # not float64: 4x smaller
    raw = xr.open_dataset(nc, mask_and_scale=False)["t2m"].values
    np.testing.assert_array_equal(read(packed)[:, 0], raw)
    facts = sidecar(packed)
    assert (facts["nodata"], facts["scale_factor"], facts["add_offset"], facts["units"],
            facts["decoded_dtype"]) == (-32767, 0.01, 280.0, "K", "float64")
    back = rx.open_dataset(packed).band_data
    assert back.dtype == np.float64
    np.testing.assert_array_equal(back.values[:, 0], source["t2m"].values)
    # --decode --dtype float32: the decoded values in half the bytes of float64.
    single = tmp_path / "single.rumi"
    code, _, err = convert("convert", nc, single, "--crs", "EPSG:4326", "--decode",
                           "--dtype", "float32")
    assert code == 0, err
    assert stored_dtype(single) == np.float32
    np.testing.assert_array_equal(read(single)[:, 0], source["t2m"].values.astype(np.float32))
    assert np.isnan(sidecar(single)["nodata"]) and "scale_factor" not in sidecar(single)
    # A float dtype for packed numbers is refused: it is almost surely a mistake.
    code, _, err = convert("convert", nc, tmp_path / "odd.rumi", "--crs", "EPSG:4326",
                           "--dtype", "float32")
    assert code == 1 and "--decode" in err and not (tmp_path / "odd.rumi").exists()


def test_values_that_do_not_fit_the_packed_type_raise_and_leave_nothing(tif: Path,
                                                                         tmp_path: Path
                                                                         ) -> None:
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True)
    brighter = peer * 10  # beyond uint16 once packed with scale 1e-4
    brighter.encoding = dict(peer.encoding)
    target = tmp_path / "x.rumi"
    with pytest.raises(ValueError, match=r"x\.rumi: values from .* do not fit uint16"):
        to_rumi(brighter, target, time="2024-05-01")
    assert os.listdir(tmp_path) == ["scene.tif"]
    nodata_less = peer.copy()
    nodata_less.encoding = {"dtype": "uint16", "scale_factor": 1e-4, "add_offset": -0.1}
    with pytest.raises(ValueError, match="NaN values cannot be stored as uint16"):
        to_rumi(nodata_less, target, time="2024-05-01")
    assert os.listdir(tmp_path) == ["scene.tif"]


def test_a_nan_nodata_sidecar_is_strict_json(tmp_path: Path) -> None:
    data = reflectance().astype(np.float32) / 10000
    data[:, :6, :9] = np.nan
    tif = scene_geotiff(tmp_path / "nan.tif", data, nodata=float("nan"))
    out = tmp_path / "nan.rumi"
    code, _, err = convert("convert", tif, out, "--time", "2024-05-01")
    assert code == 0, err
    text = Path(f"{out}.aux.json").read_text()
    assert strict_json(text)["nodata"] == "nan"
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True)
    ds = rx.open_dataset(out)
    assert np.isnan(ds.band_data.rio.nodata)
    np.testing.assert_array_equal(ds.band_data.isel(time=0).values, peer.values)
    # Sidecars written before (version 1, no digests) hold a bare NaN, which Python's json
    # reads: they still open.
    old = {k: v for k, v in strict_json(text).items() if "digest" not in k} | {"version": 1}
    Path(f"{out}.aux.json").write_text(json.dumps(old).replace('"nan"', "NaN"))
    assert "NaN" in Path(f"{out}.aux.json").read_text()
    again = rx.open_dataset(out)
    assert np.isnan(again.band_data.rio.nodata)
    np.testing.assert_array_equal(again.band_data.isel(time=0).values, peer.values)
    # Infinite nodata is spelled "inf"/"-inf" and read back as a number.
    ninf = tmp_path / "ninf.rumi"
    write_array(ninf, data[None], bands=["a", "b", "c"], time=["2024-05-01"],
                nodata=-np.inf)
    assert strict_json(Path(f"{ninf}.aux.json").read_text())["nodata"] == "-inf"
    assert rx.open_dataset(ninf, mask_and_scale=False).band_data.attrs["_FillValue"] == -np.inf


def test_a_stale_sidecar_is_removed_and_a_new_one_replaces_it(tif: Path, tmp_path: Path
                                                               ) -> None:
    out = tmp_path / "x.rumi"
    to_rumi(rioxarray.open_rasterio(tif), out, time="2024-05-01")
    assert Path(f"{out}.aux.json").exists()
    plain = xr.DataArray(np.ones((1, 1, 4, 4), np.uint8), dims=("time", "band", "y", "x"),
                         coords={"time": [np.datetime64("2024-01-01", "ns")]})
    to_rumi(plain, out)
    # The old facts would mislabel the new data: the new sidecar holds none (its digests only).
    assert sidecar(out) == {"format": "rumi-xarray-sidecar", "version": 2}
    assert "_FillValue" not in rx.open_dataset(out).band_data.encoding
    write_array(out, np.zeros((1, 1, 4, 4), np.int16), bands=["a"], time=["2024-01-01"],
                nodata=-1, units="mm")
    assert sidecar(out)["nodata"] == -1 and sidecar(out)["units"] == "mm"
    assert sorted(os.listdir(tmp_path)) == ["scene.tif", "x.rumi", "x.rumi.aux.json"]
    with pytest.raises(ValueError, match="nodata 300 is outside the range of uint8"):
        write_array(out, np.zeros((1, 1, 4, 4), np.uint8), bands=["a"],
                    time=["2024-01-01"], nodata=300)
    assert sidecar(out)["nodata"] == -1  # a refused write changes nothing


def test_per_band_scales_and_units_that_differ_are_never_dropped_silently(
        tmp_path: Path) -> None:
    tif = scene_geotiff(tmp_path / "mixed.tif", reflectance(), scales=[1e-4, 2e-4, 1e-4],
                        offsets=[0.0, -0.1, 0.0], units=["reflectance", "dn", "reflectance"],
                        descriptions=TEXTS)
    out = tmp_path / "mixed.rumi"
    with pytest.warns(UserWarning) as caught:
        to_rumi(rioxarray.open_rasterio(tif), out, time="2024-05-01")
    messages = " ".join(str(w.message) for w in caught)
    assert "different scales" in messages and "decoded values are stored" in messages
    assert "units differ between bands" in messages
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True)
    np.testing.assert_array_equal(rx.open_dataset(out).band_data.values[0], peer.values)
    assert "units" not in sidecar(out) and np.isnan(sidecar(out)["nodata"])


def test_open_keywords_for_files_written_elsewhere(tmp_path: Path) -> None:
    data = reflectance(2, (1, 2, 10, 12))
    path = tmp_path / "elsewhere.rumi"
    write_array(path, data, bands=["a", "b"], time=["2024-01-01"], tile_size=8)
    assert sidecar(path) == {"format": "rumi-xarray-sidecar", "version": 2}  # no facts
    ds = xr.open_dataset(path, engine="rumi", nodata=0, scale_factor=1e-4, add_offset=-0.1,
                         units="reflectance")
    want = np.where(data == 0, np.nan, data.astype(np.float32) * np.float32(1e-4)
                    + np.float32(-0.1))
    np.testing.assert_array_equal(ds.band_data.values, want)
    assert ds.band_data.attrs["units"] == "reflectance"
    # Keywords win over a sidecar; sidecar=False ignores it, a path reads another one.
    write_array(path, data, bands=["a", "b"], time=["2024-01-01"], tile_size=8, nodata=1)
    assert xr.open_dataset(path, engine="rumi", nodata=0).band_data.encoding["_FillValue"] == 0
    unmasked = xr.open_dataset(path, engine="rumi", sidecar=False, mask_and_scale=False)
    assert unmasked.band_data.dtype == np.uint16 and "_FillValue" not in unmasked.band_data.attrs
    # Without nodata, mask_and_scale=True still gives rioxarray's float32 (nothing masked).
    masked = xr.open_dataset(path, engine="rumi", sidecar=False, mask_and_scale=True).band_data
    assert masked.dtype == np.float32 and not masked.isnull().any()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "rumi-xarray-sidecar", "version": 1,
                                 "nodata": 5}))
    assert xr.open_dataset(path, engine="rumi", sidecar=other).band_data.encoding[
        "_FillValue"] == 5
    with pytest.raises(ValueError, match=r"nodata 0\.5 cannot be a uint16 sample"):
        xr.open_dataset(path, engine="rumi", nodata=0.5)


def test_catalog_columns_carry_the_facts(two_dates, tmp_path: Path) -> None:
    paths, data = two_dates
    table = rx.catalog(paths)
    assert list(table["nodata"]) == [0, 0] and list(table["units"]) == ["reflectance"] * 2
    table.to_parquet(tmp_path / "cat.parquet")
    cube = rx.open_catalog(tmp_path / "cat.parquet", chunks={})
    single = xr.open_dataset(paths[1], engine="rumi").band_data
    np.testing.assert_array_equal(cube.band_data.values[0], single.values[0])
    assert cube.band_data.dtype == np.float32 and cube.band_data.encoding["_FillValue"] == 0
    raw = rx.open_catalog(table, mask_and_scale=False)
    np.testing.assert_array_equal(raw.band_data.values, data[::-1])
    odd = tmp_path / "odd.rumi"
    write_array(odd, data[:1], bands=TEXTS, time=["2024-06-01"], transform=TRANSFORM,
                crs=EPSG, tile_size=8, nodata=1)
    with pytest.raises(ValueError, match=r"nodata 1 != 0"):
        rx.open_catalog(rx.catalog([*paths, odd]))
