"""Cubes from many scenes: catalogs, open_mfdataset, remote storage, fsspec transport."""

from __future__ import annotations

import datetime as dt
import io
import math
import re
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pytest
import rioxarray  # noqa: F401  (the .rio accessor)
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.catalogs.table import COLUMNS
from rumi_xarray.model.cube import Scene
from rumi_xarray.native import reads
from rumi_xarray.sources import transport
from rumi_xarray.write.to_rumi import write_array
from tests.truth import read

N = 52
BANDS = ["B02, Blue", "B03, Green", "B04, Red"]
TRANSFORM = (10.0, 0.0, 600000.0, 0.0, -10.0, 5000000.0)


def date(i: int) -> dt.date:
    return dt.date(2023, 1, 3) + dt.timedelta(days=7 * int(i))


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """N single-date files written in shuffled order; data[i] is date i."""
    folder = tmp_path_factory.mktemp("scenes")
    rng = np.random.default_rng(11)
    data = rng.integers(0, 10000, (N, 3, 150, 140)).astype(np.uint16)
    paths = []
    for i in rng.permutation(N):
        path = folder / f"S2_{i:03d}.rumi"
        write_array(path, data[i:i + 1], bands=BANDS, time=[date(i)], transform=TRANSFORM,
                    crs=32633, tile_size=64)
        paths.append(path)
    return folder, sorted(paths), data


def test_catalog_round_trips_through_parquet(scenes, tmp_path):
    folder, paths, _ = scenes
    table = rx.catalog(str(folder / "*.rumi"))
    assert len(table) == N and list(table.columns) == list(COLUMNS)
    row = table.iloc[0]
    assert row["header"] == rumi.info(source=row["path"]).header
    assert list(row["bands"]) == BANDS and row["crs"] == 32633
    table.to_parquet(tmp_path / "cat.parquet")
    back = pd.read_parquet(tmp_path / "cat.parquet")
    for column in ("path", "header", "crs", "height", "dtype", "frame_layout"):
        assert list(back[column]) == list(table[column])
    assert [list(v) for v in back["time_seconds"]] == [list(v) for v in table["time_seconds"]]
    assert [list(v) for v in back["transform"]] == [list(v) for v in table["transform"]]


def test_open_catalog_values_and_time_order(scenes, tmp_path):
    folder, paths, data = scenes
    rx.catalog(paths[::-1]).to_parquet(tmp_path / "cat.parquet")
    cube = rx.open_catalog(tmp_path / "cat.parquet", chunks={})
    assert cube.band_data.dims == ("time", "band", "y", "x")
    np.testing.assert_array_equal(cube.time.values,
                                  np.array([np.datetime64(date(i), "ns") for i in range(N)]))
    assert list(cube.band.values) == ["B02", "B03", "B04"]
    assert list(cube.band_text.values) == BANDS
    np.testing.assert_array_equal(cube.band_data.values, data)
    assert cube.rio.crs.to_epsg() == 32633
    lazy = rx.open_catalog(tmp_path / "cat.parquet")
    np.testing.assert_array_equal(lazy.band_data.isel(time=[5, 1], x=slice(3, 90, 4)).values,
                                  data[[5, 1]][..., 3:90:4])


def test_pixel_time_series_over_52_files_is_few_native_calls(scenes):
    folder, paths, data = scenes
    cube = rx.open_catalog(rx.catalog(paths), chunks={})
    x, y = cube.x.values[77], cube.y.values[101]
    rx.stats(reset=True)
    series = cube.band_data.sel(x=x, y=y, method="nearest").compute()
    s = rx.stats(reset=True)
    np.testing.assert_array_equal(series.values, data[:, :, 101, 77])
    for i in (0, N // 2, N - 1):
        one = read(paths[i], window=(101, 77, 1, 1))
        np.testing.assert_array_equal(series.values[i], one[0, :, 0, 0])
    # the whole cube is one read group: one read_many over every scene
    assert s["calls"] == 1 and s["items"] == N

    # read groups take scenes while a full row of 64-pixel cells of each still fits (one
    # byte range per file), so time reductions complete inside a chunk; then rows
    budget = 10 * 3 * 150 * 140 * 2
    scenes_per_group = budget // (3 * 64 * 140 * 2)  # 23 scenes x one row of cells
    with rx.set_options(group_bytes=budget):
        small = rx.open_catalog(rx.catalog(paths), chunks={})
    whole, rest = divmod(N, scenes_per_group)
    assert small.band_data.chunks[0] == (scenes_per_group,) * whole + (rest,)
    assert small.band_data.chunks[2] == (64, 64, 22)
    with rx.set_options(group_bytes=3 * 64 * 140 * 2):  # less than a scene: rows of cells
        rows = rx.open_catalog(rx.catalog(paths), chunks={})
    assert rows.band_data.chunks[0] == (1,) * N and rows.band_data.chunks[2] == (64, 64, 22)
    rx.stats(reset=True)
    np.testing.assert_array_equal(small.band_data.isel(x=77, y=101).values, data[:, :, 101, 77])
    assert rx.stats()["calls"] == math.ceil(N / scenes_per_group)


def test_lazy_time_series_is_one_call(scenes):
    _, paths, data = scenes
    cube = rx.open_mfdataset(paths)
    rx.stats(reset=True)
    np.testing.assert_array_equal(cube.band_data.isel(x=5, y=6).values, data[:, :, 6, 5])
    assert rx.stats()["calls"] == 1


def test_open_catalog_makes_no_request(http_server, scenes, remote_dir):
    folder, paths, data = scenes
    names = []
    for p in paths[:12]:
        (remote_dir / p.name).write_bytes(p.read_bytes())
        names.append(p.name)
    table = rx.catalog([http_server.url(n) for n in names])
    http_server.reset()
    cube = rx.open_catalog(table, chunks={})
    assert http_server.requests() == []
    np.testing.assert_array_equal(cube.band_data.isel(y=3, x=4).values, data[:12, :, 3, 4])
    assert 0 < len(http_server.requests()) <= 12


def test_duplicates_policy(scenes, tmp_path):
    _, paths, data = scenes
    twin = tmp_path / "twin.rumi"
    write_array(twin, data[4:5] + 1, bands=BANDS, time=[date(4)], transform=TRANSFORM,
                crs=32633, tile_size=64)
    table = rx.catalog([*paths[:8], twin])
    kept = rx.open_catalog(table)
    assert kept.sizes["time"] == 9
    # same time: table order, so the corpus file (listed first) precedes twin.rumi
    np.testing.assert_array_equal(kept.band_data.isel(time=4).values, data[4])
    np.testing.assert_array_equal(kept.band_data.isel(time=5).values, data[4] + 1)
    first = rx.open_catalog(table, duplicates="first")
    last = rx.open_catalog(table, duplicates="last")
    assert first.sizes["time"] == last.sizes["time"] == 8
    np.testing.assert_array_equal(last.band_data.isel(time=4).values, data[4] + 1)
    with pytest.raises(ValueError, match="share the time"):
        rx.open_catalog(table, duplicates="error")


def test_duplicates_keep_the_same_file_in_memory_and_on_disk(scenes, tmp_path):
    """One tie rule (table order): rows in memory and their Parquet file keep one file."""
    _, paths, data = scenes
    twin = tmp_path / "a_twin.rumi"  # listed last, then first: table order decides
    write_array(twin, data[4:5] + 1, bands=BANDS, time=[date(4)], transform=TRANSFORM,
                crs=32633, tile_size=64)
    for listed, first_wins in (([*paths[:8], twin], data[4]), ([twin, *paths[:8]], data[4] + 1)):
        table = rx.catalog(listed)
        on_disk = tmp_path / f"catalog_{len(list(tmp_path.glob('*.parquet')))}.parquet"
        table.to_parquet(on_disk)
        for duplicates, want in (("first", first_wins),
                                 ("last", data[4] + data[4] + 1 - first_wins)):
            for given in (table, on_disk):
                cube = rx.open_catalog(given, duplicates=duplicates)
                assert cube.sizes["time"] == 8
                np.testing.assert_array_equal(cube.band_data.isel(time=4).values, want,
                                              err_msg=f"{duplicates} {type(given).__name__}")


@pytest.mark.parametrize("change", ["size", "crs", "bands", "dtype", "tile"])
def test_mismatched_scene_names_the_row(scenes, tmp_path, change):
    _, paths, data = scenes
    odd = tmp_path / f"odd_{change}.rumi"
    block = data[0:1]
    kwargs = {"bands": BANDS, "time": [dt.date(2030, 1, 1)], "transform": TRANSFORM,
              "crs": 32633, "tile_size": 64}
    if change == "size":
        block = block[..., :100]
    elif change == "crs":
        kwargs["crs"] = 32634
    elif change == "bands":
        kwargs["bands"] = ["a", "b", "c"]
    elif change == "dtype":
        block = block.astype(np.int32)
    else:
        kwargs["tile_size"] = 128
    write_array(odd, block, **kwargs)
    table = rx.catalog([*paths[:3], odd])
    with pytest.raises(ValueError, match=rf"catalog row 3 \({re.escape(str(odd))}\)"):
        rx.open_catalog(table)


def test_missing_file_fails_at_compute_with_path_and_row(scenes, tmp_path):
    _, paths, data = scenes
    doomed = tmp_path / "doomed.rumi"
    doomed.write_bytes(paths[0].read_bytes())
    table = rx.catalog([*paths[1:6], doomed])
    doomed.unlink()
    cube = rx.open_catalog(table, chunks={})  # opening needs no file
    with pytest.raises(OSError, match=r"doomed\.rumi \(catalog row 5\)"):
        cube.band_data.mean().compute()


def test_xarray_open_mfdataset_nested(scenes):
    _, paths, data = scenes
    ds = xr.open_mfdataset(paths[:10], engine="rumi", combine="nested", concat_dim="time")
    order = np.argsort(ds.time.values)
    np.testing.assert_array_equal(ds.band_data.values[order], data[:10])
    assert ds.band_data.data.chunks[2] == (150,)  # one read group per file


def test_xarray_open_mfdataset_defaults_sort_by_time(scenes):
    _, paths, data = scenes
    shuffled = [paths[i] for i in np.random.default_rng(3).permutation(12)]
    ds = xr.open_mfdataset(shuffled, engine="rumi")
    np.testing.assert_array_equal(ds.time.values,
                                  np.array([np.datetime64(date(i), "ns") for i in range(12)]))
    np.testing.assert_array_equal(ds.band_data.values, data[:12])
    np.testing.assert_array_equal(ds.band_data.sel(time=ds.time.values[3]).values, data[3])


def test_s3_glob_catalog_and_reads(s3_server, scenes):
    _, paths, data = scenes
    for p in paths[:6]:
        s3_server.upload("cube", p)
    cube = rx.open_mfdataset("s3://cube/S2_*.rumi", chunks={})
    assert cube.sizes["time"] == 6
    np.testing.assert_array_equal(cube.band_data.values, data[:6])
    assert all(s.startswith("s3://cube/") for s in cube.rumi.sources)


def test_memory_filesystem_fetches_only_planned_ranges(scenes):
    _, paths, data = scenes
    fs = fsspec.filesystem("memory")
    blob = paths[7].read_bytes()
    fs.pipe("/rumi-tests/scene7.rumi", blob)
    url = "memory://rumi-tests/scene7.rumi"
    ds = xr.open_dataset(url, engine="rumi")
    transport.STATS.fetched = 0
    chip = ds.band_data.isel(time=0, band=1, y=slice(70, 80), x=slice(130, 140)).values
    np.testing.assert_array_equal(chip, data[7, 1, 70:80, 130:140])
    header = ds.rumi.header
    planned = reads.plan_ranges(Scene(url, header), None, [1], 70, 130, 10, 10)
    assert transport.STATS.fetched == sum(n for _, n in planned) < len(blob) / 10
    grouped = rx.open_dataset(url, chunks={})
    np.testing.assert_array_equal(grouped.band_data.values, data[7:8])


def test_file_object_source(scenes):
    _, paths, data = scenes
    blob = paths[9].read_bytes()

    class Counting(io.BytesIO):
        served = 0

        def read(self, n=-1):
            out = super().read(n)
            Counting.served += len(out)
            return out

    handle = Counting(blob)
    ds = xr.open_dataset(handle, engine="rumi")
    Counting.served = 0
    np.testing.assert_array_equal(ds.band_data.isel(time=0, band=0, y=0, x=0).values,
                                  data[9, 0, 0, 0])
    assert 0 < Counting.served < len(blob) / 10


def test_simplecache_chain(scenes, tmp_path):
    _, paths, data = scenes
    url = f"simplecache::file://{paths[2]}"
    ds = xr.open_dataset(url, engine="rumi",
                         storage_options={"simplecache": {"cache_storage": str(tmp_path)}})
    np.testing.assert_array_equal(ds.band_data.values, data[2:3])


def test_extra_columns_become_time_coordinates(scenes):
    _, paths, data = scenes
    table = rx.catalog(paths[:5][::-1])
    table["cloud_cover"] = [float(p.stem[-3:]) / 100 for p in paths[:5][::-1]]
    table["tile"] = "33UUP"
    table["geometry"] = [[1, 2]] * 5  # containers are not coordinates
    cube = rx.open_catalog(table)
    np.testing.assert_allclose(cube.cloud_cover.values, np.arange(5) / 100)
    assert cube.cloud_cover.dims == ("time",) and list(cube.tile.values) == ["33UUP"] * 5
    assert "geometry" not in cube.coords
    clear = cube.band_data.where(cube.cloud_cover < 0.03, drop=True)
    np.testing.assert_array_equal(clear.values, data[:3])


def test_fsspec_sources_read_their_sidecar(tmp_path):
    """nodata, scale and offset reach URLs read through fsspec, as they reach local paths."""
    rng = np.random.default_rng(5)
    values = rng.uniform(0.0, 0.8, (2, 2, 40, 50)).astype("float32")
    values[:, :, :3, :7] = np.nan
    var = xr.DataArray(values, dims=("time", "band", "y", "x"),
                       coords={"time": np.array(["2024-05-01", "2024-05-11"], "M8[ns]"),
                               "band": ["B04", "B08"]}, name="band_data")
    var.encoding = {"dtype": "int16", "scale_factor": 1e-4, "add_offset": -0.1,
                    "_FillValue": -9999}
    local = tmp_path / "packed.rumi"
    rx.to_rumi(var, local, tile_size=32)
    sidecar = local.with_name(local.name + ".aux.json")
    expected = xr.open_dataset(local, engine="rumi").band_data
    # numpy on what was written: masked where NaN, within half a packing step elsewhere
    assert np.array_equal(np.isnan(expected.values), np.isnan(values))
    np.testing.assert_allclose(expected.values, values, atol=0.5e-4 + 1e-6)

    fs = fsspec.filesystem("memory")
    fs.pipe("/rumi-sidecar/packed.rumi", local.read_bytes())
    fs.pipe("/rumi-sidecar/packed.rumi.aux.json", sidecar.read_bytes())
    urls = {"memory": "memory://rumi-sidecar/packed.rumi",
            "simplecache": f"simplecache::file://{local}"}
    options = {"memory": None,
               "simplecache": {"simplecache": {"cache_storage": str(tmp_path / "cache")}}}
    local_row = rx.catalog([local]).iloc[0]
    for name, url in urls.items():
        got = xr.open_dataset(url, engine="rumi", storage_options=options[name]).band_data
        np.testing.assert_array_equal(got.values, expected.values, err_msg=name)
        assert got.dtype == expected.dtype and got.encoding["_FillValue"] == -9999, name
        row = rx.catalog([url], storage_options=options[name]).iloc[0]
        assert row["path"] == url, name  # a row reopens the URL, not a repr of it
        for fact in ("nodata", "scale_factor", "add_offset"):
            assert row[fact] == local_row[fact], (name, fact)
        cube = rx.open_catalog(rx.catalog([url], storage_options=options[name]),
                               storage_options=options[name])
        np.testing.assert_array_equal(cube.band_data.values, expected.values, err_msg=name)


def test_a_glob_over_http_says_http_cannot_be_listed(http_server, scenes, remote_dir):
    (remote_dir / "listed").mkdir(exist_ok=True)
    (remote_dir / "listed" / "a.rumi").write_bytes(scenes[1][0].read_bytes())
    pattern = http_server.url("listed") + "/*.rumi"
    with pytest.raises(rx.RumiFileNotFoundError, match="HTTP servers cannot be listed"):
        rx.open_mfdataset(pattern)


def test_globs_keep_files_with_pattern_characters_and_signed_urls_are_not_globs(
        scenes, tmp_path, http_server, remote_dir):
    _, paths, data = scenes
    folder = tmp_path / "odd names"
    folder.mkdir()
    for name, i in (("a[1].rumi", 0), ("b.rumi", 1), ("c?.rumi", 2)):
        (folder / name).write_bytes(paths[i].read_bytes())
    table = rx.catalog(str(folder / "*.rumi"))
    assert sorted(Path(p).name for p in table["path"]) == ["a[1].rumi", "b.rumi", "c?.rumi"]
    # "?" in a URL's query string starts the query, it is not a wildcard
    (remote_dir / "signed.rumi").write_bytes(paths[3].read_bytes())
    url = http_server.url("signed.rumi") + "?X-Amz-Signature=abc&X-Amz-Expires=60"
    row = rx.catalog([url]).iloc[0]
    assert row["path"] == url
    np.testing.assert_array_equal(rx.open_catalog(rx.catalog([url])).band_data.values,
                                  data[3:4])
    # the sidecar is looked for beside the object, the query string kept at the end
    probes = {r.path for r in http_server.requests() if "aux.json" in r.path}
    assert probes == {"/signed.rumi.aux.json"}, probes


def test_a_mixed_crs_table_names_integer_epsg_codes_and_open_catalog_grids(scenes, tmp_path):
    _, paths, data = scenes
    odd = tmp_path / "odd_zone.rumi"
    write_array(odd, data[0:1], bands=BANDS, time=[dt.date(2030, 1, 1)], transform=TRANSFORM,
                crs=32634, tile_size=64)
    table = rx.catalog([*paths[:2], odd])
    table["crs"] = table["crs"].astype("float64")  # as a column with nulls stores it
    on_disk = tmp_path / "mixed.parquet"
    table.to_parquet(on_disk)
    for source in (table, str(on_disk)):
        with pytest.raises(rx.RumiCatalogError) as info:
            rx.open_catalog(source)
        text = str(info.value)
        assert "EPSG:32634" in text and "EPSG:32633" in text
        assert not re.search(r"\d\.0\b", text)
        assert "rx.open_catalog_grids" in text and "rx.open_stac" in text
    assert len(rx.open_catalog_grids(table)) == 2
