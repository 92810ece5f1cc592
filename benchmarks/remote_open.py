"""A lazy open-and-read over a 20 ms-latency HTTP server against the engine (issue 20).

Run: ``.venv/bin/python benchmarks/remote_open.py [--reps 15] [--latency-ms 20]
[--workloads full,chip] [--data-dir bench-data]``.

Files with a sidecar (nodata, scale) are served by the benchmark's loopback
HTTP server (``httpserve.py``, in its own process) sleeping ``--latency-ms``
before each answer. Workloads:

- ``full``: the benchmark cube of ``run.py`` (``datagen.py``: 12 x 4 x 2048²
  uint16, tile 512, codec ``average>zigzag>pfor``; a sidecar with units only,
  so nothing is decoded by xarray), opened and loaded whole,
  as ``sparse_reads.py``'s "full" workload measures it (1.15x the engine
  there before the sidecar GET overlapped the metadata reads);
- ``chip``: a 1 x 4 x 1024² file (tile 256), opened and one 256² chip of
  one band read: the open's cost is most of the time.

Each arm opens the file and reads, inside the timed region:

- ``engine``: ``rumi.info(url)`` then ``rumi.read`` (no sidecar: the engine
  knows nothing of nodata or scale);
- ``xr lazy``: ``xr.open_dataset(url, engine="rumi")`` then ``.values``
  (sidecar GET overlapped with the metadata reads);
- ``xr lazy, sidecar after metadata``: the same with the overlap switched off
  (``sidecar.prefetch`` replaced by ``None``), i.e. the previous sequential open.

Runs are interleaved per repetition after one warm-up whose values are checked
against the engine's (decoded with the sidecar's scale). Requests are counted
at the server. Bar of issue 20: ``xr lazy`` <= 1.1x the engine's median, for
each workload.
"""

from __future__ import annotations

import argparse
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

import numpy as np  # noqa: E402
import rumi  # noqa: E402
import xarray as xr  # noqa: E402

import rumi_xarray as rx  # noqa: E402
from rumi_xarray.conventions import sidecar  # noqa: E402

BAR = 1.1
WINDOW = (384, 512, 256, 256)  # row, col, height, width: 4 tiles of 256²
SCALE = 1e-4


def _files(folder: Path) -> dict[str, tuple[Path, np.ndarray, tuple[int, ...] | None]]:
    """Write (once) the files of both workloads; return path, samples, window per workload."""
    datagen = _module("datagen")
    folder.mkdir(parents=True, exist_ok=True)
    spec = datagen.CubeSpec(times=12, bands=4, size=2048)
    cube = datagen.generate(spec)
    full = folder / "remote-open-full.rumi"
    chip = folder / "remote-open-chip.rumi"
    small = np.random.default_rng(0).integers(1, 10000, (1, 4, 1024, 1024), dtype=np.uint16)
    # The full load's sidecar holds units only, so that xarray decodes nothing and the
    # arms differ by their opens (a 384 MiB uint16 -> float32 decode would swamp them);
    # the chip's holds nodata and scale, decoded as users get them.
    for path, data, tile, codec, dates, facts in (
            (full, cube, 512, "average>zigzag>pfor", datagen.dates_for(12), {"units": "1"}),
            (chip, small, 256, "planar>zigzag>zstd", ["2024-05-01"],
             {"nodata": 0, "scale_factor": SCALE})):
        if not path.exists():
            rx.write_array(path, data, bands=[f"B{i + 1}" for i in range(data.shape[1])],
                           time=dates, tile_size=tile, codec=codec, **facts)
    return {"full": (full, cube, None), "chip": (chip, small, WINDOW)}


def _module(name: str) -> Any:
    return runpy.run_path(str(HERE / "outfile.py"))["bench_module"](name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--workloads", default="full,chip")
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--tag", default="remote_open")
    args = parser.parse_args(argv)
    files = _files(args.data_dir / "remote_open")
    real = sidecar.prefetch

    def engine(url: str, window: tuple[int, ...] | None) -> np.ndarray:
        meta = rumi.info(source=url)
        if window is None:
            return rumi.read(url, meta.header, pattern="t b y x")
        return rumi.read(url, meta.header, pattern="t b y x", bands=[2], window=window)[0, 0]

    def lazy(url: str, window: tuple[int, ...] | None) -> np.ndarray:
        var = xr.open_dataset(url, engine="rumi").band_data
        if window is None:
            return var.values
        row, col, h, w = window
        return var.isel(time=0, band=2, y=slice(row, row + h), x=slice(col, col + w)).values

    def sequential(url: str, window: tuple[int, ...] | None) -> np.ndarray:
        sidecar.prefetch = lambda *a, **k: None  # type: ignore[assignment]
        try:
            return lazy(url, window)
        finally:
            sidecar.prefetch = real  # type: ignore[assignment]

    arms: dict[str, Callable[[str, tuple[int, ...] | None], np.ndarray]] = {
        "engine": engine, "xr lazy": lazy, "xr lazy, sidecar after metadata": sequential}
    # rumi_xarray's process settings (checksums on) apply at its first read, which must
    # come before the engine's: librumi pins them at the first decoded frame.
    probe = xr.open_dataset(files["chip"][0], engine="rumi").band_data
    probe.isel(time=0, band=0, y=slice(0, 1), x=slice(0, 1)).load()
    if not rumi.get_checksum_verification():
        raise SystemExit("checksum verification is off: the arms would not be what users run")
    workloads = args.workloads.split(",")
    times = {(wl, k): [] for wl in workloads for k in arms}  # type: dict[tuple[str, str], list[float]]
    requests: dict[tuple[str, str], int] = {}
    with _module("httpserve").ServerProcess(args.data_dir / "remote_open",
                                            latency_ms=args.latency_ms) as server:
        for run in range(1 + args.reps):
            for wl in workloads:
                path, data, window = files[wl]
                url = server.url(path.name)
                order = list(arms) if run % 2 == 0 else list(reversed(arms))
                for label in order:
                    rx.clear_cache()
                    server.reset()
                    start = time.perf_counter()
                    got = arms[label](url, window)
                    elapsed = time.perf_counter() - start
                    if run == 0:
                        if window is None:
                            expected = data
                        else:
                            row, col, h, w = window
                            expected = data[0, 2, row:row + h, col:col + w]
                        if label != "engine" and wl == "chip":
                            expected = np.where(expected == 0, np.nan,
                                                expected.astype(np.float32) * np.float32(SCALE))
                        if not np.array_equal(got, expected, equal_nan=True):
                            raise SystemExit(f"{wl} {label}: values differ from the engine's")
                        requests[(wl, label)] = server.stats()["requests"]
                    else:
                        times[(wl, label)].append(elapsed)
                    del got
    medians = {k: statistics.median(v) for k, v in times.items()}
    out = [f"HTTP server latency {args.latency_ms:g} ms per request; open + read inside the "
           f"timed region, median of {args.reps}"]
    what = {"full": "full load of 12x4x2048² uint16 (384 MiB, tile 512), sidecar with units",
            "chip": "256² chip of one band of 1x4x1024² uint16 (tile 256), sidecar with "
                    "nodata and scale (decoded)"}
    verdicts = []
    for wl in workloads:
        out.append(f"{wl}: {what[wl]}")
        ref = medians[(wl, "engine")]
        for label in arms:
            m = medians[(wl, label)]
            low = min(times[(wl, label)])
            out.append(f"  {label:32s} {m * 1000:7.1f} ms  (min {low * 1000:.1f})"
                       f"  {requests[(wl, label)]} requests  {m / ref:.2f}x the engine")
        ratio = medians[(wl, "xr lazy")] / ref
        verdicts.append("MET" if ratio <= BAR else "MISS")
        out.append(f"  [{verdicts[-1]}] {wl}: xr lazy / engine = {ratio:.2f} (bar <= {BAR})")
    runpy.run_path(str(HERE / "outfile.py"))["save"](args.tag, out, argv)
    return 0 if all(v == "MET" for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
