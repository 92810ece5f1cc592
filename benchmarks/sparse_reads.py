"""Sparse reads at the engine limit (issue 14): points, pixel series, chips, lazy full load.

Usage::

    python benchmarks/sparse_reads.py                 # local + HTTP (20 ms latency server), ~5 min
    python benchmarks/sparse_reads.py --no-http       # local only
    python benchmarks/sparse_reads.py --pause 0       # back to back only

One interleaved run (reader A, B, C, A, B, C, ...; a fresh tile cache before
every timed read) compares, per workload:

- ``engine``: ``rumi.read`` of exactly the needed windows -- per point for
  scattered points (what the bytes bar is measured against), per touched
  tile cell for the pixel series (each needed frame decoded once), per chip,
  one call for the full load;
- ``lazy``: ``xr.open_dataset(p, engine="rumi")`` (lazily indexed);
- ``dask``: ``xr.open_dataset(p, engine="rumi", chunks={})``;
- ``zarr``: the same data as Zarr v3 (xarray + dask, chunks = tiles);
- ``geotiff``: tiled ZSTD GeoTIFFs through rioxarray (dask, chunks = tiles).

Workloads: ``points`` -- 50 scattered points on an 8192^2 single-band file
with 256^2 tiles (bytes fetched and frames decoded); ``series`` -- the
200-point vectorized pixel series (``isel(y=DataArray, x=DataArray)``, all
12 dates x 4 bands) on the 12 x 4 x 2048^2 cube of ``benchmarks/datagen.py``;
``chips`` -- 50 random 256^2 chips, one date, 4 bands, one ``isel`` per
chip; ``full`` -- a whole load (``lazy-read``: the read of a file opened
before the clock starts). Each is timed back to back and again with a pause
before every timed read (as a notebook user has between cells; Zarr back to
back only, no bar concerns it), locally (a warm-up round, then medians) and
over the benchmark HTTP server (with its latency option when
``benchmarks/httpserve.py`` has one). Every reader's result is checked
against ``rumi.read`` once. It prints medians, ratios and the issue's bars:
points bytes <= 1.5x per-point ``rumi.read``; series >= 2x faster than
GeoTIFF; chips <= 1.25x the engine; lazy full load <= 1.1x the engine.
This is a benchmark, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# This file is named like the pydata "sparse" package that dask and xarray
# try to import: keep its folder off sys.path (Python puts it first) and load
# the helper modules next to it by path instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def _helper(name: str) -> Any:
    """Import ``benchmarks/<name>.py`` (datagen, httpserve, run) without sys.path."""
    import importlib.util

    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]

#: The bars of issue 14.
POINT_BYTES_BAR, SERIES_BAR, CHIPS_BAR, FULL_BAR = 1.5, 2.0, 1.25, 1.1
POINTS_SIZE, POINTS_TILE = 8192, 256
CHIP, CHIP_DATE = 256, 5
PATTERN = "t b y x"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3, help="timed back-to-back repetitions")
    p.add_argument("--pause", type=float, default=3.0,
                   help="seconds of idleness before each paused timed read (0: no paused runs)")
    p.add_argument("--paused-reps", type=int, default=2,
                   help="paused repetitions (Zarr left out: no bar concerns it)")
    p.add_argument("--http-reps", type=int, default=2,
                   help="timed back-to-back repetitions over HTTP (the first checks results)")
    p.add_argument("--http-paused-reps", type=int, default=1,
                   help="paused repetitions over HTTP")
    p.add_argument("--latency-ms", type=float, default=20.0,
                   help="request latency of the HTTP server (when httpserve supports it)")
    p.add_argument("--no-http", action="store_true")
    p.add_argument("--no-local", action="store_true")
    p.add_argument("--workloads", default="points,series,chips,full")
    p.add_argument("--readers", default="",
                   help="comma-separated readers to run (default: all), e.g. lazy to time "
                        "a process that only reads lazily")
    p.add_argument("--full-peers", action="store_true",
                   help="also time Zarr and GeoTIFF full loads (slow; run.py covers them)")
    p.add_argument("--json", type=Path, default=None, help="write every measurement here")
    return p.parse_args(argv)


# --- data -------------------------------------------------------------------------


@dataclass
class Data:
    """Paths of the stores (relative to the data folder) and facts about them."""

    root: Path
    cube_header: bytes
    points_header: bytes
    dates: list[Any]
    tifs: list[str]
    points_tif: str
    codec: str


def prepare_points(root: Path, codec: str) -> bytes:
    """Write (or reuse) the 8192^2 single-band file as Rumi, Zarr v3 and GeoTIFF."""
    import numpy as np

    from rumi_xarray.write.to_rumi import write_array

    datagen = _helper("datagen")
    folder = root / "sparse"
    manifest = folder / "manifest.json"
    spec = {"size": POINTS_SIZE, "tile": POINTS_TILE, "codec": codec, "version": 1}
    if manifest.exists():
        saved = json.loads(manifest.read_text())
        if saved.get("spec") == spec and all((folder / n).exists()
                                             for n in ("points.rumi", "points.zarr",
                                                       "tif/t00.tif")):
            return bytes.fromhex(saved["header"])
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rng = np.random.default_rng(4242)
    n = POINTS_SIZE
    plane = datagen.smooth_field(rng, n, ((4, 1.0), (16, 0.5), (256, 0.25), (1024, 0.12)))
    plane *= 0.35 * 1000
    plane += 1000 + 25 * rng.standard_normal((n, n), dtype=np.float32)
    np.clip(plane, 1, 65535, out=plane)
    data = plane.astype(np.uint16)[np.newaxis, np.newaxis]
    del plane
    dates = datagen.dates_for(1)
    header = write_array(folder / "points.rumi", data, bands=[datagen.BAND_NAMES[0]],
                         time=dates, transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 5000000.0),
                         crs=datagen.EPSG, tile_size=POINTS_TILE, codec=codec, frame="plane")
    datagen.write_zarr(folder / "points.zarr", data, dates, POINTS_TILE)
    datagen.write_tifs(folder / "tif", data, POINTS_TILE)
    manifest.write_text(json.dumps({"spec": spec, "header": header.hex()}))
    print(f"wrote {folder} (8192^2, tile 256, {codec}) in {time.perf_counter() - t0:.1f} s")
    return header


# --- queries and readers -------------------------------------------------------------


@dataclass(frozen=True)
class Queries:
    points: tuple[Any, Any]  # on the 8192^2 file
    pixels: tuple[Any, Any]  # on the cube
    chips: tuple[tuple[int, int], ...]
    cells: dict[tuple[int, int], Any] = field(hash=False)  # series pixels by tile cell

    @classmethod
    def make(cls, cube_size: int, tile: int) -> Queries:
        import numpy as np

        rng = np.random.default_rng(14)
        points = (rng.integers(0, POINTS_SIZE, 50), rng.integers(0, POINTS_SIZE, 50))
        pixels = (rng.integers(0, cube_size, 200), rng.integers(0, cube_size, 200))
        corners = rng.integers(0, cube_size - CHIP + 1, (50, 2))
        cells: dict[tuple[int, int], list[int]] = {}
        for i, (y, x) in enumerate(zip(*pixels, strict=True)):
            cells.setdefault((int(y) // tile, int(x) // tile), []).append(i)
        return cls(points, pixels, tuple((int(r), int(c)) for r, c in corners),
                   {k: np.asarray(v) for k, v in cells.items()})


@dataclass
class Where:
    """Where the stores are read from: local paths or URLs, and the server if any."""

    name: str
    rumi: str
    zarr: str
    tifs: list[str]
    points: str
    points_zarr: str
    points_tif: str
    server: Any = None


#: A reader: ``setup(where, run)`` before the clock starts (``None``: nothing to
#: prepare), then ``work(where, run, prepared)`` timed.
Reader = tuple[Callable[[Where, int], Any] | None, Callable[[Where, int, Any], Any]]


def timed(fn: Callable[[Where, int], Any]) -> Reader:
    """Return a reader timed as a whole (opening included, as users pay it)."""
    return None, lambda w, r, _: fn(w, r)


def _lazy(path: str, chunks: Any = None) -> Any:
    import xarray as xr

    if chunks is None:
        return xr.open_dataset(path, engine="rumi").band_data
    return xr.open_dataset(path, engine="rumi", chunks=chunks).band_data


def _zarr(path: str) -> Any:
    import xarray as xr

    return xr.open_dataset(path, engine="zarr", chunks={}).band_data


def _tifs(paths: list[str], dates: list[Any], run: int, remote: bool, chunks: int) -> Any:
    import numpy as np
    import pandas as pd
    import rioxarray
    import xarray as xr

    # GDAL's /vsicurl/ caches file sizes and headers per URL across opens: a
    # query the server ignores makes every run a first read.
    suffix = f"?run={run}" if remote else ""
    arrays = [rioxarray.open_rasterio(p + suffix, chunks=chunks, lock=False) for p in paths]
    if len(arrays) == 1:
        return arrays[0].expand_dims(time=np.array(dates[:1], dtype="datetime64[ns]"))
    return xr.concat(arrays, dim=pd.Index(np.array(dates, dtype="datetime64[ns]"),
                                          name="time"))


def readers(data: Data, q: Queries, full_peers: bool) -> dict[str, dict[str, Reader]]:
    """Return workload -> reader -> callable(where, run) returning a canonical array."""
    import numpy as np
    import rumi
    import xarray as xr

    py, px = q.points
    sy, sx = q.pixels
    dates = data.dates

    def pts(arr: Any) -> Any:
        return arr.isel(time=0, band=0, y=xr.DataArray(py, dims="p"),
                        x=xr.DataArray(px, dims="p")).values

    def series(arr: Any) -> Any:
        picked = arr.isel(y=xr.DataArray(sy, dims="p"), x=xr.DataArray(sx, dims="p"))
        return picked.transpose("p", "time", "band").values

    def chips(arr: Any) -> Any:
        return np.stack([arr.isel(time=CHIP_DATE, y=slice(r, r + CHIP), x=slice(c, c + CHIP))
                         .values for r, c in q.chips])

    def engine_points(w: Where, run: int) -> Any:
        return np.array([rumi.read(w.points, data.points_header, window=(int(y), int(x), 1, 1),
                                   pattern=PATTERN)[0, 0, 0, 0] for y, x in zip(py, px,
                                                                                 strict=True)])

    def engine_series(w: Where, run: int) -> Any:
        # Exactly the needed windows: per touched cell, the window around its
        # pixels, all dates and bands -- every needed frame decoded once.
        out = np.empty((len(sy), len(dates), 4), dtype=np.uint16)
        for members in q.cells.values():
            ys, xs = sy[members], sx[members]
            y0, x0 = int(ys.min()), int(xs.min())
            block = rumi.read(w.rumi, data.cube_header, pattern=PATTERN,
                              window=(y0, x0, int(ys.max()) - y0 + 1, int(xs.max()) - x0 + 1))
            out[members] = block[:, :, ys - y0, xs - x0].transpose(2, 0, 1)
        return out

    def engine_chips(w: Where, run: int) -> Any:
        return np.stack([rumi.read(w.rumi, data.cube_header, time=[CHIP_DATE],
                                   window=(r, c, CHIP, CHIP), pattern=PATTERN)[0]
                         for r, c in q.chips])

    def engine_full(w: Where, run: int) -> Any:
        return rumi.read(w.rumi, data.cube_header, pattern=PATTERN)

    def tif(w: Where, run: int) -> Any:
        return _tifs(w.tifs, dates, run, w.server is not None, 512)

    def workload(engine: Callable[[Where, int], Any], pick: Any, rumi_of: Any = lambda w: w.rumi,
                 zarr_of: Any = lambda w: w.zarr, tif_of: Any = tif) -> dict[str, Reader]:
        """The engine and the four readers of one workload, ``pick`` applied to each array."""
        return {
            "engine": timed(engine),
            "lazy": timed(lambda w, r: pick(_lazy(rumi_of(w)))),
            "dask": timed(lambda w, r: pick(_lazy(rumi_of(w), {}))),
            "zarr": timed(lambda w, r: pick(_zarr(zarr_of(w)))),
            "geotiff": timed(lambda w, r: pick(tif_of(w, r))),
        }

    out: dict[str, dict[str, Reader]] = {
        "points": workload(engine_points, pts, lambda w: w.points, lambda w: w.points_zarr,
                           lambda w, r: _tifs([w.points_tif], dates, r, w.server is not None,
                                              POINTS_TILE)),
        "series": workload(engine_series, series),
        "chips": workload(engine_chips, chips),
        "full": {
            "engine": timed(engine_full),
            "lazy": timed(lambda w, r: _lazy(w.rumi).values),
            # The read alone: opened before the clock starts (the engine is
            # handed the header; opening reads the file's metadata).
            "lazy-read": (lambda w, r: _lazy(w.rumi), lambda w, r, arr: arr.values),
            "dask": timed(lambda w, r: _lazy(w.rumi, {}).values),
        },
    }
    if full_peers:
        out["full"]["zarr"] = timed(lambda w, r: _zarr(w.zarr).values)
        out["full"]["geotiff"] = timed(lambda w, r: tif(w, r).values)
    return out


def engine_frames(workload: str, data: Data, q: Queries, w: Where) -> tuple[int, int]:
    """Return (frames, compressed bytes) the engine reads plan, from the headers alone."""
    from rumi_xarray.model.cube import Scene
    from rumi_xarray.native.reads import plan_ranges

    cube, points = Scene(w.rumi, data.cube_header), Scene(w.points, data.points_header)
    plans = []
    if workload == "points":
        plans = [plan_ranges(points, None, None, int(y), int(x), 1, 1)
                 for y, x in zip(*q.points, strict=True)]
    elif workload == "series":
        sy, sx = q.pixels
        for members in q.cells.values():
            ys, xs = sy[members], sx[members]
            plans.append(plan_ranges(cube, None, None, int(ys.min()), int(xs.min()),
                                     int(ys.max() - ys.min()) + 1, int(xs.max() - xs.min()) + 1))
    elif workload == "chips":
        plans = [plan_ranges(cube, [CHIP_DATE], None, r, c, CHIP, CHIP) for r, c in q.chips]
    else:
        plans = [plan_ranges(cube, None, None, 0, 0, 2048, 2048)]
    return sum(len(p) for p in plans), sum(n for p in plans for _, n in p)


# --- measurement ----------------------------------------------------------------------


def measure(where: Where, workload: str, fns: dict[str, Reader], reps: int, pause: float,
            warmup: bool, rx: Any) -> dict[str, dict[str, Any]]:
    """Time every reader on one workload, interleaved, checking every result once.

    Results are compared with the engine's in the first round: a warm-up
    round when ``warmup``, else the first timed round.
    """
    import numpy as np

    rows = {k: {"times": [], "cpu": [], "calls": [], "frames": [], "decoded": [],
                "requests": [], "bytes": [], "error": None} for k in fns}
    for rnd in range(reps + (1 if warmup else 0)):
        reference = None
        for key, (setup, work) in fns.items():
            row = rows[key]
            if row["error"]:
                continue
            rx.clear_cache()
            try:
                prepared = setup(where, rnd) if setup is not None else None
                gc.collect()
                if pause:
                    time.sleep(pause)
                if where.server is not None:
                    where.server.reset()
                rx.stats(reset=True)
                wall0, cpu0 = time.perf_counter(), time.process_time()
                out = work(where, rnd, prepared)
                wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            except Exception as exc:  # report it and keep going with the others
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                print(f"\n  {where.name} {workload} {key} failed: {row['error']}", flush=True)
                continue
            s = rx.stats()
            served = where.server.stats() if where.server is not None else None
            if rnd == 0 and pause == 0:
                if reference is None:
                    reference = np.asarray(out)
                elif not np.array_equal(np.asarray(out), reference):
                    row["error"] = "result differs from rumi.read"
                    print(f"\n  {where.name} {workload} {key}: RESULT DIFFERS", flush=True)
                    continue
                if warmup:
                    continue
            row["times"].append(wall)
            row["cpu"].append(cpu)
            row["calls"].append(s["calls"])
            # "frames" in checkouts before issue 20 (measured with PYTHONPATH for "before")
            row["frames"].append(s.get("planned_frames", s.get("frames", 0)))
            row["decoded"].append(s["bytes"])
            if served is not None:
                row["requests"].append(served["requests"])
                row["bytes"].append(served["bytes"])
            del out, prepared
        print("w" if warmup and rnd == 0 else ".", end="", flush=True)
    for row in rows.values():
        for k in ("times", "cpu", "calls", "frames", "decoded", "requests", "bytes"):
            row[k + "_median"] = statistics.median(row[k]) if row[k] else math.nan
    return rows


def _fmt(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def table(title: str, rows: dict[str, dict[str, Any]], engine: tuple[int, int] | None) -> str:
    eng = rows.get("engine", {}).get("times_median", math.nan)
    tif = rows.get("geotiff", {}).get("times_median", math.nan)
    lines = [title, f"  {'reader':9s} {'median s':>9s} {'x engine':>9s} {'tiff/x':>7s} "
                    f"{'cpu s':>7s} {'calls':>6s} {'planned frames':>14s} {'returned MB':>11s} "
                    f"{'requests':>8s} {'fetched MB':>10s}"]
    for key, row in rows.items():
        t = row["times_median"]
        frames = row["frames_median"]
        if key == "engine" and engine is not None:
            frames = engine[0]
        if row["error"]:
            lines.append(f"  {key:9s} {row['error']}")
            continue
        lines.append(
            f"  {key:9s} {_fmt(t):>9s} {_fmt(t / eng, 2):>9s} {_fmt(tif / t, 2):>7s} "
            f"{_fmt(row['cpu_median'], 2):>7s} {_fmt(row['calls_median'], 0):>6s} "
            f"{_fmt(frames, 0):>14s} {_fmt(row['decoded_median'] / 1e6, 1):>11s} "
            f"{_fmt(row['requests_median'], 0):>8s} {_fmt(row['bytes_median'] / 1e6, 2):>10s}")
    return "\n".join(lines)


def verdicts(results: dict[tuple[str, str, str], dict[str, dict[str, Any]]]) -> list[str]:
    """Return one line per bar and location/mode: MET or MISSED with the ratio."""
    out = []
    for (where, mode, workload), rows in results.items():
        lazy = rows.get("lazy", {})
        engine = rows.get("engine", {})
        tif = rows.get("geotiff", {})
        if workload == "points" and where != "local" and mode == "back to back":
            ratio = lazy.get("bytes_median", math.nan) / engine.get("bytes_median", math.nan)
            out.append(_verdict(f"{where}: points bytes lazy / per-point rumi.read", ratio,
                                POINT_BYTES_BAR, upper=True))
        if workload == "series":
            ratio = tif.get("times_median", math.nan) / lazy.get("times_median", math.nan)
            out.append(_verdict(f"{where} {mode}: series, GeoTIFF time / lazy time", ratio,
                                SERIES_BAR, upper=False))
        if workload == "chips":
            ratio = lazy.get("times_median", math.nan) / engine.get("times_median", math.nan)
            out.append(_verdict(f"{where} {mode}: chips, lazy / engine", ratio, CHIPS_BAR,
                                upper=True))
        if workload == "full":
            for key, what in (("lazy", "open + read"), ("lazy-read", "read of an opened file")):
                ratio = (rows.get(key, {}).get("times_median", math.nan)
                         / engine.get("times_median", math.nan))
                out.append(_verdict(f"{where} {mode}: full load, lazy ({what}) / engine",
                                    ratio, FULL_BAR, upper=True))
    return out


def _verdict(label: str, ratio: float, bar: float, upper: bool) -> str:
    if math.isnan(ratio):
        return f"  ?      {label}: not measured"
    ok = ratio <= bar if upper else ratio >= bar
    sign = "<=" if upper else ">="
    return f"  {'MET   ' if ok else 'MISSED'} {label}: {ratio:.2f} (bar {sign} {bar})"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Pin every thread pool before any library that owns one is imported.
    _helper("run").configure_environment(args.threads)
    import dask
    import zarr

    datagen = _helper("datagen")
    server_process = _helper("httpserve").ServerProcess

    import rumi_xarray as rx
    from rumi_xarray.native import process

    # rumi_xarray's librumi settings (checksums on) before the engine's first
    # read, so the engine and rumi_xarray decode with the same settings.
    process.configure()
    dask.config.set(scheduler="threads", num_workers=args.threads)
    zarr.config.set({"threading.max_workers": args.threads})
    started = time.time()
    stores = datagen.prepare(datagen.CubeSpec(times=12, bands=4, size=2048), args.data_dir)
    points_header = prepare_points(args.data_dir, stores.codec)
    data = Data(args.data_dir, stores.header, points_header, stores.dates, stores.tif_names,
                "sparse/tif/t00.tif", stores.codec)
    q = Queries.make(2048, 512)
    workloads = [w for w in args.workloads.split(",") if w]
    fns = readers(data, q, args.full_peers)
    if args.readers:
        wanted = set(args.readers.split(","))
        fns = {w: {k: v for k, v in by.items() if k in wanted} for w, by in fns.items()}
    print(f"rumi_xarray from {Path(rx.__file__).parent}; codec {stores.codec}; "
          f"{args.threads} threads; load {os.getloadavg()[0]:.1f}")
    gc.collect()
    gc.freeze()

    results: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    engine_plans: dict[tuple[str, str], tuple[int, int]] = {}

    def run_at(where: Where, reps: int, paused_reps: int, warmup: bool,
               paused_peers: tuple[str, ...]) -> None:
        for w in workloads:
            engine_plans[(where.name, w)] = engine_frames(w, data, q, where)
            print(f"{where.name} {w} back to back: ", end="", flush=True)
            results[(where.name, "back to back", w)] = measure(where, w, fns[w], reps, 0.0,
                                                                warmup, rx)
            print(flush=True)
        if args.pause > 0 and paused_reps > 0:
            for w in workloads:
                if w == "points":
                    continue  # bytes and frames do not depend on the pause
                chosen = {k: v for k, v in fns[w].items()
                          if k not in ("zarr", "geotiff") or k in paused_peers}
                print(f"{where.name} {w} after {args.pause:g} s pauses: ", end="", flush=True)
                results[(where.name, f"{args.pause:g} s pause", w)] = measure(
                    where, w, chosen, paused_reps, args.pause, False, rx)
                print(flush=True)

    root = args.data_dir
    if not args.no_local:
        run_at(Where("local", str(root / "cube.rumi"), str(root / "cube.zarr"),
                     [str(root / t) for t in data.tifs], str(root / "sparse/points.rumi"),
                     str(root / "sparse/points.zarr"), str(root / data.points_tif)),
               args.reps, args.paused_reps, True, ("geotiff",))
    if not args.no_http:
        latency = "latency_ms" in inspect.signature(server_process).parameters
        server = (server_process(root, latency_ms=args.latency_ms) if latency
                  else server_process(root))
        name = f"http+{args.latency_ms:g}ms" if latency and args.latency_ms else "http"
        with server:
            run_at(Where(name, server.url("cube.rumi"), server.url("cube.zarr"),
                         ["/vsicurl/" + server.url(t) for t in data.tifs],
                         server.url("sparse/points.rumi"), server.url("sparse/points.zarr"),
                         "/vsicurl/" + server.url(data.points_tif), server),
                   args.http_reps, args.http_paused_reps, False, ("geotiff",))

    print()
    titles = {"points": "50 scattered points, 8192^2 single band, 256^2 tiles",
              "series": "200-point pixel series, 12 dates x 4 bands, 2048^2",
              "chips": f"50 random {CHIP}^2 chips, one date, 4 bands",
              "full": "full load 12 x 4 x 2048^2 (384 MiB)"}
    for (where, mode, w), rows in results.items():
        print(table(f"{where}, {mode}: {titles[w]}", rows, engine_plans.get((where, w))))
        print()
    print("Bars of issue 14:")
    for line in verdicts(results):
        print(line)
    print(f"\ntotal {time.time() - started:.0f} s; load {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(
            {f"{a} | {b} | {c}": rows for (a, b, c), rows in results.items()}, indent=1,
            default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
