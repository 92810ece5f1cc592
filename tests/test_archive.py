"""Archive-scale catalogs: Parquet tables on disk opened as indexes (issue 23).

Tables of 10^5 rows are built here from four real files written from numpy
arrays, replicated with shifted times (scene ``i`` is file ``i % 4`` at hour
``7 i``), so ``rumi.read`` of the file is the ground truth of every scene.
"""

from __future__ import annotations

import datetime as dt
import pickle
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rumi_xarray as rx
from rumi_xarray.catalogs import index as tables
from rumi_xarray.write.to_rumi import write_array
from tests import fsspy
from tests.truth import read

BANDS = ["B02, Blue", "B03, Green", "B04, Red"]
TRANSFORM = (10.0, 0.0, 600000.0, 0.0, -10.0, 5000000.0)
FILES = 4
STEP = 7 * 3600
GROUP = 5000  # rows per Parquet row group
BIG = 100_000


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("archive")
    rng = np.random.default_rng(23)
    data = rng.integers(0, 10000, (FILES, 1, 3, 100, 90)).astype(np.uint16)
    paths = []
    for i in range(FILES):
        path = folder / f"S2_{i}.rumi"
        write_array(path, data[i], bands=BANDS, time=[dt.date(2020, 1, 1)],
                    transform=TRANSFORM, crs=32633, tile_size=32)
        paths.append(path)
    base = rx.catalog(paths)
    return folder, paths, data, base


def rows(base: pd.DataFrame, n: int, start: int = 0) -> pd.DataFrame:
    """Scene i = file i % 4 at hour 7 i (rows in time order)."""
    i = np.arange(start, start + n)
    table = base.iloc[i % FILES].reset_index(drop=True)
    t0 = int(base["time_seconds"][0][0])
    table["time_seconds"] = [[t0 + STEP * int(k)] for k in i]
    table["time"] = pd.to_datetime(t0 + STEP * i, unit="s")
    table["cloud_cover"] = (i % 100) / 100.0
    table["row_digest"] = None  # rows made up on purpose: no digest to check
    return table


def write(table: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(path, row_group_size=GROUP, index=False)
    return path


@pytest.fixture(scope="module")
def big(files, tmp_path_factory):
    _, _, _, base = files
    table = rows(base, BIG)
    return write(table, tmp_path_factory.mktemp("big") / "catalog.parquet"), table


def truth(files, scene: int, window: tuple[int, int, int, int]) -> np.ndarray:
    _, paths, _, base = files
    path = paths[scene % FILES]
    return read(path, base["header"][scene % FILES], window=window)[0]


def test_table_of_1e5_rows_reads_what_rumi_reads(files, big):
    path, _ = big
    cube = rx.open_catalog(path, chunks={})
    assert cube.band_data.shape == (BIG, 3, 100, 90)
    t0 = np.datetime64("2020-01-01", "ns")
    assert cube.time.values[0] == t0
    np.testing.assert_array_equal(np.diff(cube.time.values).astype("timedelta64[s]"),
                                  np.timedelta64(STEP, "s"))
    np.testing.assert_allclose(cube.cloud_cover.values[:200], (np.arange(200) % 100) / 100)
    rng = np.random.default_rng(5)
    for _ in range(6):
        scene = int(rng.integers(0, BIG))
        r, c = int(rng.integers(0, 90)), int(rng.integers(0, 80))
        h, w = int(rng.integers(1, 100 - r + 1)), int(rng.integers(1, 90 - c + 1))
        got = cube.band_data.isel(time=scene, y=slice(r, r + h), x=slice(c, c + w)).values
        np.testing.assert_array_equal(got, truth(files, scene, (r, c, h, w)))
    # a block of consecutive dates, across a row-group boundary, through dask
    got = cube.band_data.isel(time=slice(GROUP - 3, GROUP + 5), x=slice(10, 50)).values
    for k, scene in enumerate(range(GROUP - 3, GROUP + 5)):
        np.testing.assert_array_equal(got[k], truth(files, scene, (0, 10, 100, 40)))


def test_table_on_disk_equals_the_same_rows_in_memory(files, big):
    path, table = big
    when = slice("2021-03-01", "2021-06-30")
    disk = rx.open_catalog(path, chunks={}, time=when)
    memory = rx.open_catalog(table, chunks={}, time=when)
    assert disk.sizes == memory.sizes and disk.sizes["time"] > 400
    np.testing.assert_array_equal(disk.time.values, memory.time.values)
    np.testing.assert_array_equal(disk.cloud_cover.values, memory.cloud_cover.values)
    assert list(disk.band.values) == list(memory.band.values)
    assert disk.spatial_ref.attrs == memory.spatial_ref.attrs
    window = {"y": slice(20, 84), "x": slice(10, 74)}
    a = disk.band_data.isel(window).mean("time").compute()
    b = memory.band_data.isel(window).mean("time").compute()
    np.testing.assert_array_equal(a.values, b.values)
    # the same selection made after opening the whole table
    whole = rx.open_catalog(path, chunks={}).sel(time=when)
    np.testing.assert_array_equal(whole.time.values, disk.time.values)


@pytest.mark.slow
def test_whole_1e5_table_equals_its_rows_in_memory(files, big):
    path, table = big
    disk = rx.open_catalog(path, chunks={})
    memory = rx.open_catalog(table, chunks={})
    np.testing.assert_array_equal(disk.time.values, memory.time.values)
    assert disk.band_data.chunks == memory.band_data.chunks
    pick = np.random.default_rng(1).integers(0, BIG, 40)
    np.testing.assert_array_equal(disk.band_data.isel(time=pick, x=slice(0, 32)).values,
                                  memory.band_data.isel(time=pick, x=slice(0, 32)).values)


def _graph_bytes(array) -> tuple[int, int, int]:
    graph = dict(array.__dask_graph__())
    sizes = [len(pickle.dumps(v, protocol=5)) for v in graph.values()]
    return len(graph), sum(sizes), max(sizes)


def test_graph_is_the_same_size_for_1e3_and_1e5_rows(files, big, tmp_path):
    _, _, _, base = files
    small = write(rows(base, 1000), tmp_path / "small.parquet")
    year = slice("2020-01-01", "2020-07-31")  # inside both tables (1,000 rows = 291 days)
    out = {}
    for name, path in (("small", small), ("big", big[0])):
        cube = rx.open_catalog(path, chunks={}, time=year)
        mean = cube.band_data.isel(y=slice(0, 64), x=slice(0, 64)).mean("time")
        out[name] = _graph_bytes(mean.data)
        node = max(len(pickle.dumps(v, protocol=5))
                   for v in dict(cube.band_data.data.__dask_graph__()).values())
        out[name + "_node"] = node
    assert out["small"][0] == out["big"][0]  # the same tasks
    # bytes equal but for the few numbers per row group the reference holds
    assert abs(out["small"][1] - out["big"][1]) < 2048, out
    assert out["big_node"] < 16 * 2**10, out
    # and the whole cube of 10^5 scenes is one small node, not 70 bytes a scene
    whole = rx.open_catalog(big[0], chunks={})
    nodes = dict(whole.band_data.data.__dask_graph__())
    assert max(len(pickle.dumps(v, protocol=5)) for v in nodes.values()) < 16 * 2**10


@pytest.fixture
def counted():
    fsspy.register()
    fsspy.reset()
    tables.clear_row_cache()
    # A counted:// table is a remote location by its scheme, and its rows name local files:
    # the caller allows them (the rule for catalogs from elsewhere).
    with rx.set_options(allowed_hrefs=["file:"]):
        yield fsspy
    fsspy.reset()


def test_a_time_selection_reads_only_the_matching_row_groups(big, counted):
    path, _ = big
    when = slice("2021-01-01", "2021-02-28")
    seconds = [int(pd.Timestamp(v).value // 10**9) for v in ("2021-01-01", "2021-03-01")]
    t0 = int(pd.Timestamp("2020-01-01").value // 10**9)
    first, last = ((s - t0) // STEP for s in seconds)
    wanted = set(range(first // GROUP, (last - 1) // GROUP + 1))
    cube = rx.open_catalog(f"counted://{path}", chunks={}, time=when)
    opened = counted.reset()
    touched = counted.row_groups_read(str(path), opened)
    assert touched == wanted, (touched, wanted)
    # headers and paths: one row group (the reference row's), nothing else
    assert counted.column_groups_read(str(path), "header", opened) <= wanted
    assert len(counted.column_groups_read(str(path), "header", opened)) == 1
    assert cube.sizes["time"] == last - first
    # a chunk reads only the row groups of its own scenes, when it runs
    cube.band_data.isel(time=slice(0, 10), y=0, x=0).compute()
    ran = counted.row_groups_read(str(path), counted.reset())
    assert ran == {first // GROUP}


def test_explain_says_what_the_open_read_and_left(big):
    path, _ = big
    cube = rx.open_catalog(path, chunks={}, time=slice("2020-03", "2020-04"))
    rx.clear_cache()
    text = str(cube.band_data.isel(x=slice(0, 32)).mean("time").rumi.explain())
    assert "native read call" in text
    assert re.search(r"catalog table: 1 file\(s\); 1 of 20 row group\(s\)", text), text
    assert "coordinate column(s) cloud_cover" in text


def test_partitioned_table_append_is_visible_at_next_open(files, tmp_path):
    _, _, _, base = files
    folder = tmp_path / "catalog"
    write(rows(base, 3000), folder / "year=2020" / "part-0.parquet")
    write(rows(base, 2000, start=3000), folder / "year=2021" / "part-0.parquet")
    (folder / "_SUCCESS").write_text("")
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*.parquet")}
    cube = rx.open_catalog(folder, chunks={})
    assert cube.sizes["time"] == 5000
    write(rows(base, 700, start=5000), folder / "year=2022" / "part-0.parquet")
    assert {p: p.stat().st_mtime_ns for p in before} == before  # nothing rewritten
    again = rx.open_catalog(folder, chunks={})
    assert again.sizes["time"] == 5700
    np.testing.assert_array_equal(again.time.values[:5000], cube.time.values)
    np.testing.assert_array_equal(again.band_data.isel(time=5600, x=slice(0, 20)).values,
                                  truth(files, 5600, (0, 0, 100, 20)))
    # the cube opened before still reads what it described
    np.testing.assert_array_equal(cube.band_data.isel(time=4999, y=slice(0, 8)).values,
                                  truth(files, 4999, (0, 0, 8, 90)))
    only = rx.open_catalog(folder, time=slice("2022-01-01", None))
    assert only.sizes["time"] == int((again.time >= np.datetime64("2022-01-01")).sum())


def test_a_row_whose_header_is_another_grids_raises_naming_it(files, tmp_path):
    folder, paths, data, base = files
    odd = tmp_path / "odd.rumi"
    write_array(odd, data[0], bands=BANDS, time=[dt.date(2020, 1, 1)], transform=TRANSFORM,
                crs=32633, tile_size=64)
    table = rows(base, 12000)
    table.loc[7321, "header"] = rx.catalog([odd])["header"][0]
    path = write(table, tmp_path / "cat.parquet")
    cube = rx.open_catalog(path, chunks={})  # the open reads one row: it cannot know
    np.testing.assert_array_equal(cube.band_data.isel(time=5, y=0).values,
                                  truth(files, 5, (0, 0, 1, 90))[:, 0])
    with pytest.raises(rx.RumiCatalogError,
                       match=r"catalog row 7321 of .*cat\.parquet \(.*S2_1\.rumi\) cannot be "
                             r"stacked.*frame grid \(tile 64"):
        cube.band_data.isel(time=slice(7300, 7330)).mean().compute()


def test_a_row_whose_header_disagrees_with_its_file_raises_naming_it(files, tmp_path):
    folder, paths, data, base = files
    other = tmp_path / "other.rumi"
    write_array(other, data[0][:, :, ::-1].copy(), bands=BANDS, time=[dt.date(2020, 1, 1)],
                transform=TRANSFORM, crs=32633, tile_size=32, codec="planar>zigzag>zstd")
    table = rows(base, 9000)
    table["path"] = table["path"].astype(object)
    table.loc[8123, "path"] = str(other)  # same grid, different bytes: header is S2_3's
    path = write(table, tmp_path / "cat.parquet")
    cube = rx.open_catalog(path, chunks={})
    with pytest.raises(OSError, match=r"other\.rumi \(catalog row 8123 of .*cat\.parquet\)"):
        cube.band_data.isel(time=slice(8100, 8130)).mean().compute()


def test_an_on_disk_table_still_raises_the_typed_errors(tmp_path, files):
    with pytest.raises(rx.RumiFileNotFoundError):
        rx.open_catalog(tmp_path / "missing.parquet")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(rx.RumiCatalogError, match="holds no Parquet file"):
        rx.open_catalog(empty)
    path = write(rows(files[3], 50), tmp_path / "c.parquet")
    with pytest.raises(rx.RumiCatalogError, match="no catalog row has a time"):
        rx.open_catalog(path, time=slice("2030-01-01", "2030-02-01"))


def _worker_table_reads() -> dict:
    from rumi_xarray.catalogs import index

    return dict(index.GROUP_READS)


def _worker_reset() -> None:
    from rumi_xarray.catalogs import index
    from tests import fsspy as spy

    spy.register()
    spy.reset()
    index.clear_row_cache()
    index.GROUP_READS.update(groups=0, rows=0)


def _worker_spy() -> list:
    from tests import fsspy as spy

    return spy.reset()


@pytest.mark.dask
def test_on_a_separate_cluster_only_workers_read_the_table(files, big, tmp_path, counted,
                                                           two_zones):
    distributed = pytest.importorskip("distributed")
    from tests.test_distributed import SeparateCluster

    path, _ = big
    cluster = SeparateCluster(tmp_path).start()
    try:
        with distributed.Client(scheduler_file=str(cluster.scheduler_file), timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
            c.run(_worker_reset)
            tables.GROUP_READS.update(groups=0, rows=0)
            year = slice("2040-01-01", "2040-12-31")
            cube = rx.open_catalog(f"counted://{path}", chunks={}, time=year)
            client_reads = counted.reset()
            mean = cube.band_data.isel(y=slice(0, 64), x=slice(0, 64)).mean("time")
            got = mean.compute().values
            assert counted.reset() == []  # computing read nothing more here
            assert tables.GROUP_READS == {"groups": 0, "rows": 0}
            per_worker = c.run(_worker_table_reads)
            assert sum(r["groups"] for r in per_worker.values()) >= 1
            worker_reads = [r for reads in c.run(_worker_spy).values() for r in reads]
            # a STAC load across two zones, Items looked up by the workers' tasks
            stac = zones_table(two_zones, tmp_path)
            options = {"chunks": {"time": 8, "x": 64, "y": 64}, "groupby": "solar_day",
                       **ZONES_GRID}
            lazy = rx.open_stac(f"counted://{stac}", lookup="task", **options)
            counted.reset()
            stac_got = lazy.B03.compute().values
            assert counted.reset() == []  # the client read nothing of the table
            stac_reads = [r for reads in c.run(_worker_spy).values() for r in reads]
            assert counted.column_groups_read(str(stac), "assets", stac_reads)
            want = rx.open_stac(str(stac), **options).B03.compute(scheduler="threads").values
            np.testing.assert_array_equal(stac_got, want)
    finally:
        cluster.stop()
    # the client read headers of one row group (the reference row's); the workers those
    # of the year's row groups
    assert len(counted.column_groups_read(str(path), "header", client_reads)) == 1
    year_groups = counted.column_groups_read(str(path), "header", worker_reads)
    assert 1 <= len(year_groups) <= 2
    scenes = np.flatnonzero((cube.time.values >= np.datetime64("2040-01-01"))
                            & (cube.time.values < np.datetime64("2041-01-01")))
    t0 = int(np.searchsorted(big[1]["time"].values, cube.time.values[0]))
    stack = np.stack([truth(files, t0 + k, (0, 0, 64, 64)) for k in range(len(scenes))])
    np.testing.assert_allclose(got, stack.mean(axis=0))


def _shifted(coords, dx):
    if isinstance(coords[0], (int, float)):
        return [coords[0] + dx, *coords[1:]]
    return [_shifted(c, dx) for c in coords]


def test_open_stac_of_a_geoparquet_table_reads_only_matching_row_groups(files, tmp_path,
                                                                       counted):
    """bbox=, datetime= and query= pushed to the Parquet reader: other row groups stay unread."""
    import pyarrow.parquet as pq

    from rumi_xarray.stac.geoparquet import to_table

    _, paths, data, _ = files
    item = rx.to_stac([paths[0]])[0].to_dict(transform_hrefs=False)
    items = []
    for region in range(4):  # four regions 10 degrees apart, 60 dates each
        for k in range(60):
            d = pickle.loads(pickle.dumps(item))
            d["id"] = f"r{region}-{k:03d}"
            when = pd.Timestamp("2020-01-01", tz="UTC") + pd.Timedelta(days=5 * k)
            d["properties"]["datetime"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
            d["properties"]["eo:cloud_cover"] = float(k % 10)
            if region:
                shift = 10.0 * region
                d["bbox"] = [d["bbox"][0] + shift, d["bbox"][1], d["bbox"][2] + shift,
                             d["bbox"][3]]
                d["geometry"] = {"type": d["geometry"]["type"],
                                 "coordinates": _shifted(d["geometry"]["coordinates"], shift)}
            items.append(d)
    table = to_table(items)
    path = tmp_path / "items.parquet"
    pq.write_table(table, path, row_group_size=20)  # 12 row groups: 3 per region
    bbox = item["bbox"]
    counted.reset()
    ds = rx.open_stac(f"counted://{path}", bbox=bbox, datetime="2020-01-01/2020-04-09",
                      query={"eo:cloud_cover": {"lt": 5}}, chunks={})
    reads = counted.reset()
    # region 0's first 20 dates (2020-01-01 .. 2020-04-05) are row group 0
    assert counted.row_groups_read(str(path), reads) == {0}
    expected = [k for k in range(20) if k % 10 < 5]
    assert ds.sizes["time"] == len(expected)
    np.testing.assert_array_equal(
        ds.time.values, np.array([np.datetime64("2020-01-01", "ns")
                                  + np.timedelta64(5 * k, "D") for k in expected]))
    inside = ds["B03"].isel(time=2).sel(x=slice(600000, 600900), y=slice(5000000, 4999000))
    np.testing.assert_array_equal(inside.values, data[0, 0, 1])
    # the same selections on the Items as dicts (datetime, query) give the same cube
    again = rx.open_stac(items[:60], bbox=bbox, datetime="2020-01-01/2020-04-09",
                         query={"eo:cloud_cover": {"lt": 5}}, chunks={})
    np.testing.assert_array_equal(again.time.values, ds.time.values)


def test_a_partitioned_table_in_s3_with_rows_in_s3(s3_server, files, tmp_path):
    """Table and scenes in object storage: credentials from the environment (as workers
    get them), a time selection reads the 2021 partition only, and an append is seen."""
    _, paths, _, base = files
    s3_server.upload("arch", *paths, prefix="scenes/")
    remote = base.assign(path=[f"s3://arch/scenes/{p.name}" for p in paths])
    rng = np.random.default_rng(0)
    for year, start, n in (("2020", 0, 20000), ("2021", 20000, 1300)):
        table = rows(remote, n, start=start)
        table["noise"] = rng.random(n)  # incompressible: the file is larger than its footer
        part = write(table, tmp_path / f"y{year}" / "part-0.parquet")
        s3_server.upload("arch", part, prefix=f"catalog/year={year}/")
    s3_server.reset()
    cube = rx.open_catalog("s3://arch/catalog", chunks={}, time=slice("2036-01-01", None),
                           coords=None)
    assert cube.sizes["time"] > 1000
    gets = [r for r in s3_server.requests()
            if r.method == "GET" and ("year%3D2020" in r.path or "year=2020" in r.path)]
    size = (tmp_path / "y2020" / "part-0.parquet").stat().st_size
    assert gets  # its footer was read (statistics) ...
    assert sum(r.bytes_sent for r in gets) < size / 4  # ... but none of its row groups
    first = int(np.searchsorted(rows(base, 21300)["time"].values, cube.time.values[0]))
    np.testing.assert_array_equal(cube.band_data.isel(time=3, x=slice(0, 40)).values,
                                  truth(files, first + 3, (0, 0, 100, 40)))
    extra = write(rows(remote, 100, start=21300), tmp_path / "y2022" / "part-0.parquet")
    s3_server.upload("arch", extra, prefix="catalog/year=2022/")
    assert rx.open_catalog("s3://arch/catalog").sizes["time"] == 21400


def test_bbox_crops_before_reading_on_disk_and_in_memory(files, big):
    from pyproj import Transformer

    path, table = big
    to_lonlat = Transformer.from_crs(32633, 4326, always_xy=True)
    # the pixels of rows 20..49, columns 30..59 (corners 600300..600600 E, 4999800..4999500 N)
    west, south = to_lonlat.transform(600300 + 1, 4999500 + 1)
    east, north = to_lonlat.transform(600600 - 1, 4999800 - 1)
    box = (west, south, east, north)
    disk = rx.open_catalog(path, bbox=box, time=slice("2020-02-01", "2020-02-03"))
    memory = rx.open_catalog(table, bbox=box, time=slice("2020-02-01", "2020-02-03"))
    whole = rx.open_catalog(path, time=slice("2020-02-01", "2020-02-03"))
    # a lon/lat box is not a UTM rectangle: the crop holds its projected bounds
    assert 30 <= disk.sizes["x"] <= 32 and 30 <= disk.sizes["y"] <= 32
    x0 = int(np.flatnonzero(whole.x.values == disk.x.values[0])[0])
    y0 = int(np.flatnonzero(whole.y.values == disk.y.values[0])[0])
    assert 29 <= x0 <= 30 and 19 <= y0 <= 20
    np.testing.assert_array_equal(disk.band_data.values, memory.band_data.values)
    np.testing.assert_array_equal(
        disk.band_data.values,
        whole.band_data.isel(x=slice(x0, x0 + disk.sizes["x"]),
                             y=slice(y0, y0 + disk.sizes["y"])).values)
    with pytest.raises(rx.RumiCatalogError, match="does not intersect"):
        rx.open_catalog(path, bbox=(100.0, 10.0, 101.0, 11.0))


@pytest.fixture(scope="module")
def two_zones(tmp_path_factory):
    """Two real files either side of the UTM 33/34 boundary (lon 18 E, lat 52 N)."""
    from pyproj import Transformer

    folder = tmp_path_factory.mktemp("zones")
    rng = np.random.default_rng(7)
    data = rng.integers(1, 10000, (2, 1, 3, 120, 110)).astype(np.uint16)
    paths = []
    for k, epsg in enumerate((32633, 32634)):
        x, y = Transformer.from_crs(4326, epsg, always_xy=True).transform(18.0, 52.0)
        transform = (10.0, 0.0, float(round(x) - 700 + 500 * k), 0.0, -10.0,
                     float(round(y) + 600))
        path = folder / f"zone{epsg}.rumi"
        write_array(path, data[k], bands=BANDS, time=[dt.date(2020, 1, 1)],
                    transform=transform, crs=epsg, tile_size=32, nodata=0)
        paths.append(path)
    return folder, paths, data


ZONES_GRID = {"crs": "EPSG:32633", "resolution": 20, "bbox": (17.985, 51.995, 18.02, 52.01)}


def zones_table(two_zones, folder: Path) -> Path:
    """A stac-geoparquet archive: 30 dates x 2 zones, plus decoys 20 degrees east."""
    import pyarrow.parquet as pq

    from rumi_xarray.stac.geoparquet import to_table

    _, paths, _ = two_zones
    base = [i.to_dict(transform_hrefs=False) for i in rx.to_stac(paths)]
    items = []
    for k in range(30):  # 30 dates x 2 zones, plus decoys 20 degrees east
        for which, item in enumerate(base):
            d = pickle.loads(pickle.dumps(item))
            d["id"] = f"z{which}-{k:02d}"
            when = pd.Timestamp("2021-01-01", tz="UTC") + pd.Timedelta(days=3 * k,
                                                                      minutes=which)
            d["properties"]["datetime"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
            items.append(d)
    for k in range(30):
        d = pickle.loads(pickle.dumps(base[0]))
        d["id"] = f"far-{k:02d}"
        d["properties"]["datetime"] = "2021-02-01T00:00:00Z"
        d["bbox"] = [v + 20.0 if i % 2 == 0 else v for i, v in enumerate(d["bbox"])]
        d["geometry"] = {"type": "Polygon", "coordinates": _shifted(
            d["geometry"]["coordinates"], 20.0)}
        items.append(d)
    path = folder / "archive.parquet"
    pq.write_table(to_table(items), path, row_group_size=10)
    return path


@pytest.mark.parametrize("groupby", [None, "id"])
def test_lookup_task_refuses_groupby_id_which_none_means_on_both_paths(two_zones, tmp_path,
                                                                        groupby):
    """groupby=None is "id" (every Item its own step) on both paths, as in odc-stac: the
    task-time lookup, which groups by time only, refuses it rather than grouping by time."""
    path = zones_table(two_zones, tmp_path)
    with pytest.raises(rx.RumiCatalogError, match=r"got groupby='id'.*None"):
        rx.open_stac(str(path), groupby=groupby, lookup="task", **ZONES_GRID)
    with pytest.raises(TypeError, match="groupby must be a string or None"):
        rx.open_stac(str(path), groupby=5, lookup="task", **ZONES_GRID)


def test_open_stac_over_an_archive_of_two_zones_looks_items_up_per_chunk(two_zones, tmp_path,
                                                                         counted,
                                                                         monkeypatch):
    """lookup='task': the same cube as planning every Item at open, from a graph that
    holds no Item, each chunk reading only the row groups of its own Items."""
    path = zones_table(two_zones, tmp_path)
    grid = ZONES_GRID
    eager = rx.open_stac(str(path), chunks={"time": 4, "x": 64, "y": 64}, groupby="solar_day",
                         datetime="2021-01-01/2021-03-31", **grid)
    from rumi_xarray.stac import archive

    parsed = []
    real = archive.parse_item
    monkeypatch.setattr(archive, "parse_item",
                        lambda d, *a, **k: parsed.append(d["id"]) or real(d, *a, **k))
    lazy = rx.open_stac(f"counted://{path}", chunks={"time": 4, "x": 64, "y": 64},
                        groupby="solar_day", datetime="2021-01-01/2021-03-31",
                        lookup="task", **grid)
    assert parsed == ["z0-00"]  # the open parsed one Item; the tasks parse their own
    assert lazy.sizes == eager.sizes and lazy.sizes["time"] == 30
    np.testing.assert_array_equal(lazy.time.values, eager.time.values)
    graph = dict(lazy.B02.data.__dask_graph__())
    assert max(len(pickle.dumps(v)) for v in graph.values()) < 16 * 2**10
    for name in ("B02", "B04"):
        np.testing.assert_array_equal(lazy[name].values, eager[name].values)
    assert (eager.B02.values != 0).mean() > 0.3  # both zones' pixels, not only nodata
    parsed.clear()
    counted.reset()
    lazy.B03.isel(time=slice(0, 4), x=slice(0, 64), y=slice(0, 64)).compute()
    task_reads = counted.reset()
    # the first 4 dates of both zones (rows 0..7, row group 0) and nothing else
    assert sorted(parsed) == sorted(f"z{z}-{k:02d}" for z in (0, 1) for k in range(4))
    assert counted.column_groups_read(str(path), "assets", task_reads) == {0}
    assert lazy.B02.attrs == eager.B02.attrs
