"""STAC loads over a 20 ms-latency HTTP server: rx.open_stac on Rumi Items vs odc-stac on COGs.

The same scenes, written once as Rumi files and as one tiled GeoTIFF per band
(what STAC collections publish), are served by the benchmark's loopback HTTP
server (``httpserve.py``, a child process, sleeping ``--latency-ms`` before
each answer). Items: ``rx.to_stac`` for Rumi (header inside, made before the
timed runs, like a catalog one searches), hand-made rio-stac-like Items
(projection + raster + eo extensions) for the GeoTIFFs.

Scenes: two tiles in two UTM zones (32N and 33N) overlapping near 12 E, the
same acquisition times (one time step mosaics both), a no-data corner each.

Workloads, each loaded to numpy (``.compute()``), opening inside the timed
region:

- ``series``: a small bbox (about 4 x 4 km) time series (every date) in the
  tiles' overlap, onto UTM 33N at the native resolution, with each
  library's default chunks (odc-stac: one chunk per date and band, the
  whole box; rumi_xarray: read groups, here one chunk for everything);
- ``area``: most of both tiles, every date, default chunks;
- ``area-512``: the same with 512 x 512 spatial chunks in both libraries
  (rumi_xarray then re-reads the source frames that neighbouring output
  chunks share; odc-stac's GDAL block cache serves them again).

Both libraries warp with GDAL (odc-geo) from the same grids and chunks, so
their nearest-neighbour results are identical (checked in the warm-up
round). Runs alternate between readers; medians are reported with server
requests and bytes. Threads: the dask threaded scheduler with ``--threads``
workers (librumi's pool follows it); odc-stac with ``configure_rio(
cloud_defaults=True)``, as its documentation recommends for cloud reads, and
a fresh URL per run so GDAL's /vsicurl/ cache does not carry over.

    .venv/bin/python benchmarks/stac.py                  # 8 dates, 1024^2 tiles
    .venv/bin/python benchmarks/stac.py --quick          # 4 dates, 512^2 tiles
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import runpy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# benchmarks/ leaves sys.path (its modules could shadow packages, see run.py); the
# server helper is loaded from its file.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

BANDS = ["B02, Blue, 490nm", "B03, Green, 560nm", "B04, Red, 665nm"]
SHORT = ["B02", "B03", "B04"]
NODATA = 0
#: Tile -> (EPSG, x origin, y origin); the tiles overlap by ~9 km east-west.
TILES = {"A": (32632, 722000.0, 5010000.0), "B": (32633, 252000.0, 5012020.0)}
#: Workload -> (box, spatial chunks; None: each library's default chunks).
WORKLOADS: dict[str, tuple[str, dict[str, int] | None]] = {
    "series": ("series", None), "area": ("area", None), "area-512": ("area", {"x": 512, "y": 512})}
#: Half size (degrees lon, lat) of the ``series`` box, about 4 x 4 km.
SERIES_HALF = (0.025, 0.018)


def bench_module(name: str) -> Any:
    """Import ``benchmarks/<name>.py`` without benchmarks/ on the path."""
    return runpy.run_path(str(HERE / "outfile.py"))["bench_module"](name)


# --- data ----------------------------------------------------------------------------


def scene_data(tile: str, k: int, size: int, res: float) -> Any:
    """Return ``(band, y, x)`` uint16: smooth field of lon/lat, texture, per-date noise."""
    import numpy as np
    from pyproj import Transformer

    epsg, x0, y0 = TILES[tile]
    rows, cols = np.mgrid[0:size, 0:size]
    lon, lat = Transformer.from_crs(epsg, 4326, always_xy=True).transform(
        x0 + (cols + 0.5) * res, y0 - (rows + 0.5) * res)
    rng = np.random.default_rng(1000 * k + ord(tile))
    out = np.empty((len(BANDS), size, size), dtype=np.uint16)
    for b in range(len(BANDS)):
        field = 3000 + 1500 * np.sin(lon * 60 + b) * np.cos(lat * 50 - k) + 200 * b
        noise = rng.normal(0, 25, (size, size))
        out[b] = np.clip(np.round(field + noise + (rows * 7 + cols * 13) % 41), 1, 65535)
    out[:, rows > cols * 0.8 + size // 3] = NODATA
    return out


def prepare(root: Path, size: int, res: float, dates: int, log: Any = print
            ) -> list[dict[str, Any]]:
    """Write (or reuse) every scene as Rumi (+ sidecar) and one GeoTIFF per band."""
    import numpy as np
    import rasterio
    from affine import Affine

    from rumi_xarray.conventions.facts import Facts
    from rumi_xarray.conventions.sidecar import Sidecar, write_sidecar
    from rumi_xarray.write.to_rumi import write_array

    root.mkdir(parents=True, exist_ok=True)
    key = {"size": size, "res": res, "dates": dates, "tiles": TILES, "version": 1}
    manifest = root / "manifest.json"
    scenes = []
    for k in range(dates):
        when = dt.datetime(2024, 5, 1, 10, 30) + dt.timedelta(days=10 * k)
        for tile, (epsg, x0, y0) in TILES.items():
            name = f"{tile}_{when:%Y%m%d}"
            scenes.append({"name": name, "tile": tile, "when": when, "epsg": epsg,
                           "transform": (res, 0.0, x0, 0.0, -res, y0), "k": k,
                           "rumi": f"{name}.rumi",
                           "tifs": {b: f"{name}_{b}.tif" for b in SHORT}})
    if manifest.exists() and json.loads(manifest.read_text()) == json.loads(json.dumps(key)):
        return scenes
    manifest.unlink(missing_ok=True)
    started = time.perf_counter()
    for s in scenes:
        data = scene_data(s["tile"], s["k"], size, res)
        path = root / s["rumi"]
        write_array(path, data[np.newaxis], bands=BANDS, time=[s["when"]],
                    transform=s["transform"], crs=s["epsg"], tile_size=512, progress=False)
        write_sidecar(path, Sidecar(Facts(nodata=NODATA)))
        for b, short in enumerate(SHORT):
            with rasterio.open(root / s["tifs"][short], "w", driver="GTiff", width=size,
                               height=size, count=1, dtype="uint16",
                               crs=f"EPSG:{s['epsg']}", transform=Affine(*s["transform"]),
                               nodata=NODATA, tiled=True, blockxsize=512, blockysize=512,
                               compress="ZSTD", predictor=2) as f:
                f.write(data[b], 1)
    manifest.write_text(json.dumps(key))
    log(f"wrote {len(scenes)} scenes ({size}^2, {res:g} m) as Rumi and GeoTIFF in "
        f"{time.perf_counter() - started:.0f} s")
    return scenes


def boxes(size: int, res: float) -> dict[str, tuple[float, float, float, float]]:
    """Return each workload's bbox: a small box centred in the tiles' overlap, and the
    union of both footprints less a tenth on every side."""
    from affine import Affine
    from odc.geo.geobox import GeoBox

    prints = [GeoBox((size, size), Affine(res, 0.0, x0, 0.0, -res, y0), f"EPSG:{epsg}")
              .footprint("epsg:4326").geom for epsg, x0, y0 in TILES.values()]
    overlap = prints[0].intersection(prints[1])
    lon, lat = overlap.centroid.x, overlap.centroid.y
    west, south, east, north = prints[0].union(prints[1]).bounds
    dx, dy = (east - west) / 10, (north - south) / 10
    return {"series": (lon - SERIES_HALF[0], lat - SERIES_HALF[1], lon + SERIES_HALF[0],
                       lat + SERIES_HALF[1]),
            "area": (west + dx, south + dy, east - dx, north - dy)}


def tif_items(scenes: list[dict[str, Any]], url: Any, size: int, run: int) -> list[Any]:
    """Return rio-stac-like Items of the GeoTIFFs (the tests' builder), hrefs unique per run."""
    sys.path.insert(0, str(HERE.parent))  # the repository: tests/ is a package there
    try:
        from tests.stac_items import geotiff_item
    finally:
        sys.path.pop(0)
    return [geotiff_item(s["name"], s["when"].replace(tzinfo=dt.UTC), s["epsg"],
                         s["transform"], (size, size), {b: s["tifs"][b] for b in SHORT},
                         BANDS, NODATA, href=lambda p: f"{url(p)}?run={run}")
            for s in scenes]


# --- readers -------------------------------------------------------------------------


def load_rumi(items: Any, bbox: Any, chunks: Any, res: float) -> Any:
    import rumi_xarray as rx

    return rx.open_stac(items, bands=SHORT, bbox=bbox, crs="EPSG:32633", resolution=res,
                        chunks={} if chunks is None else chunks).compute()


def load_odc(items: Any, bbox: Any, chunks: Any, res: float) -> Any:
    import odc.stac

    return odc.stac.load(items, bands=SHORT, bbox=bbox, crs="EPSG:32633", resolution=res,
                         chunks={} if chunks is None else chunks).compute()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 dates, 512^2 tiles, 2 reps")
    parser.add_argument("--size", type=int, default=None, help="tile side in pixels")
    parser.add_argument("--dates", type=int, default=None)
    parser.add_argument("--res", type=float, default=20.0, help="pixel size (m)")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    size = args.size or (512 if args.quick else 1024)
    dates = args.dates or (4 if args.quick else 8)
    reps = args.reps or (2 if args.quick else 3)
    root = args.data_dir or HERE.parent / "bench-data" / f"stac-{size}-{dates}"
    os.environ.setdefault("RUMI_NUM_THREADS", str(args.threads))

    import dask
    import numpy as np
    import odc.stac

    import rumi_xarray as rx

    dask.config.set(scheduler="threads", num_workers=args.threads)
    odc.stac.configure_rio(cloud_defaults=True)
    scenes = prepare(root, size, args.res, dates)
    httpserve = bench_module("httpserve")
    workloads = [w for w in args.workloads.split(",") if w]
    bboxes = boxes(size, args.res)
    rows: dict[tuple[str, str], dict[str, list[float]]] = {}
    fresh = 0
    with httpserve.ServerProcess(root, latency_ms=args.latency_ms) as server:
        rumi_items = rx.to_stac(rx.catalog([server.url(s["rumi"]) for s in scenes]))
        for workload in workloads:
            box, chunks = WORKLOADS[workload]
            bbox = bboxes[box]
            for run in range(reps + 1):  # run 0 warms up and checks values
                results = {}
                for reader in ("rumi", "odc"):
                    server.reset()
                    rx.stats(reset=True)
                    started = time.perf_counter()
                    if reader == "rumi":
                        out = load_rumi(rumi_items, bbox, chunks, args.res)
                    else:
                        fresh += 1  # GDAL caches per URL: a new one every run
                        items = tif_items(scenes, server.url, size, fresh)
                        out = load_odc(items, bbox, chunks, args.res)
                    wall = time.perf_counter() - started
                    served = server.stats()
                    results[reader] = out
                    if run == 0:
                        continue
                    entry = rows.setdefault((workload, reader), {
                        "wall": [], "requests": [], "bytes": [], "calls": []})
                    entry["wall"].append(wall)
                    entry["requests"].append(served["requests"])
                    entry["bytes"].append(served["bytes"])
                    entry["calls"].append(rx.stats()["calls"] if reader == "rumi" else 0)
                if run == 0:
                    a, b = results["rumi"], results["odc"]
                    for name in SHORT:
                        np.testing.assert_array_equal(a[name].values, b[name].values)
                    print(f"{workload}: {dict(a.sizes)} per band, values identical "
                          f"({int((a.B04.values != NODATA).sum())} valid B04 samples)")
    print()
    print(f"STAC loads over loopback HTTP, {args.latency_ms:g} ms per request, "
          f"{args.threads} threads, {dates} dates x 2 tiles ({size}^2 px, "
          f"{args.res:g} m, 3 bands), median of {reps}")
    print()
    print("| workload | reader | time (s) | requests | MiB served | native calls |"
          " odc-stac / rumi time | odc-stac / rumi requests |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for workload in workloads:
        med = {r: {k: statistics.median(v) for k, v in rows[(workload, r)].items()}
               for r in ("rumi", "odc")}
        for reader, label in (("rumi", "rx.open_stac (Rumi)"), ("odc", "odc.stac.load (COG)")):
            m = med[reader]
            ratio_t = med["odc"]["wall"] / med["rumi"]["wall"]
            ratio_r = med["odc"]["requests"] / max(med["rumi"]["requests"], 1)
            print(f"| {workload} | {label} | {m['wall']:.2f} | {m['requests']:.0f} | "
                  f"{m['bytes'] / 2**20:.1f} | {m['calls']:.0f} | "
                  f"{'' if reader == 'odc' else f'{ratio_t:.1f}x'} | "
                  f"{'' if reader == 'odc' else f'{ratio_r:.1f}x'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
