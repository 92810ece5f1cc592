"""How long opening and planning take on the client: catalogs of 1,000 and 10,000 scenes.

Run: ``.venv/bin/python benchmarks/open_speed.py [--scenes 1000,10000]``.
Prints seconds; nothing here is asserted (the tests check structure, this
measures time).

The catalog rows are built from the header of one real single-date scene
(4 bands, 1024 x 1024 uint16, tile 256); their paths need not exist, since
nothing here reads pixels. For each size it times, on the client:

- ``rx.open_catalog(table)`` (lazy) and ``rx.open_catalog(table, chunks={})``;
- building a 256 x 256-window time mean (``isel`` + ``mean``) on the chunked cube;
- planning it: the graph ``compute`` would send (dask's optimize and cull), with
  its task count and the largest pickled task (the cube must be one node, not
  carried by every task);
- ``ds.rumi.explain()`` of the window mean (librumi plans every byte range).

Bar of issue 11: open + build + plan of the 10,000-scene window mean < 2 s.

Archive mode (issue 23; ``--archive 1000,10000,100000,1000000``, the default run): the
same kind of rows in a Parquet table on disk (row groups of 65,536), one scene an hour
from 2000-01-01, every row pointing at one of four real files (4 bands, 1024 x 1024
uint16, tile 256) so that computing reads real pixels. For each size a fresh process
(``--child``) measures, after its imports:

- ``rx.open_catalog(table, chunks={})`` (first open, then the median of ``--reps``),
  and the process's peak RSS over its post-import RSS (client memory);
- ``open_catalog(table, chunks={}, time=slice("2000-01-01", "2000-12-31"))``: a one-year
  slice opened directly;
- a 64 x 64 window mean over that year (8,784 scenes once the table spans a year):
  its graph as ``compute`` sends it (optimized and culled, every node pickled), the
  time to build and plan it, and to compute it (threads);
- the in-memory path (``open_catalog`` of the same rows as a DataFrame: the
  catalog of issue 11) for sizes up to ``--memory-max``, beside it;
- ``odc.stac.load`` over the same number of Items (GeoTIFF copies of the files, one
  per band) up to ``--odc-max``: open (chunked) and the one-year window mean's graph
  and compute. lazycogs needs Python >= 3.12 and does not install here (3.11).

Bars (issue 23): 10^6 scenes open < 2 s with < 500 MB client memory; the one-year
window-mean graph < 1 MB at every scale; a one-year slice of the 10^6 table opens < 1 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# When a script here runs, benchmarks/ is sys.path[0], where a module may shadow an
# optional package other libraries probe for (a file named like PyPI's `sparse`, which
# dask.array imports when found, once broke dask here): the folder leaves the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import rumi_xarray as rx  # noqa: E402

#: open + build + plan of the 10,000-scene window mean, on the client.
PLAN_BAR_S = 2.0


def timed(reps: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Return the median wall time of ``reps`` calls and the last result."""
    times, out = [], None
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _write_array() -> Any:
    try:
        from rumi_xarray.write.to_rumi import write_array
    except ImportError:  # the layout before the restructuring (commit b938ca8)
        from rumi_xarray.writer import write_array  # type: ignore[no-redef]
    return write_array


def catalog_rows(folder: Path, scenes: int) -> pd.DataFrame:
    """Return ``scenes`` catalog rows sharing one real header, one day apart."""
    data = np.random.default_rng(0).integers(0, 4000, (1, 4, 1024, 1024)).astype(np.uint16)
    path = folder / "scene.rumi"
    if not path.exists():
        _write_array()(path, data, bands=["B02", "B03", "B04", "B08"],
                       time=[dt.date(2024, 1, 1)],
                       transform=(10, 0, 600000, 0, -10, 5000000), crs=32633, tile_size=256)
    row = rx.catalog([path]).iloc[0]
    table = pd.DataFrame([row] * scenes).reset_index(drop=True)
    table["time_seconds"] = [[int(row["time_seconds"][0]) + 86400 * i] for i in range(scenes)]
    table["path"] = [f"s3://bucket/tile/scene_{i:05d}.rumi" for i in range(scenes)]
    return table


def plan(array: Any) -> dict[Any, Any]:
    """Return the low-level graph ``compute`` would run (optimized and culled)."""
    import dask
    from dask.core import flatten
    from dask.optimization import cull

    if hasattr(array, "expr"):  # dask's array query planning
        optimized = array.optimize()
    else:
        (optimized,) = dask.optimize(array)
    graph, _ = cull(dict(optimized.__dask_graph__()), list(flatten(optimized.__dask_keys__())))
    return dict(graph)


def measure(table: pd.DataFrame, reps: int) -> dict[str, Any]:
    """Time open, build, plan and explain of a window time mean over ``table``'s scenes."""
    out: dict[str, Any] = {"scenes": len(table)}
    out["open_lazy_s"], _ = timed(reps, lambda: rx.open_catalog(table))
    out["open_chunked_s"], cube = timed(reps, lambda: rx.open_catalog(table, chunks={}))

    def build() -> Any:
        return cube.band_data.isel(y=slice(256, 512), x=slice(512, 768)).mean("time")

    out["build_s"], mean = timed(reps, build)
    out["plan_s"], graph = timed(reps, lambda: plan(mean.data))
    out["open_build_plan_s"] = out["open_chunked_s"] + out["build_s"] + out["plan_s"]
    sizes = sorted((len(pickle.dumps(node, protocol=5)) for node in graph.values()),
                   reverse=True)
    out["tasks"] = len(graph)
    out["largest_task_bytes"] = sizes[0]
    out["second_largest_task_bytes"] = sizes[1] if len(sizes) > 1 else 0
    out["chunks"] = [len(c) for c in cube.band_data.data.chunks]
    try:
        out["explain_s"], explanation = timed(1, lambda: mean.rumi.explain())
        out["explain"] = str(explanation)
    except Exception as exc:  # an older checkout may not explain dask graphs
        out["explain_s"], out["explain"] = float("nan"), f"{type(exc).__name__}: {exc}"
    return out


OPEN_BAR_S = 2.0
MEMORY_BAR_MB = 500.0
GRAPH_BAR_BYTES = 2**20
SLICE_BAR_S = 1.0
YEAR = slice("2000-01-01", "2000-12-31")
WINDOW = {"y": slice(256, 320), "x": slice(512, 576)}
GROUP_ROWS = 65536


def archive_files(folder: Path) -> list[Path]:
    """Write (once) the four real files every archive row points at."""
    paths = []
    for k in range(4):
        path = folder / f"scene{k}.rumi"
        if not path.exists():
            data = np.random.default_rng(k).integers(0, 4000, (1, 4, 1024, 1024))
            _write_array()(path, data.astype(np.uint16), bands=["B02", "B03", "B04", "B08"],
                           time=[dt.date(2000, 1, 1)],
                           transform=(10, 0, 600000, 0, -10, 5000000), crs=32633,
                           tile_size=256)
        paths.append(path)
    return paths


def archive_table(folder: Path, paths: list[Path], scenes: int) -> Path:
    """Write (once) a Parquet catalog of ``scenes`` hourly rows over the four files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = folder / f"catalog-{scenes}.parquet"
    if out.exists():
        return out
    base = pa.Table.from_pandas(rx.catalog(paths), preserve_index=False)
    table = base.take(pa.array(np.arange(scenes, dtype=np.int64) % len(paths)))
    t0 = int(base.column("time_seconds")[0][0].as_py())
    seconds = t0 + 3600 * np.arange(scenes, dtype=np.int64)
    steps = pa.ListArray.from_arrays(pa.array(np.arange(scenes + 1, dtype=np.int32)),
                                     pa.array(seconds))
    table = table.set_column(table.schema.get_field_index("time_seconds"), "time_seconds",
                             steps)
    table = table.set_column(table.schema.get_field_index("time"), "time",
                             pa.array(seconds * 10**9, pa.timestamp("ns")))
    pq.write_table(table, out, row_group_size=GROUP_ROWS)
    return out


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def graph_bytes(array: Any) -> tuple[int, int, int]:
    """Return tasks, total pickled bytes and the largest node of the graph compute sends."""
    from distributed.protocol.pickle import dumps

    graph = plan(array)
    sizes = [len(dumps(v)) for v in graph.values()]
    return len(graph), sum(sizes), max(sizes)


def child(table: str, reps: int, memory: bool, odc: int, folder: str) -> dict[str, Any]:
    """Measure one archive size in this (fresh) process."""
    import dask.array  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import xarray as xr  # noqa: F401  (imports before the baseline)

    import rumi_xarray.catalogs.cube
    import rumi_xarray.catalogs.index  # noqa: F401

    out: dict[str, Any] = {}
    base_rss = _rss_mb()
    start = time.perf_counter()
    cube = rx.open_catalog(table, chunks={})
    out["open_first_s"] = time.perf_counter() - start
    out["open_peak_mb"] = _peak_mb() - base_rss
    out["scenes"] = cube.sizes["time"]
    out["open_s"], _ = timed(reps, lambda: rx.open_catalog(table, chunks={}))
    out["slice_s"], year = timed(reps, lambda: rx.open_catalog(table, chunks={}, time=YEAR))
    out["year_scenes"] = year.sizes["time"]

    def build() -> Any:
        return year.band_data.isel(WINDOW).mean("time")

    start = time.perf_counter()
    mean = build()
    out["tasks"], out["graph_bytes"], out["largest_node"] = graph_bytes(mean.data)
    out["plan_s"] = time.perf_counter() - start
    rx.clear_cache()
    out["explain"] = str(year.band_data.isel(WINDOW).mean("time").rumi.explain())
    start = time.perf_counter()
    values = mean.compute()
    out["compute_s"] = time.perf_counter() - start
    out["mean_check"] = float(values.mean())
    out["client_peak_mb"] = _peak_mb() - base_rss
    if memory:
        import pyarrow.parquet as pq

        rows = pq.read_table(table).to_pandas()
        start = time.perf_counter()
        cube_mem = rx.open_catalog(rows, chunks={})
        out["memory_open_s"] = time.perf_counter() - start
        mem_mean = cube_mem.band_data.sel(time=YEAR).isel(WINDOW).mean("time")
        out["memory_tasks"], out["memory_graph_bytes"], out["memory_largest_node"] = (
            graph_bytes(mem_mean.data))
    if odc:
        out.update(odc_arm(Path(folder), out["scenes"], reps))
    return out


def odc_arm(folder: Path, scenes: int, reps: int) -> dict[str, Any]:
    """odc.stac.load over ``scenes`` Items of GeoTIFF copies, as rows of the same archive."""
    import odc.stac
    import rioxarray  # noqa: F401

    tifs = {}
    source = xr_open(folder / "scene0.rumi")
    for i, name in enumerate(["B02", "B03", "B04", "B08"]):
        path = folder / f"scene0_{name}.tif"
        if not path.exists():
            band = source.band_data.isel(time=0, band=i)
            band.rio.to_raster(path, tiled=True, blockxsize=256, blockysize=256,
                               compress="ZSTD")
        tifs[name] = path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.stac_items import geotiff_item

    item = geotiff_item("s", dt.datetime(2000, 1, 1, tzinfo=dt.UTC), 32633,
                        (10, 0, 600000, 0, -10, 5000000), (1024, 1024), tifs,
                        ["B02", "B03", "B04", "B08"], 0).to_dict()
    items = []
    for k in range(scenes):
        d = dict(item, id=f"s{k}", properties=dict(item["properties"]))
        d["properties"]["datetime"] = (dt.datetime(2000, 1, 1) + dt.timedelta(hours=k)
                                       ).strftime("%Y-%m-%dT%H:%M:%SZ")
        items.append(d)
    import pystac

    out: dict[str, Any] = {}
    start = time.perf_counter()
    objs = [pystac.Item.from_dict(d) for d in items]
    out["odc_items_s"] = time.perf_counter() - start
    out["odc_open_s"], ds = timed(1, lambda: odc.stac.load(objs, chunks={"x": 1024, "y": 1024},
                                                          groupby="id"))
    mean = ds.sel(time=YEAR).isel(WINDOW).to_array().mean("time")
    out["odc_tasks"], out["odc_graph_bytes"], out["odc_largest_node"] = graph_bytes(mean.data)
    start = time.perf_counter()
    mean.compute()
    out["odc_compute_s"] = time.perf_counter() - start
    return out


def xr_open(path: Path) -> Any:
    import xarray as xr

    return xr.open_dataset(path, engine="rumi")


def stac_table(folder: Path, items: int) -> tuple[Path, tuple[float, float, float, float]]:
    """Write (once) a stac-geoparquet archive of ``items`` hourly Items over two UTM zones.

    Two real files either side of the 33/34 boundary at 18 E, 52 N (4 bands, 512 x 512,
    tile 256); Item ``k`` is file ``k % 2`` at hour ``k // 2``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyproj import Transformer

    from rumi_xarray.stac.geoparquet import to_table

    paths = []
    for k, epsg in enumerate((32633, 32634)):
        path = folder / f"zone{epsg}.rumi"
        if not path.exists():
            x, y = Transformer.from_crs(4326, epsg, always_xy=True).transform(18.0, 52.0)
            data = np.random.default_rng(k).integers(1, 4000, (1, 4, 512, 512))
            _write_array()(path, data.astype(np.uint16), bands=["B02", "B03", "B04", "B08"],
                           time=[dt.date(2000, 1, 1)],
                           transform=(10, 0, float(round(x) - 4000 + 3000 * k), 0, -10,
                                      float(round(y) + 2500)),
                           crs=epsg, tile_size=256, nodata=0)
        paths.append(path)
    out = folder / f"items-{items}.parquet"
    bbox = (17.99, 51.995, 18.03, 52.03)
    if out.exists():
        return out, bbox
    base = to_table([i.to_dict(transform_hrefs=False) for i in rx.to_stac(paths)])
    table = base.take(pa.array(np.arange(items, dtype=np.int64) % 2))
    hours = np.arange(items, dtype=np.int64) // 2
    stamps = pa.array((946684800 + 3600 * hours) * 10**6 + np.arange(items) % 2,
                      pa.timestamp("us", tz="UTC"))
    table = table.set_column(table.schema.get_field_index("datetime"), "datetime", stamps)
    table = table.set_column(table.schema.get_field_index("id"), "id",
                             pa.array([f"i{k}" for k in range(items)]))
    pq.write_table(table, out, row_group_size=4096)
    return out, bbox


def stac_child(table: str, bbox: tuple[float, ...], lookup: str) -> dict[str, Any]:
    """Open the two-zone archive with ``lookup`` and compute a one-day window."""
    import odc.geo.xr  # noqa: F401  (imports before the baseline)
    import pystac  # noqa: F401
    import stac_geoparquet.arrow  # noqa: F401
    import xarray  # noqa: F401

    import rumi_xarray.stac.archive
    import rumi_xarray.stac.load  # noqa: F401

    out: dict[str, Any] = {}
    base_rss = _rss_mb()
    start = time.perf_counter()
    ds = rx.open_stac(table, crs="EPSG:32633", resolution=20, bbox=bbox,
                      chunks={"time": 24, "x": 256, "y": 256}, lookup=lookup,
                      datetime="2000-01-01/2000-12-31")
    out["open_first_s"] = time.perf_counter() - start
    out["open_peak_mb"] = _peak_mb() - base_rss
    out["open_s"], ds = timed(2, lambda: rx.open_stac(
        table, crs="EPSG:32633", resolution=20, bbox=bbox,
        chunks={"time": 24, "x": 256, "y": 256}, lookup=lookup,
        datetime="2000-01-01/2000-12-31"))
    out["times"] = ds.sizes["time"]
    day = ds.B04.isel(time=slice(0, 24)).mean("time")
    out["tasks"], out["graph_bytes"], out["largest_node"] = graph_bytes(day.data)
    start = time.perf_counter()
    out["check"] = float(day.compute().mean())
    out["compute_s"] = time.perf_counter() - start
    return out


def stac_archive(args: Any) -> None:
    """Print open_stac over two-zone archives: plan every Item at open vs per task."""
    import json
    import subprocess

    folder = Path(args.data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    print("STAC archive over two UTM zones onto one grid (one year of hourly Items): "
          "items | lookup | open, median of 2 (first) | client peak | graph of a one-day "
          "mean (tasks, largest node) | its compute")
    for n in (int(v) for v in args.stac.split(",")):
        table, bbox = stac_table(folder, n)
        checks = {}
        for lookup in ("open", "task"):
            if lookup == "open" and n > args.stac_open_max:
                print(f"{n:>9,} | open | not run (> --stac-open-max {args.stac_open_max:,})")
                continue
            cmd = [sys.executable, __file__, "--stac-child", str(table), "--stac-lookup",
                   lookup, "--stac-bbox", ",".join(map(str, bbox))]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode:
                print(f"{n}: {lookup} failed\n{done.stderr[-2000:]}")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            checks[lookup] = r["check"]
            print(f"{n:>9,} | {lookup} | {r['open_s']:.3f} s ({r['open_first_s']:.3f} s "
                  f"first) | {r['open_peak_mb']:.0f} MB | "
                  f"{r['graph_bytes']:,} B ({r['tasks']:,}, {r['largest_node']:,} B) | "
                  f"{r['compute_s']:.2f} s")
        if len(checks) == 2:
            same = checks["open"] == checks["task"]
            print(f"          [{'SAME' if same else 'DIFFERENT'}] window mean of both lookups")


def archive(args: Any) -> int:
    """Run every archive size in a fresh process and print the table with its bars."""
    import json
    import subprocess

    sizes = [int(v) for v in args.archive.split(",")]
    folder = Path(args.data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = archive_files(folder)
    missed = []
    print(f"rumi_xarray from {Path(rx.__file__).resolve().parent}")
    print("scenes | open (first) | client peak | 1-year slice open | year scenes | "
          "window-mean graph (tasks, largest node) | plan | compute | in memory | odc-stac")
    for n in sizes:
        table = archive_table(folder, paths, n)
        cmd = [sys.executable, __file__, "--child", str(table), "--reps", str(args.reps),
               "--data-dir", str(folder)]
        if n <= args.memory_max:
            cmd.append("--memory")
        if n <= args.odc_max:
            cmd.append("--odc")
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode:
            print(f"{n}: child failed\n{done.stderr[-3000:]}")
            return 1
        r = json.loads(done.stdout.strip().splitlines()[-1])
        memory = (f"open {r['memory_open_s']:.2f} s, graph {r['memory_graph_bytes']:,} B "
                  f"(node {r['memory_largest_node']:,} B)" if "memory_open_s" in r else "-")
        odc = (f"open {r['odc_open_s']:.2f} s (+{r['odc_items_s']:.2f} s pystac), graph "
               f"{r['odc_graph_bytes']:,} B, compute {r['odc_compute_s']:.2f} s"
               if "odc_open_s" in r else "-")
        print(f"{n:>9,} | {r['open_s']:.3f} s ({r['open_first_s']:.3f}) | "
              f"{r['client_peak_mb']:.0f} MB (open {r['open_peak_mb']:.0f}) | "
              f"{r['slice_s']:.3f} s | {r['year_scenes']:,} | {r['graph_bytes']:,} B "
              f"({r['tasks']:,}, {r['largest_node']:,} B) | {r['plan_s']:.3f} s | "
              f"{r['compute_s']:.2f} s | {memory} | {odc}")
        print(f"          explain: {' / '.join(r['explain'].splitlines())}")
        if r["graph_bytes"] >= GRAPH_BAR_BYTES:
            missed.append(f"{n}: window-mean graph {r['graph_bytes']:,} B >= 1 MB")
        if n >= 10**6:
            bars = [("open", r["open_s"] < OPEN_BAR_S, f"{r['open_s']:.3f} s < {OPEN_BAR_S} s"),
                    ("client memory", r["client_peak_mb"] < MEMORY_BAR_MB,
                     f"{r['client_peak_mb']:.0f} MB < {MEMORY_BAR_MB:.0f} MB"),
                    ("1-year slice open", r["slice_s"] < SLICE_BAR_S,
                     f"{r['slice_s']:.3f} s < {SLICE_BAR_S} s")]
            for name, ok, text in bars:
                print(f"          [{'MET' if ok else 'MISS'}] {n:,} scenes {name}: {text}")
                if not ok:
                    missed.append(f"{n}: {name} {text}")
    verdict = "MET" if not [m for m in missed if "graph" in m] else "MISS"
    print(f"[{verdict}] one-year window-mean graph < 1 MB at every scale")
    for m in missed:
        print(f"MISS {m}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", default="",
                        help="in-memory catalogs of these sizes (issue 11's measurement)")
    parser.add_argument("--archive", default="1000,10000,100000,1000000",
                        help="Parquet tables of these sizes ('' skips)")
    parser.add_argument("--quick", action="store_true", help="archive sizes 10^3..10^5")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--memory-max", type=int, default=10000)
    parser.add_argument("--odc-max", type=int, default=1000)
    parser.add_argument("--data-dir", default="bench-data/archive")
    parser.add_argument("--stac", default="1000,10000,100000",
                        help="two-zone stac-geoparquet archives of these sizes ('' skips)")
    parser.add_argument("--stac-open-max", type=int, default=10000)
    parser.add_argument("--stac-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--stac-lookup", default="task", help=argparse.SUPPRESS)
    parser.add_argument("--stac-bbox", default="", help=argparse.SUPPRESS)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--odc", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stac_child:
        import json

        box = tuple(float(v) for v in args.stac_bbox.split(","))
        print(json.dumps(stac_child(args.stac_child, box, args.stac_lookup)))
        return 0
    if args.child:
        import json

        print(json.dumps(child(args.child, args.reps, args.memory, args.odc, args.data_dir)))
        return 0
    if args.quick:
        args.archive = "1000,10000,100000"
    if args.scenes:
        print(f"rumi_xarray from {Path(rx.__file__).resolve().parent}")
        with tempfile.TemporaryDirectory() as tmp:
            for n in (int(v) for v in args.scenes.split(",")):
                table = catalog_rows(Path(tmp), n)
                r = measure(table, args.reps)
                print(f"{n:6d} scenes: open lazy {r['open_lazy_s']:.3f} s, chunks={{}} "
                      f"{r['open_chunked_s']:.3f} s (chunks per dim {r['chunks']}); "
                      f"window mean: build {r['build_s']:.3f} s, plan {r['plan_s']:.3f} s "
                      f"({r['tasks']} tasks, largest pickled task "
                      f"{r['largest_task_bytes']:,} B, next "
                      f"{r['second_largest_task_bytes']:,} B); explain {r['explain_s']:.3f} s")
                print(f"        explain: {r['explain']}")
                if n >= 10000:
                    total = r["open_build_plan_s"]
                    verdict = "MET" if total < PLAN_BAR_S else "MISS"
                    print(f"        [{verdict}] open + build + plan {total:.3f} s "
                          f"< {PLAN_BAR_S} s on the client")
    status = archive(args) if args.archive else 0
    if args.stac:
        stac_archive(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
