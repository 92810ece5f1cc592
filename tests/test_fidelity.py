"""Faithful to xarray, CF and rioxarray (issue 13): one test per finding.

Ground truth: real GeoTIFFs written by rasterio and read by
``rioxarray.open_rasterio`` (the peer users compare with), netCDF written
with this environment's default engine and reopened by xarray, and librumi's
plain ``rumi.read``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.cli.main import main
from rumi_xarray.write.to_rumi import to_rumi, write_array

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")

EPSG = 32633
X0, Y0, RES = 500000.0, 6000000.0, 10.0
TEXTS = ["B04, Red, 665nm", "B08, NIR, 842nm", "B11, SWIR, 1610nm"]
TRANSFORM = (RES, 0.0, X0, 0.0, -RES, Y0)

pytestmark = pytest.mark.filterwarnings(
    # rasterio/affine and rioxarray note their own deprecations on every call.
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning:rioxarray")


def write_geotiff(path: Path, data: np.ndarray, *, nodata: float | None = 0,
                  scales: list[float] | None = None, offsets: list[float] | None = None,
                  units: list[str] | None = None, descriptions: list[str] | None = None,
                  stamp: str | None = "2024:05:01 10:20:30") -> Path:
    """Write a tiled GeoTIFF with rasterio, as a user's data would come."""
    from rasterio.transform import from_origin

    count, height, width = data.shape
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=count,
                       dtype=data.dtype.name, crs=f"EPSG:{EPSG}", nodata=nodata,
                       transform=from_origin(X0, Y0, RES, RES), tiled=True,
                       blockxsize=16, blockysize=16) as dst:
        dst.write(data)
        if scales is not None:
            dst.scales = tuple(scales)
        if offsets is not None:
            dst.offsets = tuple(offsets)
        if units is not None:
            dst.units = tuple(units)
        for i, text in enumerate(descriptions or [], start=1):
            dst.set_band_description(i, text)
        if stamp is not None:
            dst.update_tags(TIFFTAG_DATETIME=stamp)
    return path


def reflectance(seed: int = 0, shape: tuple[int, int, int] = (3, 40, 50)) -> np.ndarray:
    """Sentinel-2-like digital numbers with a nodata (0) corner."""
    data = np.random.default_rng(seed).integers(1, 10000, shape).astype(np.uint16)
    data[:, :6, :9] = 0
    return data


@pytest.fixture
def tif(tmp_path: Path) -> Path:
    """nodata 0, scale 1e-4, offset -0.1, units and band texts: a packed reflectance."""
    return write_geotiff(tmp_path / "scene.tif", reflectance(), scales=[1e-4] * 3,
                         offsets=[-0.1] * 3, units=["reflectance"] * 3, descriptions=TEXTS)


def convert(*argv: object) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def strict_json(text: str) -> dict:
    """Parse JSON as jq and other languages do: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not valid JSON")

    return json.loads(text, parse_constant=refuse)


def sidecar(path: Path) -> dict:
    """The sidecar's content, with its "nan"/"inf"/"-inf" numbers as floats."""
    content = strict_json(Path(f"{path}.aux.json").read_text())
    return {k: float(v) if k in ("nodata", "scale_factor", "add_offset")
            and isinstance(v, str) else v for k, v in content.items()}


def stored_dtype(path: Path) -> np.dtype:
    return np.dtype(rumi.info(source=os.fspath(path)).dtype.name)


def read(path: Path) -> np.ndarray:
    meta = rumi.info(source=os.fspath(path))
    return rumi.read(os.fspath(path), meta.header, pattern="t b y x")


# --- finding 1: every standard keyword, through open_dataset and open_mfdataset ------


@pytest.fixture
def two_dates(tmp_path: Path) -> tuple[list[Path], np.ndarray]:
    data = reflectance(1, (2, 3, 20, 24))
    paths = []
    for i, day in enumerate([dt.date(2024, 5, 11), dt.date(2024, 5, 1)]):
        path = tmp_path / f"s{i}.rumi"
        write_array(path, data[i:i + 1], bands=TEXTS, time=[day], transform=TRANSFORM,
                    crs=EPSG, tile_size=8, nodata=0, scale_factor=1e-4, add_offset=-0.1,
                    units="reflectance")
        paths.append(path)
    return paths, data


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


# --- finding 2: nodata, scale, offset and units survive, and decode like rioxarray --


def test_convert_keeps_nodata_scale_offset_units_and_decodes_like_rioxarray(
        tif: Path, tmp_path: Path) -> None:
    out = tmp_path / "scene.rumi"
    code, stdout, err = convert("convert", tif, out, "--tile-size", "16")
    assert code == 0, err
    assert "nodata 0, scale_factor 0.0001, add_offset -0.1, units reflectance" in stdout
    assert sidecar(out) == {"format": "rumi-xarray-sidecar", "version": 1, "nodata": 0,
                            "scale_factor": 1e-4, "add_offset": -0.1, "units": "reflectance"}
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
    # Band names come from the GDAL descriptions (finding 3).
    assert rumi.info(source=os.fspath(out)).bands == TEXTS


def test_decoded_values_on_request(tif: Path, tmp_path: Path) -> None:
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True)
    out = tmp_path / "decoded.rumi"
    to_rumi(peer, out, time="2024-05-01", tile_size=16, encode_cf=False)
    assert stored_dtype(out) == np.float32
    facts = sidecar(out)
    assert np.isnan(facts.pop("nodata"))
    assert facts == {"format": "rumi-xarray-sidecar", "version": 1, "units": "reflectance"}
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


def packed_netcdf(path: Path) -> xr.Dataset:
    """An int16 netCDF variable packed with scale, offset and a fill value."""
    rng = np.random.default_rng(4)
    t2m = rng.normal(280, 8, (3, 12, 16))
    t2m[:, :2, :3] = np.nan
    times = np.datetime64("2024-01-01", "ns") + np.arange(3) * np.timedelta64(6, "h")
    ds = xr.Dataset({"t2m": (("time", "lat", "lon"), t2m, {"units": "K"})},
                    coords={"time": times, "lat": 60.0 - 0.25 * (np.arange(12) + 0.5),
                            "lon": 5.0 + 0.25 * (np.arange(16) + 0.5)})
    ds["t2m"].encoding = {"dtype": "int16", "scale_factor": 0.01, "add_offset": 280.0,
                          "_FillValue": -32767}
    ds.to_netcdf(path)  # this environment's default netCDF engine
    return xr.open_dataset(path)


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
    tif = write_geotiff(tmp_path / "nan.tif", data, nodata=float("nan"))
    out = tmp_path / "nan.rumi"
    code, _, err = convert("convert", tif, out, "--time", "2024-05-01")
    assert code == 0, err
    text = Path(f"{out}.aux.json").read_text()
    assert strict_json(text)["nodata"] == "nan"
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True)
    ds = rx.open_dataset(out)
    assert np.isnan(ds.band_data.rio.nodata)
    np.testing.assert_array_equal(ds.band_data.isel(time=0).values, peer.values)
    # Sidecars written before hold a bare NaN, which Python's json reads: they still open.
    Path(f"{out}.aux.json").write_text(text.replace('"nan"', "NaN"))
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
    assert not Path(f"{out}.aux.json").exists()  # the old facts would mislabel the new data
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
    tif = write_geotiff(tmp_path / "mixed.tif", reflectance(), scales=[1e-4, 2e-4, 1e-4],
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
    assert not Path(f"{path}.aux.json").exists()
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


@pytest.fixture
def converted(tif: Path, tmp_path: Path) -> Path:
    out = tmp_path / "scene.rumi"
    code, _, err = convert("convert", tif, out, "--tile-size", "16")
    assert code == 0, err
    return out


def test_clip_pad_reproject_fill_with_nodata_like_rioxarray(tif: Path, converted: Path
                                                            ) -> None:
    from shapely.geometry import box

    ours = rx.open_dataset(converted, chunks={}).band_data.isel(time=0)
    peer = rioxarray.open_rasterio(tif, mask_and_scale=True, chunks={"band": 1})
    geometry = [box(X0 + 100, Y0 - 300, X0 + 300, Y0 - 100)]
    clipped = ours.rio.clip(geometry, crs=f"EPSG:{EPSG}", drop=False)
    assert np.isnan(clipped.values).sum() > clipped.size // 2  # NaN, not 0 that looks like data
    np.testing.assert_array_equal(
        clipped.values, peer.rio.clip(geometry, crs=f"EPSG:{EPSG}", drop=False).values)
    # pad_box on dask data (the issue saw it raise).
    bounds = (X0 - 100, Y0 - 500, X0 + 600, Y0 + 100)
    padded = ours.rio.pad_box(*bounds)
    assert padded.chunks is not None and padded.shape == (3, 60, 70)
    np.testing.assert_array_equal(padded.values, peer.rio.pad_box(*bounds).values)
    assert np.isnan(padded.values[:, :10]).all()
    # rio.reproject works on one time step (see the 4-D note in the docs).
    warped = ours.rio.reproject("EPSG:4326")
    np.testing.assert_array_equal(warped.values, peer.rio.reproject("EPSG:4326").values)
    assert np.isnan(warped.rio.nodata) and not (warped.values == 65535).any()
    # odc-geo's reproject fills with NaN as well.
    import odc.geo.xr  # noqa: F401  (the .odc accessor)

    odc_warped = ours.odc.reproject("EPSG:4326")
    np.testing.assert_array_equal(odc_warped.values, peer.odc.reproject("EPSG:4326").values)
    assert np.isnan(odc_warped.values).any()
    # Raw samples (mask_and_scale=False) fill with the nodata value they declare.
    raw = rx.open_dataset(converted, mask_and_scale=False).band_data.isel(time=0)
    raw_warped = raw.rio.reproject("EPSG:4326")
    assert raw_warped.rio.nodata == 0 and not (raw_warped.values == 65535).any()
    raw_peer = rioxarray.open_rasterio(tif).rio.reproject("EPSG:4326")
    np.testing.assert_array_equal(raw_warped.values, raw_peer.values)


# --- finding 3: band names as people use them ----------------------------------------


def test_bands_select_by_short_name_like_stackstac(converted: Path) -> None:
    ds = xr.open_dataset(converted, engine="rumi")
    assert list(ds.band.values) == ["B04", "B08", "B11"]
    assert list(ds.band_text.values) == TEXTS
    assert list(ds.common_name.values[:2]) == ["red", "nir"]
    np.testing.assert_allclose(ds.center_wavelength.values, [0.665, 0.842, 1.61])
    red = ds.band_data.sel(band="B04")
    np.testing.assert_array_equal(red.values, ds.band_data.values[:, 0])
    assert str(red.band_text.values) == "B04, Red, 665nm"
    by_variable = xr.open_dataset(converted, engine="rumi", band_as_variable=True)
    assert list(by_variable.data_vars) == ["B04", "B08", "B11"]
    assert by_variable["B08"].attrs["long_name"] == "B08, NIR, 842nm"
    np.testing.assert_array_equal(by_variable["B11"].values, ds.band_data.values[:, 2])
    # Texts whose first fields repeat keep the whole text as the name.
    twins = converted.with_name("twins.rumi")
    write_array(twins, np.zeros((1, 2, 4, 4), np.uint8), bands=["B04, a", "B04, b"],
                time=["2024-01-01"])
    assert list(xr.open_dataset(twins, engine="rumi").band.values) == ["B04, a", "B04, b"]


def test_band_texts_round_trip_in_full(converted: Path, tmp_path: Path) -> None:
    ds = rx.open_dataset(converted)
    again = tmp_path / "again.rumi"
    to_rumi(ds, again)  # band_text wins over the short names
    assert rumi.info(source=os.fspath(again)).bands == TEXTS
    subset = tmp_path / "subset.rumi"
    to_rumi(ds.sel(band=["B11", "B04"]), subset)
    assert rumi.info(source=os.fspath(subset)).bands == [TEXTS[2], TEXTS[0]]
    # band_as_variable keeps each full text in long_name: it is what is stored,
    # so the band companions come back as they were.
    by_variable = tmp_path / "by_variable.rumi"
    to_rumi(rx.open_dataset(converted, band_as_variable=True), by_variable)
    assert rumi.info(source=os.fspath(by_variable)).bands == TEXTS
    back = rx.open_dataset(by_variable)
    for name in ("band", "band_text", "common_name", "center_wavelength"):
        xr.testing.assert_identical(back[name], ds[name])
    np.testing.assert_array_equal(back.band_data.values, ds.band_data.values)
    for band in ds.band.values:
        np.testing.assert_array_equal(
            rx.open_dataset(by_variable, band_as_variable=True)[str(band)].values,
            ds.band_data.sel(band=band).values)
    # rioxarray objects: GDAL descriptions, one text for several equal ones.
    same = write_geotiff(tmp_path / "same.tif", reflectance()[:2], descriptions=["NIR"] * 2)
    to_rumi(rioxarray.open_rasterio(same), tmp_path / "same.rumi", time="2024-01-01")
    assert rumi.info(source=os.fspath(tmp_path / "same.rumi")).bands == ["NIR (1)", "NIR (2)"]


# --- finding 4: to_netcdf works; layout facts are encoding, not attributes ----------


def test_to_netcdf_with_the_default_engine_and_back(converted: Path, tmp_path: Path) -> None:
    ds = rx.open_dataset(converted)
    var = ds.band_data
    for obj in (ds, *ds.variables.values()):
        assert not any(str(k).startswith("rumi_") for k in obj.attrs)
        assert not any(isinstance(v, tuple) for v in obj.attrs.values())
    assert var.encoding["rumi_tile_size"] == (16, 16) and ds.rumi.tile == (16, 16)
    assert var.encoding["rumi_frame_layout"] == "h w"
    nc = tmp_path / "scene.nc"
    ds.to_netcdf(nc)
    # CF keeps grid mappings out of "coordinates": xarray makes spatial_ref a
    # coordinate again with decode_coords="all", as for any CF netCDF.
    back = xr.open_dataset(nc, decode_coords="all")
    np.testing.assert_array_equal(back.band_data.values, var.values)
    assert back.band_data.encoding["_FillValue"] == 0
    assert back.band_data.encoding["scale_factor"] == pytest.approx(1e-4)
    assert list(back.band.values) == ["B04", "B08", "B11"]
    assert list(back.band_text.values) == TEXTS
    assert back.rio.crs.to_epsg() == EPSG and back.rio.transform() == ds.rio.transform()
    np.testing.assert_array_equal(back.time.values, ds.time.values)
    assert not any(str(k).startswith("rumi_") for k in back.band_data.attrs)
    # A selected band still plots with one label, not a list of all of them (CF wants a
    # long_name on every data variable: tests/test_netcdf_cf.py).
    assert ds.band_data.sel(band="B08").attrs["long_name"] == "band data"
    assert back.band_data.attrs["long_name"] == "band data"


def test_rio_to_raster_gets_no_rumi_tags(converted: Path, tmp_path: Path) -> None:
    da = rx.open_dataset(converted).band_data.isel(time=0)
    out = tmp_path / "out.tif"
    da.rio.to_raster(out)
    with rasterio.open(out) as f:
        tags = f.tags()
        assert not any(k.lower().startswith("rumi") for k in tags)
        assert f.nodata == 0 and f.dtypes[0] == "uint16"  # written packed again
        assert f.scales[0] == pytest.approx(1e-4) and f.offsets[0] == pytest.approx(-0.1)
    np.testing.assert_array_equal(rioxarray.open_rasterio(out, mask_and_scale=True).values,
                                  da.values)


# --- finding 6: time is always a dimension -------------------------------------------


def test_default_open_mfdataset_sorts_shuffled_single_date_files(tmp_path: Path) -> None:
    data = reflectance(5, (6, 2, 12, 10))
    days = [dt.date(2024, 3, 1) + dt.timedelta(days=5 * i) for i in range(6)]
    paths = []
    for i in np.random.default_rng(7).permutation(6):
        path = tmp_path / f"scene_{i}.rumi"
        write_array(path, data[i:i + 1], bands=["B04", "B08"], time=[days[i]],
                    transform=TRANSFORM, crs=EPSG, tile_size=8)
        paths.append(path)
    ds = xr.open_mfdataset(paths, engine="rumi")  # default arguments
    np.testing.assert_array_equal(ds.time.values, np.array(days, dtype="datetime64[ns]"))
    np.testing.assert_array_equal(ds.band_data.values, data)
    single = xr.open_dataset(paths[0], engine="rumi")
    assert single.band_data.dims == ("time", "band", "y", "x") and single.sizes["time"] == 1
    when = single.time.values[0]
    np.testing.assert_array_equal(single.band_data.sel(time=when).values,
                                  data[int(paths[0].stem.split("_")[1])])
    np.testing.assert_array_equal(single.band_data.sel(time=str(when)[:10]).values,
                                  single.band_data.values[0])
    ours = rx.open_mfdataset(paths)
    assert ours.band_data.chunks is not None  # dask-backed by default, like xarray's
    np.testing.assert_array_equal(ours.band_data.values, data)


# --- finding 7: no silent fallbacks ---------------------------------------------------


def test_misspelt_codec_raises_naming_it_and_leaves_no_file(tmp_path: Path, tif: Path
                                                            ) -> None:
    target = tmp_path / "x.rumi"
    with pytest.raises(ValueError, match=r"x\.rumi: unknown codec 'planar>zigzg>zstd'"):
        write_array(target, np.zeros((1, 1, 8, 8), np.uint16), bands=["a"],
                    time=["2024-01-01"], codec="planar>zigzg>zstd")
    with pytest.raises(ValueError, match="unknown codec 'zstdd'"):
        to_rumi(rioxarray.open_rasterio(tif), target, time="2024-01-01", codec="zstdd")
    code, _, err = convert("convert", tif, target, "--codec", "zsdt")
    assert code == 1 and "unknown codec 'zsdt'" in err and "nothing was written" in err
    assert sorted(os.listdir(tmp_path)) == ["scene.tif"]


# --- finding 8: error messages --------------------------------------------------------


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


# --- finding 9: dropping spatial_ref ---------------------------------------------------


def test_drop_spatial_ref_leaves_no_dangling_grid_mapping(converted: Path,
                                                          tmp_path: Path) -> None:
    ds = xr.open_dataset(converted, engine="rumi", drop_variables="spatial_ref")
    assert "spatial_ref" not in ds.variables
    for var in ds.variables.values():
        assert "grid_mapping" not in var.attrs and "grid_mapping" not in var.encoding
    assert ds.rio.crs is None and ds.band_data.rio.crs is None
    nc = tmp_path / "no_crs.nc"
    ds.to_netcdf(nc)  # nothing refers to a missing variable
    assert "grid_mapping" not in xr.open_dataset(nc).band_data.attrs
    restored = ds.rio.write_crs(EPSG)
    assert restored.rio.crs.to_epsg() == EPSG
    assert restored.rio.transform() == xr.open_dataset(converted, engine="rumi").rio.transform()


# --- finding 10: progress ---------------------------------------------------------------

PROGRESS_SCRIPT = r"""
import sys
import numpy as np, dask.array as da, xarray as xr
import rumi_xarray as rx
from rumi_xarray import progress
from rumi_xarray.backend.accessor import backend_arrays
from rumi_xarray.backend.execute import run_call
from rumi_xarray.model import planning
from rumi_xarray.model.planning import Call
from rumi_xarray.native import reads
from rumi_xarray.write.to_rumi import to_rumi

folder = sys.argv[1]
times = np.datetime64("2024-01-01", "ns") + np.arange(2) * np.timedelta64(1, "D")
data = np.random.default_rng(0).integers(0, 1000, (2, 3, 64, 48)).astype(np.uint16)
cube = xr.DataArray(data, dims=("time", "band", "y", "x"), coords={"time": times})
print("STEP numpy", file=sys.stderr, flush=True)
to_rumi(cube, f"{folder}/a.rumi", tile_size=16)            # 2 * 3 * 4 * 3 = 72 frames
print("STEP dask", file=sys.stderr, flush=True)
to_rumi(cube.chunk({"y": 32}), f"{folder}/b.rumi", tile_size=16)
print("STEP catalog", file=sys.stderr, flush=True)
for i in range(5):
    to_rumi(cube.isel(time=[i % 2]), f"{folder}/c{i}.rumi", tile_size=16,
            time=[f"2024-02-0{i + 1}"])
rx.catalog([f"{folder}/c{i}.rumi" for i in range(5)])
print("STEP read", file=sys.stderr, flush=True)
planning.READ_BAR_BYTES = 1000           # small enough to split this small read
planning.READ_STEP_BYTES = 1
array = backend_arrays(xr.open_dataset(f"{folder}/a.rumi", engine="rumi"))[0]
call = Call(scenes=(0,), rows=(0,), cols=(0,), times=(0, 1), bands=(0, 1, 2), height=64,
            width=48)
got = run_call(array.cube, call, progress=progress.enabled())
assert np.array_equal(got, reads.run(array.cube, call)), "sliced read differs"
assert np.array_equal(got[0], data)
print("DONE", len(planning.split_call(array.cube, call, progress=progress.enabled())),
      file=sys.stderr, flush=True)
"""


def run_script(tmp_path: Path, env: dict[str, str], *, terminal: bool = False
               ) -> tuple[int, str]:
    """Run PROGRESS_SCRIPT; stderr is a pipe, or a pseudo-terminal when ``terminal``."""
    import sys

    from tests.checks import run_with_stderr

    script = tmp_path / "progress_script.py"
    script.write_text(PROGRESS_SCRIPT)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TQDM_", "RUMI_XARRAY_"))}
    full.update(env)
    return run_with_stderr([sys.executable, os.fspath(script), os.fspath(tmp_path)], full,
                           terminal=terminal)


def counts(text: str, total: int) -> set[int]:
    """Return the positions ``n`` of every ``n/total`` a tqdm bar printed."""
    return {int(m) for m in re.findall(rf"\b(\d+)/{total}\b", text)}


def test_progress_bars_advance_unit_by_unit_when_on(tmp_path: Path) -> None:
    # Every update drawn (tqdm's own environment settings): what is drawn is what
    # rumi_xarray reported, so each frame/file/slice must show up.
    code, err = run_script(tmp_path, {"RUMI_XARRAY_PROGRESS": "1", "TQDM_MININTERVAL": "0",
                                      "TQDM_MINITERS": "1"})
    assert code == 0, err
    numpy, rest = err.split("STEP dask")
    dask_part, rest = rest.split("STEP catalog")
    catalog_part, read_part = rest.split("STEP read")
    assert "compressing" in numpy and counts(numpy, 72) == set(range(73))
    assert "compressing" in dask_part and counts(dask_part, 72) == set(range(73))
    assert "cataloguing" in catalog_part and counts(catalog_part, 5) == set(range(6))
    slices = int(read_part.split("DONE")[1].split()[0])
    assert slices == 2  # frames walk time: one slice per time step, no frame read twice
    drawn = re.findall(r"reading:\s+(\d+)%.*?([\d.]+k?)/36\.0k", read_part)
    assert [p for p, _ in drawn] == ["0", "50", "100"], read_part  # 36 KiB in 2 slices


def test_progress_default_off_in_pipes_and_on_in_terminals(tmp_path: Path) -> None:
    code, err = run_script(tmp_path, {})
    assert code == 0, err
    assert "compressing" not in err and "cataloguing" not in err and "it/s" not in err
    code, screen = run_script(tmp_path, {}, terminal=True)
    assert code == 0, screen
    assert "compressing" in screen and "cataloguing" in screen
    code, screen = run_script(tmp_path, {"RUMI_XARRAY_PROGRESS": "0"}, terminal=True)
    assert code == 0, screen
    assert "compressing" not in screen


def test_cli_progress_switch(tif: Path, tmp_path: Path) -> None:
    code, _, err = convert("convert", tif, tmp_path / "a.rumi", "--progress")
    assert code == 0 and "compressing" in err
    code, _, err = convert("convert", tif, tmp_path / "b.rumi", "--no-progress")
    assert code == 0 and "compressing" not in err


def test_explain_prints_human_units(converted: Path) -> None:
    text = str(rx.open_dataset(converted).band_data.rumi.explain())
    assert re.search(r"\d+(\.\d)? (B|KiB|MiB) compressed", text), text
    assert re.search(r"-> \d+(\.\d)? (B|KiB|MiB) decoded", text), text


# --- round trips: GeoTIFF -> Rumi -> xarray -> netCDF / Zarr / GeoTIFF -> Rumi ------------


def assert_same_rumi(got: Path, expected: Path) -> None:
    """Values (decoded and raw), nodata, scaling, bands, time, CRS and transform agree."""
    a, b = rx.open_dataset(got), rx.open_dataset(expected)
    np.testing.assert_array_equal(a.band_data.values, b.band_data.values)
    assert a.band_data.dtype == b.band_data.dtype
    raw_a = rx.open_dataset(got, mask_and_scale=False).band_data
    raw_b = rx.open_dataset(expected, mask_and_scale=False).band_data
    np.testing.assert_array_equal(raw_a.values, raw_b.values)
    facts_a, facts_b = sidecar(got), sidecar(expected)
    assert facts_a["nodata"] == facts_b["nodata"] and facts_a["units"] == facts_b["units"]
    for key in ("scale_factor", "add_offset"):
        assert np.float32(facts_a[key]) == np.float32(facts_b[key])
    meta_a, meta_b = rumi.info(source=os.fspath(got)), rumi.info(source=os.fspath(expected))
    assert meta_a.bands == meta_b.bands
    assert meta_a.time == meta_b.time and meta_a.time_kind == meta_b.time_kind
    assert meta_a.crs == meta_b.crs == EPSG
    assert meta_a.transform == meta_b.transform
    assert meta_a.pixel_is_point == meta_b.pixel_is_point
    assert a.rio.crs == b.rio.crs and a.rio.transform() == b.rio.transform()


@pytest.fixture(params=["instants", "intervals"])
def original(request: pytest.FixtureRequest, tif: Path, tmp_path: Path) -> Path:
    """The GeoTIFF converted to Rumi: one instant, or three monthly intervals."""
    out = tmp_path / "original.rumi"
    if request.param == "instants":
        code, _, err = convert("convert", tif, out, "--tile-size", "16")
        assert code == 0, err
        return out
    peer = rioxarray.open_rasterio(tif)  # raw samples, CF attributes
    months = [(f"2024-0{m}-01", f"2024-0{m + 1}-01") for m in (1, 2, 3)]
    series = xr.concat([peer + i for i in range(3)], dim="time", combine_attrs="override")
    to_rumi(series.where(peer != 0, 0).astype(np.uint16).assign_attrs(peer.attrs), out,
            time=months, tile_size=16)
    assert rumi.info(source=os.fspath(out)).time_kind == "interval"
    return out


def test_round_trip_through_netcdf(original: Path, tmp_path: Path) -> None:
    nc = tmp_path / "scene.nc"
    rx.open_dataset(original).to_netcdf(nc)  # the default engine of this environment
    again = tmp_path / "again.rumi"
    to_rumi(xr.open_dataset(nc, decode_coords="all"), again, tile_size=16)
    assert_same_rumi(again, original)


def test_round_trip_through_zarr(original: Path, tmp_path: Path) -> None:
    pytest.importorskip("zarr")
    store = tmp_path / "scene.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zarr v3 spec notes about strings
        rx.open_dataset(original, chunks={}).to_zarr(store)
    again = tmp_path / "again.rumi"
    code, _, err = convert("convert", store, again, "--tile-size", "16")
    assert code == 0, err
    assert_same_rumi(again, original)


def test_round_trip_through_geotiff(original: Path, tmp_path: Path) -> None:
    ds = rx.open_dataset(original)
    tif = tmp_path / "exported.tif"
    step = ds.band_data.isel(time=-1)
    # rioxarray writes band descriptions from a long_name tuple: give it the texts.
    step.assign_attrs(long_name=tuple(ds.band_text.values)).rio.to_raster(tif)
    when = str(ds.time.values[-1])[:19]
    if "time_bnds" in ds:
        when = "/".join(str(v)[:19] for v in ds.time_bnds.values[-1])
    again = tmp_path / "again.rumi"
    code, _, err = convert("convert", tif, again, "--time", when, "--tile-size", "16")
    assert code == 0, err
    last = tmp_path / "last.rumi"
    to_rumi(ds.isel(time=[-1]), last, tile_size=16)
    assert_same_rumi(again, last)


# --- finding 11: the documented 4-D limits of rioxarray and what works instead --------


def test_four_dimensional_limits_and_alternatives(two_dates, tmp_path: Path) -> None:
    import odc.geo.xr  # noqa: F401  (the .odc accessor)
    from rioxarray.exceptions import TooManyDimensions

    paths, _ = two_dates
    cube = rx.open_mfdataset(paths).compute()
    path = tmp_path / "cube.rumi"
    to_rumi(cube, path, tile_size=8)
    ds = xr.open_dataset(path, engine="rumi")
    with pytest.raises(TooManyDimensions):
        ds.band_data.rio.reproject("EPSG:4326")
    with pytest.raises(TooManyDimensions):
        ds.band_data.rio.to_raster(tmp_path / "x.tif")
    one = ds.band_data.isel(time=0).rio.reproject("EPSG:4326")
    assert one.dims == ("band", "y", "x") and np.isnan(one.rio.nodata)
    by_band = xr.open_dataset(path, engine="rumi", band_as_variable=True)
    warped = by_band.rio.reproject("EPSG:4326")
    assert warped["B04"].dims == ("time", "y", "x")
    np.testing.assert_array_equal(warped["B04"].isel(time=0).values, one.sel(band="B04").values)
    by_band["B04"].rio.to_raster(tmp_path / "B04.tif")
    assert rioxarray.open_rasterio(tmp_path / "B04.tif").sizes["band"] == 2  # time steps
    lazy = xr.open_dataset(path, engine="rumi", chunks={}).band_data.odc.reproject("EPSG:4326")
    assert lazy.chunks is not None and lazy.dims[:2] == ("time", "band")
    assert np.isnan(lazy.values).any()
    # Reprojected, decoded data pack back with the same nodata.
    to_rumi(one.expand_dims(time=ds.time.values[:1]), tmp_path / "warped.rumi")
    assert sidecar(tmp_path / "warped.rumi")["nodata"] == 0
    np.testing.assert_array_equal(rx.open_dataset(tmp_path / "warped.rumi").band_data.values[0],
                                  one.values)
