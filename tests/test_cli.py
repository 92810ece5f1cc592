"""The ``rumi-xarray`` command: info, convert, catalog, demo; exit codes and messages.

Conversions are checked against the source read by its own library (rasterio,
xarray) and the Rumi file read by librumi's plain ``rumi.read``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import rumi
import xarray as xr

from rumi_xarray.cli.main import main
from rumi_xarray.demo import synthetic
from rumi_xarray.write.to_rumi import to_rumi
from tests.scenes import EPSG, RES, X0, Y0, scene_geotiff
from tests.truth import read


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def rumi_file(tmp_path: Path) -> Path:
    scene = synthetic.scene_series(3, 40)
    path = tmp_path / "scene.rumi"
    to_rumi(scene, path, tile_size=16)
    return path


# --- usage ------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["info"], ["convert"], ["catalog"], ["demo"]])
def test_help_exits_zero(capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0
    assert out.startswith(f"usage: rumi-xarray {' '.join(command)}".rstrip())


@pytest.mark.parametrize("argv", [
    [], ["bogus"], ["info"], ["convert", "only-source.tif"],
    ["convert", "--tile-size", "0", "a.tif", "b.rumi"], ["convert", "--frame", "x", "a", "b"],
    ["demo", "--dates", "many"], ["catalog", "a.rumi"], ["catalog", "a.rumi", "b.rumi"],
])
def test_bad_usage_exits_two(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "error" in err


def test_module_and_console_script(tmp_path: Path) -> None:
    help_run = subprocess.run([sys.executable, "-m", "rumi_xarray", "info", "--help"],
                              capture_output=True, text=True, check=False)
    assert help_run.returncode == 0 and "PATH_OR_URL" in help_run.stdout
    script = Path(sys.executable).with_name("rumi-xarray")
    missing = tmp_path / "missing.rumi"
    quiet = subprocess.run([os.fspath(script), "info", os.fspath(missing)],
                           capture_output=True, text=True, check=False)
    assert quiet.returncode == 1
    assert quiet.stderr.strip() == f"rumi-xarray info: error: {missing}: no such file"
    loud = subprocess.run([os.fspath(script), "info", "--debug", os.fspath(missing)],
                          capture_output=True, text=True, check=False)
    assert loud.returncode == 1 and "Traceback" in loud.stderr


# --- info -------------------------------------------------------------------------


def test_info_describes_the_file(capsys: pytest.CaptureFixture[str], rumi_file: Path) -> None:
    code, out, _ = run(capsys, "info", rumi_file)
    assert code == 0
    assert "time: 3, band: 4, y: 40, x: 40" in out
    assert "EPSG:32633 (WGS 84 / UTM zone 33N)" in out
    assert "B02, Blue, 490nm | B03, Green, 560nm" in out
    assert "layout 'h w'" in out and "of tile 16 x 16" in out
    code, out, _ = run(capsys, "info", "--json", rumi_file)
    facts = json.loads(out)
    meta = rumi.info(source=os.fspath(rumi_file))
    assert facts["frames"] == meta.frames == 3 * 4 * 3 * 3
    assert facts["crs"] == EPSG and facts["tile"] == [16, 16]
    assert facts["transform"] == list(synthetic_corner())
    assert facts["file_bytes"] == rumi_file.stat().st_size
    assert facts["decoded_bytes"] == 3 * 4 * 40 * 40 * 2
    assert facts["ratio"] == pytest.approx(facts["decoded_bytes"] / facts["file_bytes"])
    assert 0 < facts["frame_bytes"] < facts["file_bytes"]
    assert facts["coords"]["time"]["size"] == 3


def synthetic_corner() -> tuple[float, ...]:
    x0, y0 = synthetic.ORIGIN
    return (synthetic.PIXEL_SIZE, 0.0, x0, 0.0, -synthetic.PIXEL_SIZE, y0)


def test_info_failures_name_the_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "info", tmp_path / "nope.rumi")
    assert code == 1 and f"{tmp_path / 'nope.rumi'}: no such file" in err
    text = tmp_path / "notes.rumi"
    text.write_text("not a raster")
    code, _, err = run(capsys, "info", text)
    assert code == 1 and str(text) in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# --- convert ----------------------------------------------------------------------


def test_convert_geotiff(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = np.random.default_rng(1).integers(0, 4000, (3, 70, 90), dtype=np.uint16)
    tif = tmp_path / "scene.tif"
    scene_geotiff(tif, data, nodata=None, block=32, descriptions=["B04 red", "B08 nir", None],
                  stamp="2024:05:01 10:20:30")
    out = tmp_path / "scene.rumi"
    code, stdout, err = run(capsys, "convert", tif, out, "--tile-size", "32")
    assert code == 0, err
    assert stdout.startswith(f"{out}: 3 x 70 x 90 uint16")
    np.testing.assert_array_equal(read(out)[0], data)
    meta = rumi.info(source=os.fspath(out))
    assert meta.bands == ["B04 red", "B08 nir", "3"]
    assert meta.crs == EPSG and meta.transform == (RES, 0.0, X0, 0.0, -RES, Y0)
    assert meta.time[0].isoformat() == "2024-05-01T10:20:30+00:00"
    assert meta.pixel_is_point is False


def test_convert_geotiff_without_time(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = np.arange(2 * 20 * 30, dtype=np.int16).reshape(2, 20, 30)
    tif = tmp_path / "plain.tif"
    scene_geotiff(tif, data, nodata=None, block=32, descriptions=[None, None], stamp=None)
    out = tmp_path / "plain.rumi"
    code, _, err = run(capsys, "convert", tif, out)
    assert code == 1 and "has no time coordinate" in err and "--time" in err
    assert sorted(os.listdir(tmp_path)) == ["plain.tif"]
    code, _, err = run(capsys, "convert", tif, out, "--time", "2024-01-01/2024-02-01",
                       "--frame", "cell")
    assert code == 0, err
    meta = rumi.info(source=os.fspath(out))
    assert meta.time_kind == "interval" and meta.frame_layout == "b h w"
    assert meta.bands == ["1", "2"]  # rioxarray's band numbers, read back as integers
    assert xr.open_dataset(out, engine="rumi").band.values.tolist() == [1, 2]
    np.testing.assert_array_equal(read(out)[0], data)


def netcdf_dataset() -> xr.Dataset:
    rng = np.random.default_rng(2)
    times = np.datetime64("2024-01-01", "ns") + np.arange(3) * np.timedelta64(1, "D")
    bounds = np.stack([times, times + np.timedelta64(1, "D")], axis=1)
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), rng.normal(280, 5, (3, 12, 16)).astype(np.float32)),
         "time_bnds": (("time", "nv"), bounds)},
        coords={"time": times, "lat": 60.0 - 0.25 * (np.arange(12) + 0.5),
                "lon": 5.0 + 0.25 * (np.arange(16) + 0.5)})
    ds["time"].attrs["bounds"] = "time_bnds"
    for name in ("time", "time_bnds"):
        ds[name].encoding["units"] = "hours since 2024-01-01"
    return ds


def test_convert_netcdf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("scipy")  # netCDF3 through xarray's scipy engine
    source = netcdf_dataset()
    nc = tmp_path / "era.nc"
    source.to_netcdf(nc, engine="scipy")
    out = tmp_path / "era.rumi"
    code, _, err = run(capsys, "convert", nc, out, "--crs", "EPSG:4326", "--tile-size", "8")
    assert code == 0, err
    np.testing.assert_array_equal(read(out)[:, 0], source["t2m"].values)
    meta = rumi.info(source=os.fspath(out))
    assert meta.bands == ["t2m"] and meta.crs == 4326 and meta.time_kind == "interval"
    assert meta.transform == pytest.approx((0.25, 0.0, 5.0, 0.0, -0.25, 60.0))
    assert [str(a) for a, _ in meta.time] == ["2024-01-01", "2024-01-02", "2024-01-03"]
    # Lossy, within the bound.
    lossy = tmp_path / "lossy.rumi"
    code, _, err = run(capsys, "convert", nc, lossy, "--crs", "EPSG:4326", "--error", "0.01")
    assert code == 0, err
    assert np.abs(read(lossy)[:, 0] - source["t2m"].values).max() <= 0.01
    # Without a CRS the lat/lon transform cannot be stored: a clear failure.
    bare = tmp_path / "bare.rumi"
    code, _, err = run(capsys, "convert", nc, bare)
    assert code == 1 and "no CRS" in err and "--crs" in err
    assert not bare.exists()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_convert_zarr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("zarr")
    scene = synthetic.scene_series(2, 48)
    store = tmp_path / "scene.zarr"
    scene.chunk({"time": 1, "band": 1, "y": 20, "x": 20}).to_zarr(store)
    out = tmp_path / "scene.rumi"
    code, _, err = run(capsys, "convert", store, out, "--tile-size", "16")
    assert code == 0, err
    np.testing.assert_array_equal(read(out), scene["band_data"].values)
    meta = rumi.info(source=os.fspath(out))
    assert meta.bands == list(synthetic.BANDS.values())
    assert meta.transform == synthetic_corner() and meta.crs == synthetic.EPSG


def test_convert_refuses_an_existing_destination_unless_overwrite(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = np.arange(2 * 20 * 30, dtype=np.uint16).reshape(2, 20, 30)
    tif = tmp_path / "scene.tif"
    scene_geotiff(tif, data, nodata=None, block=32, descriptions=["red", "nir"])
    target = tmp_path / "x.rumi"
    target.write_bytes(b"precious")
    code, _, err = run(capsys, "convert", tif, target)
    assert code == 1 and "exists already" in err and "--overwrite" in err
    assert target.read_bytes() == b"precious"
    code, _, err = run(capsys, "convert", tif, target, "--overwrite")
    assert code == 0, err
    np.testing.assert_array_equal(read(target)[0], data)


def test_convert_unknown_codec_or_dtype(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    data = np.ones((1, 8, 8), dtype=np.uint16)
    tif = tmp_path / "scene.tif"
    scene_geotiff(tif, data, nodata=None, block=32, descriptions=[None])
    code, _, err = run(capsys, "convert", tif, tmp_path / "x.rumi", "--codec", "zstd>planar")
    assert code == 1 and "unknown codec 'zstd>planar'" in err
    code, _, err = run(capsys, "convert", tif, tmp_path / "x.rumi", "--dtype", "float31")
    assert code == 2 and "not a numpy dtype" in err
    assert sorted(os.listdir(tmp_path)) == ["scene.tif"]


def test_convert_refuses_a_destination_not_named_rumi_unless_forced(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = np.arange(20 * 30, dtype=np.uint16).reshape(1, 20, 30)
    tif = tmp_path / "scene.tif"
    scene_geotiff(tif, data, nodata=None, block=32, descriptions=["red"])
    target = tmp_path / "out.tif"
    code, _, err = run(capsys, "convert", tif, target)
    assert code == 1, err
    assert f"{target}: convert writes a Rumi file" in err and ".tif, not .rumi" in err
    assert "--any-suffix" in err
    assert not target.exists()
    code, _, err = run(capsys, "convert", tif, target, "--any-suffix")
    assert code == 0, err
    assert target.read_bytes()[:4] == b"RUMI"
    np.testing.assert_array_equal(read(target)[0], data)
    code, _, err = run(capsys, "convert", tif, tmp_path / "UPPER.RUMI")
    assert code == 0, err


def test_convert_failures(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.tif"
    code, _, err = run(capsys, "convert", missing, tmp_path / "x.rumi")
    assert code == 1 and f"{missing}: no such file" in err
    code, _, err = run(capsys, "convert", tmp_path / "a.rumi", tmp_path / "a.rumi")
    assert code == 1 and "the destination is the source" in err
    assert os.listdir(tmp_path) == []


# --- catalog ----------------------------------------------------------------------


def test_catalog_writes_parquet(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import pandas as pd
    scene = synthetic.scene_series(2, 24)
    paths = []
    for i in range(2):
        path = tmp_path / f"s{i}.rumi"
        to_rumi(scene["band_data"].isel(time=i), path, tile_size=8)
        paths.append(path)
    out = tmp_path / "catalog.parquet"
    code, stdout, err = run(capsys, "catalog", *paths, out)
    assert code == 0, err
    assert "2 file(s)" in stdout
    table = pd.read_parquet(out)
    assert len(table) == 2
    assert sorted(os.path.basename(p) for p in table["path"]) == ["s0.rumi", "s1.rumi"]
    broken = tmp_path / "broken.parquet"
    code, _, err = run(capsys, "catalog", paths[0], tmp_path / "gone.rumi", broken)
    assert code == 1 and "gone.rumi" in err
    assert not broken.exists()


# --- demo -------------------------------------------------------------------------


def test_demo_writes_and_checks_a_series(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    out = tmp_path / "demo"
    code, stdout, err = run(capsys, "demo", "--out", out, "--dates", "6", "--size", "96",
                            "--tile-size", "32")
    assert code == 0, err
    assert "samples and pixel series identical" in stdout
    assert "EPSG:32633" in stdout and "native reads:" in stdout
    scenes = sorted(f for f in os.listdir(out / "scenes") if f.endswith(".rumi"))
    assert len(scenes) == 6 and scenes[0] == "S2_33UUP_20240131.rumi"
    # Each scene's packing (counts of 1e-4 reflectance) is kept in its sidecar, so
    # opening a file gives reflectance, as the counts times the float32 scale.
    side = json.loads((out / "scenes" / f"{scenes[0]}.aux.json").read_text())
    assert side["scale_factor"] == 1e-4 and side["units"] == "1", side
    expected = synthetic.scene_series(6, 96)
    opened = xr.open_dataset(out / "scenes" / scenes[2], engine="rumi").band_data
    assert opened.dtype == np.float32 and opened.attrs["units"] == "1"
    np.testing.assert_array_equal(
        opened.values[0], expected["band_data"].values[2].astype(np.float32) * np.float32(1e-4))
    np.testing.assert_array_equal(read(out / "S2_33UUP_2024.rumi"),
                                  expected["band_data"].values)
    np.testing.assert_array_equal(read(out / "scenes" / scenes[2])[0],
                                  expected["band_data"].values[2])
    cover = rumi.info(source=os.fspath(out / "land_cover_2024.rumi"))
    assert cover.time_kind == "interval" and cover.dtype.name == "uint8"
    np.testing.assert_array_equal(read(out / "land_cover_2024.rumi")[0, 0],
                                  expected["land_cover"].values)


def test_synthetic_series_is_deterministic_and_seasonal() -> None:
    a = synthetic.scene_series(8, 64, seed=4)
    b = synthetic.scene_series(8, 64, seed=4)
    c = synthetic.scene_series(8, 64, seed=5)
    xr.testing.assert_identical(a, b)
    assert not np.array_equal(a["band_data"].values, c["band_data"].values)
    assert a["cloud_cover"].values.nonzero()[0].tolist() == list(synthetic.cloudy_steps(8))
    red = a["band_data"].sel(band=synthetic.BANDS["red"]).astype(float)
    nir = a["band_data"].sel(band=synthetic.BANDS["nir"]).astype(float)
    ndvi = ((nir - red) / (nir + red)).where(a["land_cover"] == 2).mean(("y", "x"))
    summer, winter = ndvi.sel(time="2024-07").mean(), ndvi.sel(time="2024-01").mean()
    assert summer > winter + 0.3  # crops green up in summer


def test_info_over_http(capsys: pytest.CaptureFixture[str], http_server, remote_dir: Path
                        ) -> None:
    local = remote_dir / "a.rumi"
    code, out, err = run(capsys, "info", "--json", http_server.url("a.rumi"))
    assert code == 0, err
    facts = json.loads(out)
    assert facts["file_bytes"] is None  # unknown without a request of its own
    assert facts["frames"] == rumi.info(source=os.fspath(local)).frames
    assert facts["ratio"] == pytest.approx(facts["decoded_bytes"] / facts["frame_bytes"])
    code, out, _ = run(capsys, "info", http_server.url("a.rumi"))
    assert "decoded / compressed frames" in out


@pytest.mark.parametrize("command, wanted", [("catalog", ".parquet"),
                                             ("stac", ".json or .parquet")])
@pytest.mark.parametrize("debug", [[], ["--debug"]])
def test_an_output_with_the_wrong_suffix_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], rumi_file: Path, tmp_path: Path, command: str,
        wanted: str, debug: list[str]) -> None:
    # The last argument is the output: a forgotten OUT must not overwrite the last source.
    code, out, err = run(capsys, command, *debug, rumi_file, rumi_file)
    assert code == 2 and out == ""
    assert err == (f"rumi-xarray {command}: error: the last argument is the output and must "
                   f"end in {wanted}, got {str(rumi_file)!r}\n")
    assert "Traceback" not in err and rumi_file.stat().st_size > 0
