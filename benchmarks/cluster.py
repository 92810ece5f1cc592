"""The default experience on a cluster: a time mean with chunks={} against chunks="auto".

Run: ``.venv/bin/python benchmarks/cluster.py [--reps 5]``.

The demo series (``rumi_xarray.demo.synthetic.scene_series``: 24 dates x 4
bands x 512 x 512 uint16, written with ``rx.to_rumi``) is opened with
``xr.open_dataset(engine="rumi")`` and ``rx.open_dataset`` and reduced over
time on a ``LocalCluster`` of 2 worker processes x 1 thread. Runs alternate
between the chunkings (after one warm-up each, whose result is checked
against numpy on ``rumi.read``); the medians are compared. Opening is inside
the timed region, as a user pays it.

Bar of issue 11: ``chunks={}`` within 2x of ``chunks="auto"``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

# When a script here runs, benchmarks/ is sys.path[0], where a module may shadow an
# optional package other libraries probe for (a file named like PyPI's `sparse`, which
# dask.array imports when found, once broke dask here): the folder leaves the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402
import rumi  # noqa: E402
import xarray as xr  # noqa: E402

import rumi_xarray as rx  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
#: chunks={} time mean within this factor of chunks="auto".
BAR = 2.0

OPENERS = {
    'xr chunks={}': lambda p: xr.open_dataset(p, engine="rumi", chunks={}),
    'xr chunks="auto"': lambda p: xr.open_dataset(p, engine="rumi", chunks="auto"),
    'rx chunks={}': lambda p: rx.open_dataset(p, chunks={}),
    'rx chunks="auto"': lambda p: rx.open_dataset(p, chunks="auto"),
}


def demo_series(folder: Path) -> Path:
    """Write (once) the 24 x 4 x 512 x 512 demo series; return its path."""
    path = folder / "demo-series-24x4x512.rumi"
    if not path.exists():
        from rumi_xarray.demo.synthetic import scene_series

        folder.mkdir(parents=True, exist_ok=True)
        rx.to_rumi(scene_series(24, 512), path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    path = demo_series(args.data_dir)
    header = rumi.info(source=str(path)).header
    expected = rumi.read(str(path), header, pattern="t b y x").mean(axis=0)
    print(f"rumi_xarray from {Path(rx.__file__).resolve().parent}; data {path}")
    times: dict[str, list[float]] = {k: [] for k in OPENERS}
    tasks: dict[str, int] = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        for run in range(1 + args.reps):
            for label, opener in OPENERS.items():
                client.run(rx.clear_cache)
                start = time.perf_counter()
                var = opener(path).band_data
                mean = var.mean("time").compute()
                elapsed = time.perf_counter() - start
                if run == 0:
                    if not np.allclose(mean.values, expected):
                        raise SystemExit(f"{label}: time mean differs from rumi.read's")
                    chunks = var.data.chunks
                    tasks[label] = len(var.mean("time").data.__dask_graph__())
                    print(f"  {label:18s} chunks {[len(c) for c in chunks]} per dim, "
                          f"{tasks[label]} tasks")
                else:
                    times[label].append(elapsed)
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(f"time mean on LocalCluster(2 workers x 1 thread), median of {args.reps}:")
    for label, m in medians.items():
        print(f"  {label:18s} {m:.3f} s  (min {min(times[label]):.3f})")
    for api in ("xr", "rx"):
        ratio = medians[f"{api} chunks={{}}"] / medians[f'{api} chunks="auto"']
        verdict = "MET" if ratio <= BAR else "MISS"
        print(f"  [{verdict}] {api} chunks={{}} / chunks=\"auto\" = {ratio:.2f} (bar <= {BAR})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
