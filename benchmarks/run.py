"""Side-by-side read benchmark: rumi_xarray vs the engine limit, Zarr v3 and GeoTIFF.

Usage::

    python benchmarks/run.py            # full: T=12, B=4, 2048 x 2048 uint16
    python benchmarks/run.py --quick    # T=6, 1024 x 1024, fewer queries (< 1 min)

Builds (or reuses) one deterministic cube in ``./bench-data`` as Rumi (one
file, and one file per date for the catalog reader), Zarr v3 and per-date
tiled GeoTIFFs, then times five workloads (W1 full load, W2 time mean, W3
pixel time series, W4 random chips, W6 a 100x100 chip of one date and band
written as one ``isel`` and as two chains of ``.sel``/``.isel``; the
``xr-tiles`` reader runs W1/W2 with one chunk per frame) locally and again through a loopback
range HTTP server, once per ``--latency-ms`` value (0: W5 of issue 7, every
workload; 20: an object store 20 ms away, ``--latency-workloads``), with the
same thread count everywhere. Runs are interleaved per repetition (A B C A B
C ...) so drifting machine load hits every reader alike; the first round is a
warm-up whose outputs are checked against ``rumi.read``. Results go to
``benchmarks/results/latest.{json,md}``.

This is a benchmark, not a test: it asserts nothing about speed; it prints
where the performance bars of issues 7 and 11 are met or missed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# When a script here runs, benchmarks/ is sys.path[0], where a module may shadow an
# optional package other libraries probe for (a file named like PyPI's `sparse`, which
# dask.array imports when found, once broke dask here). The folder leaves the path; the
# benchmark's own modules are loaded from their files (bench_module()).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def bench_module(name: str) -> Any:
    """Import the module ``benchmarks/<name>.py`` (once) without benchmarks/ on the path."""
    import importlib.util

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / (
        name + ".py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
REPO = HERE.parent

WORKLOAD_TITLES = {
    "full": "W1 full cube load",
    "mean": "W2 time mean",
    "pixels": "W3 pixel time series",
    "chips": "W4 random chips",
    "chain": "W6 chained-selection chip",
}


def configure_environment(threads: int) -> None:
    """Pin every thread pool before any library that owns one is imported.

    librumi sizes its process-wide pool at first use and ignores later
    requests, so ``RUMI_NUM_THREADS`` must be in the environment before
    ``rumi`` (or ``rumi_xarray``, which would otherwise size it from dask's
    ``num_workers``) is imported. The GDAL options are the documented
    cloud-optimised-GeoTIFF settings any rioxarray user over HTTP sets: without
    them GDAL lists directories and probes sidecar files, and the GeoTIFF
    request counts would be a straw man.
    """
    os.environ["RUMI_NUM_THREADS"] = str(threads)
    os.environ.setdefault("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")
    os.environ.setdefault("CPL_VSIL_CURL_ALLOWED_EXTENSIONS", ".tif")
    os.environ.setdefault("GDAL_HTTP_MERGE_CONSECUTIVE_RANGES", "YES")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="small cube and fewer queries; finishes in under a minute")
    p.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--reps", type=int, default=None,
                   help="timed repetitions, median of these (default 5; 3 with --quick)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2,
                   help="dask workers, librumi pool and zarr pool size")
    p.add_argument("--codec", default="auto",
                   help="Rumi codec: a geozl recipe, or 'auto' to profile and pick")
    p.add_argument("--workloads", default="full,mean,pixels,chips,chain")
    p.add_argument("--readers", default="",
                   help="comma-separated reader keys (default: all)")
    p.add_argument("--no-http", action="store_true", help="skip W5 (HTTP)")
    p.add_argument("--no-local", action="store_true", help="only W5 (HTTP)")
    p.add_argument("--latency-ms", default="0,20",
                   help="comma-separated latencies of the HTTP server, one HTTP run each")
    p.add_argument("--latency-workloads", default="full,mean,chain",
                   help="workloads of the HTTP runs with latency > 0")
    p.add_argument("--tag", default="",
                   help="suffix of the result files (e.g. 'before' for an older checkout)")
    return p.parse_args(argv)


def where_name(latency_ms: float) -> str:
    """Return the location label of an HTTP run: ``http`` or ``http+20ms``."""
    return "http" if not latency_ms else f"http+{latency_ms:g}ms"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_environment(args.threads)
    # Imported here, after the environment is set: see configure_environment.
    import dask
    import numpy as np
    import rumi
    import zarr

    datagen, readers, report, scenes = (bench_module(n) for n in ("datagen", "readers", "report",
                                                           "scenes"))
    ServerProcess = bench_module("httpserve").ServerProcess  # noqa: N806 (a class)

    import rumi_xarray as rx
    from rumi_xarray.native import process

    # rumi_xarray's librumi settings (checksums on) before the engine's first read:
    # librumi pins them at the first decoded frame, and the engine arms read first.
    process.configure()
    dask.config.set(scheduler="threads", num_workers=args.threads)
    # zarr v3 decodes in its own thread pool; cap it like every other pool.
    zarr.config.set({"threading.max_workers": args.threads})

    started = time.time()
    if args.reps is None:
        # --quick is the harness's smoke test and must stay under a minute on
        # 2 busy cores; the full run keeps the median of 5 the bar asks for.
        args.reps = 3 if args.quick else 5
    if args.quick:
        spec = datagen.CubeSpec(times=6, bands=4, size=1024, codec=args.codec)
        n_pixels, n_chips = 20, 6
        data_dir = args.data_dir / "quick"  # inside ./bench-data, which git ignores
    else:
        spec = datagen.CubeSpec(times=12, bands=4, size=2048, codec=args.codec)
        n_pixels, n_chips = 200, 50
        data_dir = args.data_dir
    stores = datagen.prepare(spec, data_dir)
    print_stores(stores, spec)
    scene_paths = scenes.prepare(stores)

    queries = readers.Queries.make(spec.size, n_pixels, n_chips, 256)
    workloads = [w for w in args.workloads.split(",") if w]
    wanted = {r for r in args.readers.split(",") if r}
    chosen = [r for r in readers.READERS if (r.key in wanted if wanted else r.default)]
    if "engine" not in {r.key for r in chosen}:
        chosen.insert(0, readers.READERS[0])  # the reference every check and ratio needs

    truth = np.load(stores.root / "truth-checksums.npy")
    if not np.array_equal(datagen.checksums(rumi.read(str(stores.rumi), stores.header,
                                                      pattern=readers.PATTERN)), truth):
        raise SystemExit(f"{stores.rumi} does not hold the generated cube; delete {data_dir}")

    # Every run starts with gc.collect() so one reader's garbage is not
    # collected on the next reader's clock. Freezing what exists now (modules,
    # the data stores' metadata) keeps those collections at milliseconds
    # instead of re-scanning a million long-lived objects 100+ times.
    gc.collect()
    gc.freeze()
    results: list[dict[str, Any]] = []
    meta = environment(args, spec, stores, rx, rumi, zarr, n_pixels, n_chips)
    dates = tuple(stores.dates)
    wants_catalog = any(r.key.startswith(("rx-catalog", "engine-scenes")) for r in chosen)
    if not args.no_local:
        table = rx.catalog([str(p) for p in scene_paths]) if wants_catalog else None
        local = readers.Location(str(stores.rumi), stores.header, str(stores.zarr),
                                 tuple(str(p) for p in stores.tifs), dates, remote=False,
                                 catalog=table)
        for w in workloads:
            results += measure("local", w, chosen, local, queries, args, None, rx)
    latencies = [float(v) for v in args.latency_ms.split(",") if v.strip()]
    for latency in [] if args.no_http else latencies:
        where = where_name(latency)
        wanted_here = workloads if not latency else [
            w for w in args.latency_workloads.split(",") if w in workloads]
        with ServerProcess(stores.root, latency_ms=latency) as server:
            names = [p.relative_to(stores.root).as_posix() for p in scene_paths]
            table = rx.catalog([server.url(n) for n in names]) if wants_catalog else None
            remote = readers.Location(
                server.url("cube.rumi"), stores.header, server.url("cube.zarr"),
                tuple("/vsicurl/" + server.url(n) for n in stores.tif_names), dates,
                remote=True, catalog=table)
            for w in wanted_here:
                results += measure(where, w, chosen, remote, queries, args, server, rx)
    meta["duration_s"] = round(time.time() - started, 1)
    meta["loadavg_end"] = os.getloadavg()

    text = report.text_tables(results)
    print()
    print(text)
    verdicts = report.bar_verdicts(results)
    print(report.format_verdicts(verdicts))
    args.out.mkdir(parents=True, exist_ok=True)
    name = ("latest-quick" if args.quick else "latest") + (f"-{args.tag}" if args.tag else "")
    command = "python " + " ".join(["benchmarks/run.py", *(argv if argv is not None
                                                          else sys.argv[1:])])
    (args.out / f"{name}.json").write_text(json.dumps(
        {"meta": meta, "results": results, "verdicts": verdicts}, indent=1, default=str))
    (args.out / f"{name}.md").write_text(report.markdown(results, meta, verdicts, command))
    print(f"\nwrote {args.out / (name + '.json')} and {args.out / (name + '.md')} "
          f"in {meta['duration_s']} s total")
    return 0


def print_stores(stores: Any, spec: Any) -> None:
    print(f"cube {spec.shape} uint16, tile {spec.tile}, data in {stores.root}")
    if stores.codec_profile:
        print("geozl.profile on one 512x512 tile (lossless graphs decoding >= 2x the "
              "reference speed, then the reference):")
        for row in stores.codec_profile:
            print(f"  {row['graph']:36s} ratio {row['ratio']:5.2f}  "
                  f"enc {row['encode_mbps']:6.0f} MB/s  dec {row['decode_mbps']:6.0f} MB/s")
    print(f"Rumi codec chosen: {stores.codec}")
    raw = stores.sizes["raw"]
    for key in ("raw", "rumi", "zarr", "geotiff"):
        size = stores.sizes[key]
        print(f"  {key:8s} {size / 2**20:8.1f} MiB  ratio {raw / size:4.2f}")


def environment(args: argparse.Namespace, spec: Any, stores: Any, rx: Any, rumi: Any,
                zarr: Any, n_pixels: int, n_chips: int) -> dict[str, Any]:
    import dask
    import rasterio
    import rioxarray
    import xarray

    return {
        "spec": asdict(spec), "codec": stores.codec, "codec_profile": stores.codec_profile,
        "sizes": stores.sizes, "pixels": n_pixels, "chips": n_chips, "chip_size": 256,
        "threads": args.threads, "reps": args.reps, "warmup": args.warmup,
        "quick": args.quick, "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
        "python": platform.python_version(), "platform": platform.platform(),
        "checksums": bool(rumi.get_checksum_verification()),
        "versions": {"rumi-eo": metadata.version("rumi-eo"), "geozl": metadata.version("geozl"),
                     "rumi_xarray": rx.__version__, "xarray": xarray.__version__,
                     "dask": dask.__version__, "zarr": zarr.__version__,
                     "rasterio": rasterio.__version__, "gdal": rasterio.__gdal_version__,
                     "rioxarray": rioxarray.__version__},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rumi_xarray_source": source_state(Path(rx.__file__).resolve().parent),
    }


def source_state(package: Path) -> dict[str, str]:
    """Identify the rumi_xarray code measured: where, commit, and a digest of its files.

    The package changes under active development (and an older checkout can
    be measured with ``PYTHONPATH``); the digest tells two result files
    measured on different working-tree states apart even on one commit.
    """
    import hashlib
    import subprocess

    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    try:
        commit = subprocess.run(["git", "-C", str(package), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(package), "status", "--porcelain", "."],
                               capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        commit, dirty = "", ""
    return {"package": str(package), "commit": commit, "dirty": str(bool(dirty)),
            "sources_sha256": digest.hexdigest()[:16]}


def _same(a: Any, b: Any) -> bool:
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return bool(np.allclose(a, b, rtol=1e-9, atol=1e-9))
    return bool(np.array_equal(a, b))


def measure(where: str, workload: str, chosen: list[Any], loc: Any, queries: Any,
            args: argparse.Namespace, server: Any, rx: Any) -> list[dict[str, Any]]:
    """Time every reader on one workload, interleaved per repetition."""
    readers = bench_module("readers")

    cases = [r for r in chosen if workload in r.workloads]
    rows = {r.key: {"where": where, "workload": workload, "reader": r.key, "label": r.label,
                    "times": [], "cpu": [], "requests": [], "bytes": [], "native_calls": [],
                    "ok": True, "error": None} for r in cases}
    fns = {r.key: readers.task(r, workload, loc, queries) for r in cases}
    print(f"\n{where} {WORKLOAD_TITLES[workload]}: ", end="", flush=True)
    for run in range(args.warmup + args.reps):
        reference = None
        # The warm-up round runs the engine first (the reference of every check); timed
        # rounds shuffle the order (seeded), so no reader always follows the same one (a
        # reader after a heavy one can pay for its freed memory, its threads winding down).
        order = list(cases)
        if run >= args.warmup:
            random.Random(run).shuffle(order)
        for r in order:
            row = rows[r.key]
            if row["error"]:
                continue
            readers.reset_caches()
            gc.collect()
            if server is not None:
                server.reset()
            rx.stats(reset=True)
            wall0, cpu0 = time.perf_counter(), time.process_time()
            try:
                out = fns[r.key](run)
            except Exception as exc:  # report and drop the reader, keep the benchmark going
                row["error"] = f"{type(exc).__name__}: {exc}"[:500]
                row["ok"] = False
                print(f"\n  {r.key} failed: {row['error']}", flush=True)
                continue
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            calls = rx.stats()["calls"]
            counted = server.stats() if server is not None else None
            if run < args.warmup:
                # Correctness before speed: every reader against the engine.
                if reference is None:
                    reference = out
                elif not _same(out, reference):
                    row["ok"] = False
                    row["error"] = "result differs from rumi.read"
                    print(f"\n  {r.key}: RESULT DIFFERS from rumi.read", flush=True)
                continue
            row["times"].append(wall)
            row["cpu"].append(cpu)
            row["native_calls"].append(calls)
            if counted is not None:
                row["requests"].append(counted["requests"])
                row["bytes"].append(counted["bytes"])
            del out
        print("." if run >= args.warmup else "w", end="", flush=True)
    out_rows = []
    for r in cases:
        row = rows[r.key]
        if row["times"]:
            row["median"] = statistics.median(row["times"])
            row["min"] = min(row["times"])
            row["cpu_median"] = statistics.median(row["cpu"])
            row["requests_median"] = (int(statistics.median(row["requests"]))
                                      if row["requests"] else None)
            row["bytes_median"] = (int(statistics.median(row["bytes"]))
                                   if row["bytes"] else None)
        out_rows.append(row)
    print(" " + ", ".join(f"{r['reader']} {r.get('median', float('nan')):.3f}s"
                          for r in out_rows), flush=True)
    return out_rows


if __name__ == "__main__":
    sys.exit(main())
