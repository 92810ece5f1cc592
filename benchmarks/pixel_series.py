"""Pixel series through a catalog of scene files, against the engine limit and rasterio.

Run: ``.venv/bin/python benchmarks/pixel_series.py [--scenes 8] [--size 1024] [--pixels 200]
[--reps 5] [--latency-ms 20] [--no-http]``.

Data: ``--scenes`` Landsat-like scenes (3 bands of uint16, ``--size`` pixels
square, deflate GeoTIFFs written by GDAL, as ``benchmarks/ingest.py`` makes
them), turned into Rumi scene files plus their catalog by ``rx.ingest``
(defaults: 512-pixel tiles, one frame per band and tile), into one series file
by ``rx.ingest(layout="series")``, and into COGs (ZSTD) by GDAL's COG driver.

The workload: every date and band of ``--pixels`` random pixels, asked as
xarray users ask it, one vectorized ``isel``. Arms, each timed from the
catalog table on disk to the numbers in memory:

- ``ours``: ``rx.open_catalog(table).band_data.isel(y=DataArray, x=DataArray).values``
  (lazily indexed, a fresh tile cache before every run);
- ``engine 1x1``: the table's ``path`` and ``header`` columns read with pyarrow,
  then one ``rumi.read_many`` of a 1 x 1 window per pixel and scene;
- ``engine cells``: the same columns, then ``rumi.read_many`` of one window per
  touched ``(scene, tile cell)`` bounding the cell's pixels (one call per
  distinct window size): each frame decoded once;
- ``engine 1 call``: the same windows grown to one size (the largest box,
  kept inside its cell), all in one ``rumi.read_many``: each frame decoded
  once, one plan (the fewest round trips over HTTP);
- ``rasterio``: ``rasterio.open`` + ``sample`` over the COGs (GDAL's block cache
  is per dataset, so every run reads afresh);
- ``series file`` (for reference, no bar): ``xr.open_dataset`` of the series
  file + the same ``isel``.

Then each arm (but ``engine 1x1``) once more as the first read of these files
in a fresh process that has read a small copy of them (other files) through
the same arm first, untimed (``--first-reps`` processes each): what the first
series over a catalog costs, without what any session pays once (importing
xarray, dask, librumi, pyproj and rumi_xarray's reading modules).

The engine limit is the fastest engine arm. ``read_many`` does not share
decoded frames between items, so a 1 x 1 window per pixel decodes a pixel's
whole frame once per pixel: ``engine 1x1`` shows what that costs when many
pixels share a tile. Runs are interleaved (a warm-up
round whose results are checked against each other, then ``--reps`` rounds);
medians of wall time are printed with CPU time, native calls (``rx.stats()``)
and, over the loopback HTTP server with ``--latency-ms`` per request
(``benchmarks/httpserve.py``), requests and bytes per run.

Bars (exit status 1 when one is missed): ``ours`` <= 1.25x the engine limit
and faster than ``rasterio``, locally and over HTTP.
"""

from __future__ import annotations

import argparse
import os
import runpy
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ENGINE_BAR = 1.25
REGEX = r"_(\d{8})_"
#: GDAL's settings for reading the COGs over HTTP (benchmarks/explore_click.py uses them too).
GDAL_HTTP = {"GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
             "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif",
             "VSI_CACHE": "FALSE"}


def prepare(root: Path, scenes: int, size: int, series: bool = True) -> None:
    """Write the GeoTIFFs, the Rumi scene files + catalog, a series file and the COGs.

    ``series=False`` leaves the series file out.
    """
    import rumi_xarray as rx

    ingest = runpy.run_path(str(HERE / "outfile.py"))["bench_module"]("ingest")
    (root / "src").mkdir(parents=True)
    sources = [str(p) for p in ingest.make_scenes(root / "src", scenes, size)]
    rx.ingest(sources, root / "scene", time=REGEX, max_workers=0, progress=False)
    if series:
        rx.ingest(sources, root / "series", time=REGEX, layout="series", max_workers=0,
                  progress=False)
    (root / "cog").mkdir()
    for src in sources:
        ingest._cog((src, str(root / "cog" / Path(src).name)))


def url_table(root: Path, base: str) -> Path:
    """Write the catalog of the scene files as served over HTTP (built once, untimed)."""
    import rumi_xarray as rx

    names = sorted(p.name for p in (root / "scene").glob("*.rumi"))
    out = root / "http-catalog.parquet"
    rx.catalog([f"{base}/scene/{n}" for n in names]).to_parquet(out)
    return out


# --- arms --------------------------------------------------------------------------------


def ours(table: Path, pixels: np.ndarray) -> np.ndarray:
    import xarray as xr

    import rumi_xarray as rx

    ds = rx.open_catalog(table, mask_and_scale=False)
    return ds["band_data"].isel(y=xr.DataArray(pixels[:, 0]),
                                x=xr.DataArray(pixels[:, 1])).values


def _rows(table: Path) -> tuple[list[str], list[bytes]]:
    """Paths and headers of the table's rows, in time order (what any reader needs first)."""
    import pyarrow.parquet as pq

    t = pq.read_table(table, columns=["path", "header", "time_seconds"]).to_pydict()
    order = sorted(range(len(t["path"])), key=lambda i: t["time_seconds"][i])
    folder = str(Path(table).parent)
    paths = [p if "://" in p or p.startswith("/") else os.path.join(folder, p)
             for p in (t["path"][i] for i in order)]
    return paths, [t["header"][i] for i in order]


def engine_points(table: Path, pixels: np.ndarray) -> np.ndarray:
    import rumi

    paths, headers = _rows(table)
    n = len(pixels)
    windows = [(int(r), int(c), 1, 1) for r, c in pixels]
    got = rumi.read_many([p for p in paths for _ in range(n)],
                         [h for h in headers for _ in range(n)],
                         windows=windows * len(paths), pattern="n t b y x")
    # (scenes * pixels, 1, bands, 1, 1) -> (scenes, bands, pixels)
    return got.reshape(len(paths), n, -1).transpose(0, 2, 1)


def engine_cells(table: Path, pixels: np.ndarray, tile: int) -> np.ndarray:
    import rumi

    paths, headers = _rows(table)
    cells: dict[tuple[int, int], np.ndarray] = {}
    keys = (pixels[:, 0] // tile) * 10**6 + pixels[:, 1] // tile
    for key in np.unique(keys):
        cells[(int(key) // 10**6, int(key) % 10**6)] = np.flatnonzero(keys == key)
    by_size: dict[tuple[int, int], list[tuple[int, int, np.ndarray]]] = {}
    for members in cells.values():
        ys, xs = pixels[members, 0], pixels[members, 1]
        r0, c0 = int(ys.min()), int(xs.min())
        size = (int(ys.max()) - r0 + 1, int(xs.max()) - c0 + 1)
        by_size.setdefault(size, []).append((r0, c0, members))
    out: np.ndarray | None = None
    for (h, w), parts in by_size.items():
        got = rumi.read_many([p for p in paths for _ in parts],
                             [hd for hd in headers for _ in parts],
                             windows=[(r0, c0, h, w) for r0, c0, _ in parts] * len(paths),
                             pattern="n t b y x")
        if out is None:
            out = np.empty((len(paths), got.shape[2], len(pixels)), dtype=got.dtype)
        got = got.reshape(len(paths), len(parts), *got.shape[1:])
        for k, (r0, c0, members) in enumerate(parts):
            out[:, :, members] = got[:, k, 0][..., pixels[members, 0] - r0,
                                              pixels[members, 1] - c0]
    assert out is not None
    return out


def engine_one_call(table: Path, pixels: np.ndarray, tile: int, size: int) -> np.ndarray:
    """One ``read_many`` of every touched (scene, cell): one window size, the largest box."""
    import rumi

    paths, headers = _rows(table)
    keys = (pixels[:, 0] // tile) * 10**6 + pixels[:, 1] // tile
    boxes = []
    for key in np.unique(keys):
        members = np.flatnonzero(keys == key)
        ys, xs = pixels[members, 0], pixels[members, 1]
        boxes.append((int(ys.min()), int(xs.min()), int(ys.max()), int(xs.max()), members))
    h = max(b[2] - b[0] + 1 for b in boxes)
    w = max(b[3] - b[1] + 1 for b in boxes)
    windows = []
    for y0, x0, _, _, _ in boxes:  # moved back inside the cell (and the raster) to fit
        cell_y, cell_x = y0 // tile * tile, x0 // tile * tile
        windows.append((min(y0, min(cell_y + tile, size) - h),
                        min(x0, min(cell_x + tile, size) - w)))
    got = rumi.read_many([p for p in paths for _ in boxes], [hd for hd in headers for _ in boxes],
                         windows=[(r, c, h, w) for r, c in windows] * len(paths),
                         pattern="n t b y x")
    got = got.reshape(len(paths), len(boxes), *got.shape[1:])
    out = np.empty((len(paths), got.shape[3], len(pixels)), dtype=got.dtype)
    for k, ((r0, c0), box) in enumerate(zip(windows, boxes, strict=True)):
        members = box[4]
        out[:, :, members] = got[:, k, 0][..., pixels[members, 0] - r0, pixels[members, 1] - c0]
    return out


def rasterio_sample(cogs: list[str], pixels: np.ndarray) -> np.ndarray:
    import rasterio

    out = []
    for path in cogs:
        with rasterio.open(path) as src:
            xs, ys = src.xy(pixels[:, 0], pixels[:, 1])
            out.append(np.stack(list(src.sample(zip(xs, ys, strict=True))), axis=1))
    return np.stack(out)


def series_file(paths: list[str], pixels: np.ndarray) -> np.ndarray:
    import xarray as xr

    ds = xr.open_mfdataset(paths, engine="rumi", mask_and_scale=False) if len(paths) > 1 \
        else xr.open_dataset(paths[0], engine="rumi", mask_and_scale=False)
    return ds["band_data"].isel(y=xr.DataArray(pixels[:, 0]),
                                x=xr.DataArray(pixels[:, 1])).values


# --- runs --------------------------------------------------------------------------------


def measure(arms: dict[str, Callable[[], np.ndarray]], reps: int, server: Any = None
            ) -> dict[str, dict[str, float]]:
    """Interleave the arms: a checked warm-up round, then ``reps`` timed rounds."""
    import rumi_xarray as rx

    results: dict[str, list[dict[str, float]]] = {k: [] for k in arms}
    first: np.ndarray | None = None
    for rnd in range(reps + 1):
        for name, fn in arms.items():
            rx.clear_cache()
            rx.stats(reset=True)
            if server is not None:
                server.reset()
            wall, cpu = time.perf_counter(), time.process_time()
            got = fn()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            row = {"wall": wall, "cpu": cpu, "calls": rx.stats()["calls"]}
            if server is not None:
                st = server.stats()
                row.update(requests=st["requests"], bytes=st["bytes"])
            if rnd == 0:
                got = np.asarray(got)
                if first is None:
                    first = got
                elif not np.array_equal(got, first):
                    raise AssertionError(f"{name} differs from {next(iter(arms))}")
                continue
            results[name].append(row)
    return {k: {f: statistics.median(r[f] for r in v) for f in v[0]}
            for k, v in results.items()}


def engine_limit(res: dict[str, dict[str, float]]) -> float:
    """Return the fastest engine arm's median wall time."""
    return min(m["wall"] for k, m in res.items() if k.startswith("engine"))


def table_lines(title: str, res: dict[str, dict[str, float]]) -> list[str]:
    limit = engine_limit(res)
    remote = "requests" in res["ours"]
    head = f"{'arm':<16} {'wall s':>8} {'cpu s':>7} {'x limit':>8} {'calls':>6}"
    if remote:
        head += f" {'requests':>9} {'MiB':>7}"
    lines = [title, head]
    for name, m in res.items():
        line = (f"{name:<16} {m['wall']:8.3f} {m['cpu']:7.3f} {m['wall'] / limit:8.2f} "
                f"{int(m['calls']) if name in ('ours', 'series file') else '':>6}")
        if remote:
            line += f" {int(m['requests']):9d} {m['bytes'] / 2**20:7.2f}"
        lines.append(line)
    return lines


def bars(where: str, res: dict[str, dict[str, float]]) -> tuple[list[str], bool]:
    limit = engine_limit(res)
    ratio = res["ours"]["wall"] / limit
    vs_rio = res["ours"]["wall"] / res["rasterio"]["wall"]
    ok_engine, ok_rio = ratio <= ENGINE_BAR, vs_rio < 1.0
    return ([f"{where}: ours / engine limit = {ratio:.2f} (bar <= {ENGINE_BAR}) -> "
             f"{'PASS' if ok_engine else 'FAIL'}; ours / rasterio = {vs_rio:.2f} (bar < 1) -> "
             f"{'PASS' if ok_rio else 'FAIL'}"], ok_engine and ok_rio)


#: Arms timed again as the first call of a fresh process (the 1 x 1 arm is left out: slow).
FIRST = ("ours", "engine cells", "engine 1 call", "rasterio", "series file")


#: Scenes and size of the small copy a fresh process reads first (see :func:`first_call`).
WARM = (2, 256)


def _arm(root: Path, arm: str, pixels: int, size: int) -> Callable[[], Any]:
    """Return one arm over the data in ``root`` (scenes of ``size`` pixels)."""
    import rumi

    px = np.random.default_rng(1).integers(0, size, (pixels, 2))
    tile = int(rumi.info(source=str(next((root / "scene").glob("*.rumi")))).tile[0])
    table = root / "scene" / "catalog.parquet"
    cogs = sorted(str(p) for p in (root / "cog").glob("*.tif"))
    series = sorted(str(p) for p in (root / "series").glob("*.rumi"))
    return {
        "ours": lambda: ours(table, px),
        "engine cells": lambda: engine_cells(table, px, tile),
        "engine 1 call": lambda: engine_one_call(table, px, tile, size),
        "rasterio": lambda: rasterio_sample(cogs, px),
        "series file": lambda: series_file(series, px),
    }[arm]


def first_call(root: Path, arm: str, pixels: int, size: int) -> dict[str, float]:
    """Child side of ``--first``: time the first read of these files in a fresh process.

    The process first reads a small copy of the data (:data:`WARM`, other
    files) through the same arm, untimed: what any session pays once (imports:
    xarray, dask, librumi, pyproj, the reading modules of rumi_xarray, GDAL's
    drivers) is left out; what the first read of *these* files costs is in
    (their table's footers, librumi's first plans of them).
    """
    _arm(root / "warm", arm, pixels, WARM[1])()
    run = _arm(root, arm, pixels, size)
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}


def measure_first(root: Path, args: argparse.Namespace, threads: int
                  ) -> dict[str, dict[str, float]]:
    """Run each arm as the first call of a fresh process, ``args.first_reps`` times."""
    import json
    import subprocess

    env = dict(os.environ, RUMI_NUM_THREADS=str(threads))  # the same pool in every child
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in FIRST}
    for _ in range(args.first_reps):
        for arm in FIRST:
            out = subprocess.run(
                [sys.executable, __file__, "--first", arm, "--data-dir", str(root),
                 "--pixels", str(args.pixels), "--size", str(args.size)],
                check=True, capture_output=True, text=True, env=env).stdout
            runs[arm].append(json.loads(out.strip().splitlines()[-1]))
    return {k: {f: statistics.median(r[f] for r in v) for f in ("wall", "cpu")}
            for k, v in runs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=8)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--pixels", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the data here and reuse it when present (default: a "
                             "temporary folder, removed)")
    parser.add_argument("--first-reps", type=int, default=3,
                        help="fresh processes per arm for the first-call table (0: none)")
    parser.add_argument("--first", default=None, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args(argv)
    if args.first is not None:
        import json

        print(json.dumps(first_call(args.data_dir, args.first, args.pixels, args.size)))
        return 0
    outfile = runpy.run_path(str(HERE / "outfile.py"))
    import rumi

    import rumi_xarray as rx

    root = args.data_dir or Path(tempfile.mkdtemp(prefix="rumi-pixel-series-"))
    stamp = root / f"made-{args.scenes}x{args.size}"
    try:
        if not stamp.exists():
            shutil.rmtree(root, ignore_errors=True)
            prepare(root, args.scenes, args.size)
            prepare(root / "warm", *WARM)  # what fresh processes read first
            stamp.touch()
        data = {"table": root / "scene" / "catalog.parquet",
                "series": sorted(str(p) for p in (root / "series").glob("*.rumi")),
                "cogs": sorted(p.name for p in (root / "cog").glob("*.tif"))}
        tile = int(rumi.info(source=str(next((root / "scene").glob("*.rumi")))).tile[0])
        pixels = np.random.default_rng(1).integers(0, args.size, (args.pixels, 2))
        cogs = [str(root / "cog" / n) for n in data["cogs"]]
        local = {
            "ours": lambda: ours(data["table"], pixels),
            "engine 1x1": lambda: engine_points(data["table"], pixels),
            "engine cells": lambda: engine_cells(data["table"], pixels, tile),
            "engine 1 call": lambda: engine_one_call(data["table"], pixels, tile, args.size),
            "rasterio": lambda: rasterio_sample(cogs, pixels),
            "series file": lambda: series_file(data["series"], pixels),
        }
        res = measure(local, args.reps)
        # After the first read: rumi_xarray sizes librumi's thread pool (for every arm) then.
        lines = [f"{args.pixels} pixels x {args.scenes} dates x 3 bands of {args.size}^2 uint16 "
                 f"scenes (tiles {tile}); rx {rx.__version__}, rumi {rumi.__version__}, "
                 f"{rumi.get_num_threads()} native threads; median of {args.reps} interleaved "
                 f"runs after a checked warm-up", ""]
        lines += table_lines("local files:", res)
        verdict, ok = bars("local", res)
        if args.first_reps:
            first = measure_first(root, args, rumi.get_num_threads())
            limit = min(first["engine cells"]["wall"], first["engine 1 call"]["wall"])
            lines += ["", f"first read of these files in a fresh process (after an untimed read "
                          f"of other files: imports excluded; median of {args.first_reps} "
                          f"processes):",
                      f"{'arm':<16} {'wall s':>8} {'cpu s':>7} {'x limit':>8}"]
            lines += [f"{k:<16} {m['wall']:8.3f} {m['cpu']:7.3f} {m['wall'] / limit:8.2f}"
                      for k, m in first.items()]
        if not args.no_http:
            httpserve = outfile["bench_module"]("httpserve")
            for key, value in GDAL_HTTP.items():
                os.environ.setdefault(key, value)
            with httpserve.ServerProcess(root, latency_ms=args.latency_ms) as server:
                table = url_table(root, server.base_url)
                run = iter(range(10**6))
                remote = {
                    "ours": lambda: ours(table, pixels),
                    "engine 1x1": lambda: engine_points(table, pixels),
                    "engine cells": lambda: engine_cells(table, pixels, tile),
                    "engine 1 call": lambda: engine_one_call(table, pixels, tile, args.size),
                    # A fresh URL per run: GDAL's /vsicurl/ caches what it read per URL.
                    "rasterio": lambda: rasterio_sample(
                        [f"/vsicurl/{server.base_url}/cog/{n}?run={next(run)}"
                         for n in data["cogs"]], pixels),
                    "series file": lambda: series_file(
                        [f"{server.base_url}/series/{Path(p).name}" for p in data["series"]],
                        pixels),
                }
                res = measure(remote, args.reps, server)
            lines += ["", f"over HTTP ({args.latency_ms:g} ms per request, loopback; the "
                          f"catalog table local, its paths URLs):"]
            lines += table_lines("", res)[1:]
            more, ok_http = bars("HTTP", res)
            verdict += more
            ok = ok and ok_http
        lines += ["", *verdict]
        outfile["save"]("pixel-series", lines)
        return 0 if ok else 1
    finally:
        if args.data_dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
