"""Chips for models: batches of random chips from many scenes (issue 22).

Batches of ``--batch`` random ``--chip``² chips x 4 bands drawn from ``--scenes``
single-date scenes of ``--size``² (tile ``--tile``), locally and through the
loopback HTTP range server with ``--latency-ms`` per request, all arms in one
interleaved run (each repetition runs every arm once, in turn):

- ``rx.read_chips``: the batch in one native call (one ``read_many`` across scenes);
- ``ChipDataset`` through ``DataLoader(num_workers=2)`` (``__getitems__``, zero-copy
  collate), persistent workers, timed after one warm-up batch per worker;
- ``rumi.read`` per chip: the engine without batching;
- rasterio per chip on tiled GeoTIFFs of the same scenes (ZSTD, predictor 2, same
  tile), each file opened once and kept open, as torchgeo's ``RasterDataset`` reads
  (``/vsicurl/`` over HTTP); in the main process and through a 2-worker ``DataLoader``.

Reported per arm: chips/s (median over repetitions), HTTP requests per batch, and
the peak resident-memory growth while a batch is read (sampled every millisecond,
main process plus loader workers, in an untimed repetition of its own), against the batch's
own bytes. Bars (issue 22):
over latency ``ChipDataset`` >= 5x per-chip rasterio and >= 2x per-chip
``rumi.read``; locally >= 1.5x per-chip rasterio; peak memory <= 1.5x the batch.
Exit status 1 when a bar is missed.

``--karu`` also profiles ``rx.read_chips`` over HTTP under Karu settings
(``KARU_CONCURRENCY``, ``KARU_COALESCE_*``) and batch shapes (chips per call), each in
a fresh process (Karu reads its settings once): the engine investigation of issue 22.

    python benchmarks/chips.py --out benchmarks/results/latest-chips.json
    python benchmarks/chips.py --quick          # 8 scenes of 512², a minute or two
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

BANDS = 4
#: DataLoader workers of the loader arms (each reads one batch at a time).
LOADER_WORKERS = 2


# --- data -------------------------------------------------------------------------------


def prepare(root: Path, scenes: int, size: int, tile: int) -> tuple[list[Path], list[Path]]:
    """Write (or reuse) ``scenes`` single-date Rumi files and tiled GeoTIFFs of them."""
    import rasterio
    from rasterio.transform import Affine

    from rumi_xarray.write.to_rumi import write_array

    folder = root / f"chips-{scenes}x{size}-t{tile}"
    manifest = folder / "manifest.json"
    rumi_paths = [folder / f"s{i:03d}.rumi" for i in range(scenes)]
    tif_paths = [folder / f"s{i:03d}.tif" for i in range(scenes)]
    if manifest.exists() and all(p.exists() for p in rumi_paths + tif_paths):
        return rumi_paths, tif_paths
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    transform = (10.0, 0.0, 399960.0, 0.0, -10.0, 5900040.0)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    for i in range(scenes):
        # Smooth fields plus noise: compresses like reflectance, not like random bytes.
        base = np.stack([np.sin(6 * xx + i + b) * np.cos(5 * yy - b) for b in range(BANDS)])
        data = (3000 + 1500 * base + rng.normal(0, 60, base.shape)).clip(0, 65535)
        data = data.astype(np.uint16)[None]
        date = f"2024-{1 + i % 12:02d}-{1 + i // 12:02d}"
        write_array(rumi_paths[i], data, bands=[f"B{b}" for b in range(BANDS)],
                    time=[np.datetime64(date)], transform=transform, crs=32633,
                    tile_size=tile, frame="plane")
        profile = {"driver": "GTiff", "width": size, "height": size, "count": BANDS,
                   "dtype": "uint16", "crs": "EPSG:32633", "transform": Affine(*transform),
                   "tiled": True, "blockxsize": tile, "blockysize": tile, "compress": "ZSTD",
                   "predictor": 2, "interleave": "pixel"}
        with rasterio.open(tif_paths[i], "w", **profile) as dst:
            dst.write(data[0])
    manifest.write_text(json.dumps({"scenes": scenes, "size": size, "tile": tile}))
    return rumi_paths, tif_paths


# --- memory -----------------------------------------------------------------------------


class PeakRSS:
    """Sample the memory of this process and its children every few milliseconds.

    Proportional set sizes (PSS): a shared-memory batch mapped by a loader worker and
    by the main process counts once, not twice as resident sizes would count it.
    """

    def __init__(self) -> None:
        import psutil

        self.proc = psutil.Process()
        self.peak = 0
        self.base = 0
        self._stop = threading.Event()

    def _rss(self) -> int:
        total = self.proc.memory_full_info().pss
        for child in self.proc.children(recursive=True):
            with contextlib.suppress(Exception):  # a child that just exited
                total += child.memory_full_info().pss
        return total

    def __enter__(self) -> PeakRSS:
        self.base = self.peak = self._rss()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(0.002)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def growth(self) -> int:
        return self.peak - self.base


# --- arms -------------------------------------------------------------------------------


def _gdal_env() -> dict[str, str]:
    # What a careful rasterio/torchgeo user sets for cloud GeoTIFFs.
    return {"GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR", "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif",
            "GDAL_HTTP_MULTIPLEX": "YES", "GDAL_HTTP_VERSION": "2", "VSI_CACHE": "FALSE"}


class RasterioChips:
    """Per-chip windowed reads with rasterio, files opened once (torchgeo's RasterDataset)."""

    def __init__(self, paths: list[str], size: int) -> None:
        self.paths, self.size = paths, size
        self._open: dict[int, Any] = {}

    def read(self, key: tuple[int, int, int]) -> np.ndarray:
        import rasterio
        from rasterio.windows import Window

        t, r, c = key
        if t not in self._open:
            self._open[t] = rasterio.open(self.paths[t])
        return self._open[t].read(window=Window(c, r, self.size, self.size))

    def __getstate__(self) -> dict[str, Any]:
        return {"paths": self.paths, "size": self.size, "_open": {}}


class RasterioDataset:
    """Map-style torch dataset of per-chip rasterio reads (what torchgeo's does)."""

    def __init__(self, paths: list[str], size: int) -> None:
        self.reader = RasterioChips(paths, size)

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, key: tuple[int, int, int]) -> Any:
        import torch

        return {"image": torch.from_numpy(self.reader.read(key))}


def _rasterio_worker_env(_: int) -> None:
    os.environ.update(_gdal_env())


def make_arms(rumi_paths: list[str], tif_paths: list[str], chip: int, batch: int,
              batches: int, seed: int) -> dict[str, Callable[[int], Iterator[Any]]]:
    """Return arm name -> a generator factory ``run(rep)`` yielding one result per batch.

    Every repetition of every arm reads chips drawn afresh (sampler epoch ``rep``): no
    arm reads a chip it has read before, so no decoded-block cache (GDAL's) answers
    for the storage. GeoTIFFs are opened per repetition, as a reader meeting the
    scenes of a large archive for the first time does (a header round trip per scene).
    """
    import rumi
    from torch.utils.data import DataLoader

    import rumi_xarray as rx
    from rumi_xarray.torch import ChipDataset, RandomChipSampler, collate

    cube = rx.open_catalog(rx.catalog(rumi_paths))
    headers = [rumi.info(source=p).header for p in rumi_paths]
    per_rep = batch * batches

    def keys_of(rep: int) -> list[list[tuple[int, ...]]]:
        keys = list(RandomChipSampler(cube, chip, per_rep, seed=seed * 1000 + rep))
        return [keys[i * batch:(i + 1) * batch] for i in range(batches)]

    class EpochSampler(RandomChipSampler):
        """The arm's sampler: epoch ``rep`` draws the same chips as keys_of(rep)."""

        def __iter__(self) -> Iterator[tuple[int, ...]]:
            self.seed = seed * 1000 + self.rep
            self.epoch = 0
            return super().__iter__()

    def loader(dataset: Any, **kwargs: Any) -> tuple[Any, EpochSampler]:
        sampler = EpochSampler(cube, chip, per_rep, seed=0)
        sampler.rep = 0
        return DataLoader(dataset, batch_size=batch, sampler=sampler, num_workers=LOADER_WORKERS,
                          persistent_workers=True, prefetch_factor=1, **kwargs), sampler

    # stored samples, as the GeoTIFF arm reads them (ChipDataset decodes to floats by default)
    chip_loader, chip_sampler = loader(ChipDataset(cube, chip, mask_and_scale=False),
                                       collate_fn=collate)
    # GDAL is not fork-safe once it has used curl (/vsicurl/ in this process): forked
    # workers read garbage tiles ("ZSTD: Unknown frame descriptor"), so they are spawned.
    tif_loader, tif_sampler = loader(RasterioDataset(tif_paths, chip),
                                     worker_init_fn=_rasterio_worker_env,
                                     multiprocessing_context="spawn")

    def read_chips(rep: int) -> Iterator[Any]:
        for kb in keys_of(rep):
            yield rx.read_chips(cube, np.asarray(kb), chip)

    def rumi_per_chip(rep: int) -> Iterator[Any]:
        for kb in keys_of(rep):
            yield [rumi.read(rumi_paths[t], headers[t], window=(r, c, chip, chip),
                             pattern="b y x") for t, r, c in kb]

    reader = RasterioChips(tif_paths, chip)

    def rasterio_per_chip(rep: int) -> Iterator[Any]:
        for kb in keys_of(rep):
            yield [reader.read(k) for k in kb]

    def chip_batches(rep: int) -> Iterator[Any]:
        chip_sampler.rep = rep
        yield from chip_loader

    def tif_batches(rep: int) -> Iterator[Any]:
        tif_sampler.rep = rep
        yield from tif_loader

    # xbatcher over rioxarray: patches of the GeoTIFFs stacked along time, as xbatcher
    # users build them; each repetition takes patches it has not taken before.
    import rioxarray
    import xarray as xr
    import xbatcher

    tile = rumi.info(source=rumi_paths[0]).tile[0]
    generator: list[Any] = []

    def xbatcher_patches(rep: int) -> Iterator[Any]:
        if not generator:  # opened on first use, after the loaders' workers started
            stack = xr.concat([rioxarray.open_rasterio(
                p, chunks={"band": -1, "y": tile, "x": tile}, cache=False, lock=False)
                for p in tif_paths], dim="time")
            generator.append(xbatcher.BatchGenerator(
                stack, input_dims={"time": 1, "y": chip, "x": chip}))
        patches = generator[0]
        first = rep * per_rep
        for b in range(batches):
            yield [patches[(first + b * batch + i) % len(patches)].values
                   for i in range(batch)]

    return {"rx.read_chips": read_chips, "ChipDataset + DataLoader(2)": chip_batches,
            "rumi.read per chip": rumi_per_chip, "rasterio per chip": rasterio_per_chip,
            "rasterio + DataLoader(2)": tif_batches, "xbatcher over rioxarray": xbatcher_patches}


def measure(arms: dict[str, Callable[[int], Iterator[Any]]], reps: int, batch: int,
            server: Any | None) -> dict[str, dict[str, Any]]:
    """Run every arm once per repetition, interleaved, after a warm-up (workers start)."""
    for run in arms.values():
        for _ in run(0):
            pass
    out: dict[str, dict[str, Any]] = {name: {"seconds": [], "requests": [], "peak": []}
                                      for name in arms}
    # Timed repetitions run without the memory sampler: reading /proc/*/smaps of five
    # processes every 2 ms costs CPU and the GIL, which slowed the in-process arms (one
    # read_many batch 1.26 s in the timed loop against 0.30-0.50 s in a process alone).
    for rep in range(1, reps + 1):
        for name, run in arms.items():
            if server is not None:
                server.reset()
            n = 0
            started = time.perf_counter()
            for result in run(rep):
                n += 1
                del result  # the previous batch is not alive while the next is read
            elapsed = time.perf_counter() - started
            out[name]["seconds"].append(elapsed / n)
            if server is not None:
                out[name]["requests"].append(server.stats()["requests"] / n)
    # Then one untimed repetition per arm, on chips not read before, for peak memory.
    for name, run in arms.items():
        with PeakRSS() as mem:
            for result in run(reps + 1):
                del result
        out[name]["peak"].append(mem.growth)
    summary = {}
    for name, rec in out.items():
        per_batch = statistics.median(rec["seconds"])
        summary[name] = {"chips_per_s": batch / per_batch, "seconds_per_batch": per_batch,
                         "requests_per_batch": (statistics.median(rec["requests"])
                                                if rec["requests"] else None),
                         "peak_bytes_per_batch": int(statistics.median(rec["peak"])),
                         "all_seconds": rec["seconds"]}
    return summary


# --- Karu profile -----------------------------------------------------------------------

_PROFILE = r"""
import json, os, sys, time, numpy as np
sys.path.insert(0, {repo!r})
import rumi_xarray as rx
from rumi_xarray.torch import RandomChipSampler
urls, chip, batch, per_call, reps = json.loads(sys.argv[1])
cube = rx.open_catalog(rx.catalog(urls))
keys = np.asarray(list(RandomChipSampler(cube, chip, batch * (reps + 1), seed=3)))
times = []
for i in range(reps + 1):
    kb = keys[i * batch:(i + 1) * batch]
    t = time.perf_counter()
    for j in range(0, batch, per_call):
        rx.read_chips(cube, kb[j:j + per_call], chip)
    times.append(time.perf_counter() - t)
print(json.dumps(sorted(times[1:])[len(times[1:]) // 2]))
"""


def karu_profile(server: Any, names: list[str], chip: int, batch: int, reps: int
                 ) -> list[dict[str, Any]]:
    """Time one batch under Karu settings and call shapes, each in a fresh process."""
    urls = [server.url(n) for n in names]
    settings: list[tuple[dict[str, str], int]] = [
        ({}, batch), ({}, 16), ({}, 8), ({}, 1),
        ({"KARU_CONCURRENCY": "16"}, batch), ({"KARU_CONCURRENCY": "64"}, batch),
        ({"KARU_COALESCE_GAP": "0"}, batch), ({"KARU_COALESCE_MAX": "1048576"}, batch),
        ({"KARU_CONCURRENCY": "64"}, 16),
    ]
    rows = []
    for env, per_call in settings:
        server.reset()
        proc = subprocess.run(
            [sys.executable, "-c", _PROFILE.format(repo=str(REPO)),
             json.dumps([urls, chip, batch, per_call, reps])],
            capture_output=True, text=True, env={**os.environ, **env}, timeout=600)
        if proc.returncode:
            rows.append({"env": env, "per_call": per_call, "error": proc.stderr[-400:]})
            continue
        stats = server.stats()
        rows.append({"env": env, "per_call": per_call,
                     "seconds_per_batch": json.loads(proc.stdout.strip().splitlines()[-1]),
                     "requests_per_batch": stats["requests"] / (reps + 1),
                     "bytes_per_batch": stats["bytes"] / (reps + 1)})
    return rows


# --- main -------------------------------------------------------------------------------


def bars(local: dict[str, Any], remote: dict[str, Any], batch_bytes: int) -> list[dict[str, Any]]:
    ds = "ChipDataset + DataLoader(2)"
    checks = [
        ("over latency: ChipDataset >= 5x per-chip rasterio",
         remote[ds]["chips_per_s"] / remote["rasterio per chip"]["chips_per_s"], 5.0),
        ("over latency: ChipDataset >= 2x per-chip rumi.read",
         remote[ds]["chips_per_s"] / remote["rumi.read per chip"]["chips_per_s"], 2.0),
        ("locally: ChipDataset >= 1.5x per-chip rasterio",
         local[ds]["chips_per_s"] / local["rasterio per chip"]["chips_per_s"], 1.5),
    ]
    out = [{"bar": text, "ratio": round(ratio, 2), "needed": f">= {need}", "met": ratio >= need}
           for text, ratio, need in checks]
    for where, rec in (("local", local), ("over latency", remote)):
        # Two workers read two batches at once (one each): per batch is half the peak.
        for arm, in_flight in (("rx.read_chips", 1), (ds, LOADER_WORKERS)):
            ratio = rec[arm]["peak_bytes_per_batch"] / in_flight / batch_bytes
            out.append({"bar": f"{where}: peak memory per batch of {arm} <= 1.5x the batch's "
                               f"bytes ({in_flight} batch(es) in flight)",
                        "ratio": round(ratio, 2), "needed": "<= 1.5", "met": ratio <= 1.5})
    return out


def _reexec_with_fixed_mmap_threshold() -> None:
    """Run again with glibc's mmap threshold fixed, so peak RSS measures each batch.

    glibc raises its mmap threshold to the size of the last large block freed, after
    which batch-sized buffers come from the heap and stay resident when freed: a later
    batch would then grow RSS by nothing. Fixed at 1 MiB, every batch-sized buffer is
    mapped and unmapped, and RSS growth is what one batch allocates.
    """
    if os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(2**20)}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the workload's options: scenes, chip size, batch size, latency of the server.

    benchmarks/karu_profile.py profiles the same workload and takes the same options.
    """
    parser.add_argument("--scenes", type=int, default=32)
    parser.add_argument("--chip", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=20.0)


def main() -> int:
    _reexec_with_fixed_mmap_threshold()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--tile", type=int, default=256)
    parser.add_argument("--batches", type=int, default=2, help="batches per timed run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="8 scenes of 512², 2 reps")
    parser.add_argument("--karu", action="store_true", help="also profile Karu settings")
    parser.add_argument("--data", type=Path, default=REPO / "bench-data")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.scenes, args.size, args.reps, args.batches = 8, 512, 2, 1
    os.environ.update(_gdal_env())
    decoded_mib = args.scenes * BANDS * args.size * args.size * 2 / 2**20
    os.environ["GDAL_CACHEMAX"] = str(max(4, int(decoded_mib / 4)))
    from httpserve import ServerProcess

    rumi_paths, tif_paths = prepare(args.data, args.scenes, args.size, args.tile)
    batch_bytes = args.batch * BANDS * args.chip * args.chip * 2
    result: dict[str, Any] = {"command": " ".join(sys.argv), "args": {
        k: str(v) for k, v in vars(args).items()}, "batch_bytes": batch_bytes,
        "commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip()}
    local = measure(make_arms([str(p) for p in rumi_paths], [str(p) for p in tif_paths],
                              args.chip, args.batch, args.batches, seed=1),
                    args.reps, args.batch, None)
    result["local"] = local
    folder = rumi_paths[0].parent
    with ServerProcess(folder, latency_ms=args.latency_ms) as server:
        urls = [server.url(p.name) for p in rumi_paths]
        tifs = ["/vsicurl/" + server.url(p.name) for p in tif_paths]
        remote = measure(make_arms(urls, tifs, args.chip, args.batch, args.batches, seed=2),
                         args.reps, args.batch, server)
        result["http"] = remote
        if args.karu:
            result["karu"] = karu_profile(server, [p.name for p in rumi_paths], args.chip,
                                          args.batch, args.reps)
    result["bars"] = bars(local, remote, batch_bytes)
    print(report(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
        args.out.with_suffix(".txt").write_text(report(result) + "\n")
    return 0 if all(b["met"] for b in result["bars"]) else 1


def report(result: dict[str, Any]) -> str:
    lines = [f"$ {result['command']}   (commit {result['commit']})",
             f"batch: {int(result['args']['batch'])} chips of {result['args']['chip']}² x "
             f"{BANDS} bands = {result['batch_bytes'] / 2**20:.1f} MiB, from "
             f"{result['args']['scenes']} scenes of {result['args']['size']}², tile "
             f"{result['args']['tile']}", ""]
    for where in ("local", "http"):
        latency = result["args"]["latency_ms"]
        lines.append(where + ("" if where == "local" else f" ({latency} ms per request)") + ":")
        lines.append(f"  {'arm':30s} {'chips/s':>9s} {'s/batch':>8s} {'req/batch':>9s} "
                     f"{'peak MiB':>9s}")
        for name, rec in result[where].items():
            req = rec["requests_per_batch"]
            lines.append(f"  {name:30s} {rec['chips_per_s']:9.1f} {rec['seconds_per_batch']:8.3f} "
                         f"{'-' if req is None else f'{req:.0f}':>9s} "
                         f"{rec['peak_bytes_per_batch'] / 2**20:9.1f}")
    if "karu" in result:
        lines.append("\nKaru settings and call shapes (rx.read_chips over HTTP, fresh process "
                     "each):")
        for row in result["karu"]:
            if "error" in row:
                lines.append(f"  {row['env']} per_call={row['per_call']}: {row['error']}")
                continue
            lines.append(f"  {json.dumps(row['env']):40s} chips/call={row['per_call']:3d} "
                         f"{row['seconds_per_batch']:7.3f} s/batch "
                         f"{row['requests_per_batch']:6.0f} req "
                         f"{row['bytes_per_batch'] / 2**20:7.1f} MiB")
    lines.append("\nbars:")
    for b in result["bars"]:
        lines.append(f"  [{'met' if b['met'] else 'MISSED'}] {b['bar']}: {b['ratio']}x "
                     f"(needed {b['needed']})")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
