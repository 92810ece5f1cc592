"""Whole-scene previews at each overview level against full resolution, and against a GDAL COG.

Run: ``.venv/bin/python benchmarks/overviews.py [--size 4096] [--reps 5] [--latency-ms 20]
[--data-dir bench-data]``.

One date of the benchmark cube (``datagen.py``: 4 bands of imagery-like uint16,
``--size`` pixels square, 10 m UTM pixels) is written twice with overviews made
the same way (GDAL COG's ``OVERVIEWS=AUTO`` with ``AVERAGE`` resampling, 512-pixel
blocks: levels of 1/2, 1/4, 1/8... until one fits a block):

- **Rumi**: ``rx.write_array(..., tile_size=512, overviews="auto")``, lossless
  (the default codec); each level a Rumi file beside it, recorded in its sidecar;
- **COG**: the same samples as a tiled GeoTIFF (ZSTD, PREDICTOR=2, pixel
  interleaved, as ``datagen.py`` writes them) copied by GDAL's COG driver
  (``COMPRESS=ZSTD``, ``PREDICTOR=YES``, ``BLOCKSIZE=512``, ``RESAMPLING=AVERAGE``).

A *preview* is what a map or notebook explorer shows of the whole scene: every
band of the full extent at one level. Timed region per arm and level: open and
read it whole,

- ``rumi``: ``xr.open_dataset(src, engine="rumi", overview_level=k).band_data.values``;
- ``cog``: ``rioxarray.open_rasterio(src, overview_level=k).values`` (rasterio's
  GDAL, with the cloud-GeoTIFF settings a careful user sets; over HTTP each run
  appends ``?run=N-k``, a query the server ignores, so GDAL's per-URL cache does
  not carry one open's header reads into the next);

``k`` = full resolution, then each level. Locally and over the benchmark's loopback
HTTP server (``httpserve.py``, its own process) answering each request after
``--latency-ms``; requests and bytes are counted at the server. Runs are
interleaved after one warm-up, which checks every level of both against the
other (equal within one count: the same GDAL rule, see ``tests/test_overviews.py``)
and against ``rumi.read``. Medians of ``--reps``.

Bars (the script exits 1 when one is missed):

- bytes: a preview at level ``k`` over HTTP moves at most 1.25 x 4^-(k+1) of the
  full-resolution preview's bytes (what "bytes in proportion to the pixels shown"
  means, with a quarter for compression varying across levels);
- time: a Rumi preview takes at most the COG's time at the same level, locally
  and over HTTP;
- requests: a Rumi preview at an overview level over HTTP makes at most one
  request more than the COG's at the same level (the sidecar's GET, which names
  the level file; a COG's levels are listed in its own header). Full-resolution
  request counts are shown for reference only: they are not what overviews
  change, and ``remote_open.py`` and ``run.py`` hold their bars.

Results: ``benchmarks/results/latest-overviews.txt``.
"""

from __future__ import annotations

import argparse
import os
import runpy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
# librumi sizes its thread pool at first use, GDAL reads its options at open: both before
# the imports below (the threads as benchmarks/run.py sets them).
os.environ.setdefault("RUMI_NUM_THREADS", "2")
os.environ.setdefault("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")
os.environ.setdefault("CPL_VSIL_CURL_ALLOWED_EXTENSIONS", ".tif")
os.environ.setdefault("GDAL_HTTP_MERGE_CONSECUTIVE_RANGES", "YES")
os.environ.setdefault("GDAL_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import rumi  # noqa: E402
import xarray as xr  # noqa: E402

import rumi_xarray as rx  # noqa: E402

#: Bars: bytes share over 4^-(k+1), and time/requests of Rumi over the COG's.
BYTES_BAR = 1.25
TIME_BAR = 1.0
BLOCK = 512


def _module(name: str) -> Any:
    return runpy.run_path(str(HERE / "outfile.py"))["bench_module"](name)


def _files(folder: Path, size: int) -> tuple[Path, Path, np.ndarray]:
    """Write (once) the Rumi file with its levels and the GDAL COG of the same samples."""
    import rasterio
    import rasterio.shutil
    from rasterio.transform import Affine

    datagen = _module("datagen")
    folder.mkdir(parents=True, exist_ok=True)
    cube = datagen.generate(datagen.CubeSpec(times=1, bands=4, size=size))
    rumi_path, cog = folder / f"preview-{size}.rumi", folder / f"preview-{size}.tif"
    transform = datagen._transform()
    if not rumi_path.exists():
        rx.write_array(rumi_path, cube, bands=[f"B{i + 1}" for i in range(4)],
                       time=datagen.dates_for(1), tile_size=BLOCK, transform=transform,
                       crs=datagen.EPSG, overviews="auto", overview_resampling="average",
                       progress=False)
    if not cog.exists():
        plain = folder / f"preview-{size}-plain.tif"
        profile = {"driver": "GTiff", "width": size, "height": size, "count": 4,
                   "dtype": "uint16", "crs": f"EPSG:{datagen.EPSG}",
                   "transform": Affine(*transform), "tiled": True, "blockxsize": BLOCK,
                   "blockysize": BLOCK, "compress": "ZSTD", "predictor": 2,
                   "interleave": "pixel"}
        with rasterio.open(plain, "w", **profile) as dst:
            dst.write(cube[0])
        rasterio.shutil.copy(plain, cog, driver="COG", COMPRESS="ZSTD", PREDICTOR="YES",
                             BLOCKSIZE=BLOCK, RESAMPLING="AVERAGE", OVERVIEWS="AUTO")
        plain.unlink()
    return rumi_path, cog, cube


def _check(rumi_src: str, cog_src: str, cube: np.ndarray, levels: int) -> None:
    """Raise unless both arms read the same scene at every level (within one count)."""
    import rioxarray

    meta = rumi.info(source=rumi_src)
    full = rumi.read(rumi_src, meta.header, pattern="t b y x")
    if not np.array_equal(full, cube):
        raise SystemExit("the Rumi file's samples differ from the cube")
    for level in [None, *range(levels)]:
        ours = xr.open_dataset(rumi_src, engine="rumi", overview_level=level).band_data.values
        theirs = rioxarray.open_rasterio(cog_src, overview_level=level).values
        if ours.shape[1:] != theirs.shape or np.abs(
                ours[0].astype(np.int64) - theirs.astype(np.int64)).max() > 1:
            raise SystemExit(f"level {level}: Rumi and the COG differ by more than one count")


def main(argv: list[str] | None = None) -> int:
    import rioxarray

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--tag", default="overviews")
    args = parser.parse_args(argv)
    folder = args.data_dir / "overviews"
    rumi_path, cog_path, cube = _files(folder, args.size)
    factors = rx.overview_factors(rumi_path)
    levels: list[int | None] = [None, *range(len(factors))]
    # rumi_xarray's process settings (checksums on) apply at its first read, before any other.
    xr.open_dataset(rumi_path, engine="rumi").band_data.isel(
        time=0, band=0, y=slice(0, 1), x=slice(0, 1)).load()

    def rumi_arm(src: str, level: int | None, run: int) -> np.ndarray:
        return xr.open_dataset(src, engine="rumi", overview_level=level).band_data.values

    def cog_arm(src: str, level: int | None, run: int) -> np.ndarray:
        # One URL per run and level: GDAL's /vsicurl/ caches each URL's header reads.
        suffix = f"?run={run}-{level}" if src.startswith("http") else ""
        with rioxarray.open_rasterio(src + suffix, overview_level=level) as da:
            return da.values

    arms: dict[str, Callable[[str, int | None, int], np.ndarray]] = {
        "rumi": rumi_arm, "cog": cog_arm}
    results: dict[tuple[str, str, int | None], dict[str, float]] = {}

    def measure(where: str, sources: dict[str, str], server: Any = None) -> None:
        _check(sources["rumi"], sources["cog"], cube, len(factors))
        samples: dict[tuple[str, int | None], list[float]] = {}
        counted: dict[tuple[str, int | None], dict[str, int]] = {}
        for run in range(1 + args.reps):
            for level in levels:
                order = list(arms) if run % 2 == 0 else list(reversed(arms))
                for arm in order:
                    rx.clear_cache()
                    if server is not None:
                        server.reset()
                    start = time.perf_counter()
                    got = arms[arm](sources[arm], level, run)
                    elapsed = time.perf_counter() - start
                    if run == 0:
                        if server is not None:
                            counted[(arm, level)] = server.stats()
                    else:
                        samples.setdefault((arm, level), []).append(elapsed)
                    del got
        for (arm, level), times in samples.items():
            stats = counted.get((arm, level), {})
            results[(where, arm, level)] = {
                "seconds": statistics.median(times), "min": min(times),
                "requests": stats.get("requests", 0), "bytes": stats.get("bytes", 0)}

    measure("local", {"rumi": str(rumi_path), "cog": str(cog_path)})
    with _module("httpserve").ServerProcess(folder, latency_ms=args.latency_ms) as server:
        measure("http", {"rumi": server.url(rumi_path.name), "cog": server.url(cog_path.name)},
                server)

    import platform

    lines = [f"machine: {os.cpu_count()} CPUs, {platform.platform()}, Python "
             f"{platform.python_version()}; RUMI_NUM_THREADS={os.environ['RUMI_NUM_THREADS']}, "
             f"GDAL_NUM_THREADS={os.environ['GDAL_NUM_THREADS']}",
             f"scene: 1 date x 4 bands x {args.size}² uint16 (tile/block {BLOCK}); overview "
             f"factors {factors} (GDAL COG OVERVIEWS=AUTO, AVERAGE); Rumi "
             f"{_size(folder, rumi_path.name)} in {len(factors) + 1} files, COG "
             f"{_size(folder, cog_path.name)}",
             f"preview = open + read every band of the full extent at one level; median of "
             f"{args.reps}; HTTP server latency {args.latency_ms:g} ms per request"]
    verdicts: list[str] = []
    for where in ("local", "http"):
        lines.append(f"{where}:")
        lines.append("  level   shown px    rumi ms (x full)      cog ms (x full)   rumi/cog"
                     + ("   rumi req  bytes (x full)      cog req  bytes (x full)"
                        if where == "http" else ""))
        full = {arm: results[(where, arm, None)] for arm in arms}
        for level in levels:
            r, c = results[(where, "rumi", level)], results[(where, "cog", level)]
            side = args.size if level is None else _level_size(rumi_path, level)
            name = "full" if level is None else f"{level} (/{factors[level]})"
            text = (f"  {name:7s} {side:>5d}²    {r['seconds'] * 1000:8.1f} "
                    f"({r['seconds'] / full['rumi']['seconds']:5.3f})   "
                    f"{c['seconds'] * 1000:8.1f} ({c['seconds'] / full['cog']['seconds']:5.3f})"
                    f"   {r['seconds'] / c['seconds']:5.2f}")
            if where == "http":
                text += (f"   {r['requests']:8d}  {_human(r['bytes'])} "
                         f"({r['bytes'] / full['rumi']['bytes']:6.4f})   {c['requests']:8d}  "
                         f"{_human(c['bytes'])} ({c['bytes'] / full['cog']['bytes']:6.4f})")
            lines.append(text)
            ratio = r["seconds"] / c["seconds"]
            verdicts.append(_verdict(lines, ratio <= TIME_BAR,
                                     f"{where} {name}: rumi / cog time = {ratio:.2f} "
                                     f"(bar <= {TIME_BAR})"))
            if where == "http" and level is not None:
                verdicts.append(_verdict(
                    lines, r["requests"] <= c["requests"] + 1,
                    f"http {name}: rumi {r['requests']} requests, cog {c['requests']} "
                    f"(bar: at most one more)"))
                share = r["bytes"] / full["rumi"]["bytes"]
                expected = 4.0 ** -(level + 1)
                verdicts.append(_verdict(
                    lines, share <= BYTES_BAR * expected,
                    f"http {name}: rumi bytes / full = {share:.4f} = "
                    f"{share / expected:.2f} x 4^-{level + 1} (bar <= {BYTES_BAR})"))
    missed = verdicts.count("MISS")
    lines.append(f"{len(verdicts) - missed} of {len(verdicts)} bars met")
    runpy.run_path(str(HERE / "outfile.py"))["save"](args.tag, lines, argv)
    return 0 if missed == 0 else 1


def _verdict(lines: list[str], met: bool, text: str) -> str:
    verdict = "MET" if met else "MISS"
    lines.append(f"    [{verdict}] {text}")
    return verdict


def _level_size(path: Path, level: int) -> int:
    return int(xr.open_dataset(path, engine="rumi", overview_level=level).sizes["x"])


def _size(folder: Path, prefix: str) -> str:
    total = sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith(prefix))
    return _human(total)


def _human(n: float) -> str:
    from rumi_xarray.formatting import human_size

    return human_size(int(n))


if __name__ == "__main__":
    sys.exit(main())
