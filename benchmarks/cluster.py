"""A time mean on a cluster: the dask paths against the engine, with several chunks per worker.

Run: ``.venv/bin/python benchmarks/cluster.py [--reps 5] [--size 1024] [--group-mib 16]``.

The demo series (``rumi_xarray.demo.synthetic.scene_series``: 24 dates x 4
bands x ``--size``² uint16, 192 MiB at 1024², written once with
``rx.to_rumi``, tile 512) is reduced over time on a ``LocalCluster`` of 2
worker processes x 1 thread. Arms, interleaved per repetition (order
reversed every other one), opening inside the timed region:

- ``engine``: one ``rumi.read`` of the whole file on a worker, ``mean`` in
  numpy there, the result sent back (what the dask paths must approach);
- ``xr chunks={}``: ``xr.open_dataset(engine="rumi", chunks={})`` with read
  groups of ``--group-mib`` MiB (``rx.set_options(group_bytes=...)``), so the
  cube is several chunks per worker;
- ``xr chunks="auto"``: dask's ``array.chunk-size`` (128 MiB) multiples of
  the same read groups, fewer and larger chunks.

Before any time is compared, the arms are checked to differ (chunks and
tasks of ``chunks={}`` and ``"auto"``) and every worker is checked to have
read (``rx.stats`` per worker); the warm-up's results are checked against
numpy on ``rumi.read``. Bars: every dask arm's median <= 1.5x the engine's
(the design bar for dask paths over latency, here for worker processes),
and ``chunks={}`` <= 2x ``"auto"``. Either can fail: v0.1's per-frame
graphs took 3x ``"auto"`` on the old 512² version of this benchmark.
"""

from __future__ import annotations

import argparse
import runpy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# When a script here runs, benchmarks/ is sys.path[0], where a module may shadow an
# optional package other libraries probe for (a file named like PyPI's `sparse`, which
# dask.array imports when found, once broke dask here): the folder leaves the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402
import rumi  # noqa: E402
import xarray as xr  # noqa: E402

import rumi_xarray as rx  # noqa: E402
from rumi_xarray.native.stats import snapshot  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
#: Every dask arm within this factor of the engine's time.
ENGINE_BAR = 1.5
#: chunks={} within this factor of chunks="auto".
AUTO_BAR = 2.0


def demo_series(folder: Path, size: int) -> Path:
    """Write (once) the 24 x 4 x size x size demo series; return its path."""
    path = folder / f"demo-series-24x4x{size}-t512.rumi"
    if not path.exists():
        from rumi_xarray.demo.synthetic import scene_series

        folder.mkdir(parents=True, exist_ok=True)
        rx.to_rumi(scene_series(24, size), path, tile_size=512)
    return path


def engine_mean(path: str, header: bytes) -> np.ndarray:
    """Time mean through one plain ``rumi.read`` (runs on a worker)."""
    return rumi.read(path, header, pattern="t b y x").mean(axis=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--group-mib", type=int, default=16)
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--tag", default="cluster")
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    path = demo_series(args.data_dir, args.size)
    header = bytes(rumi.info(source=str(path)).header)
    raw = rumi.read(str(path), header, pattern="t b y x")
    expected = raw.mean(axis=0)
    group = f"{args.group_mib}MiB"

    def dask_arm(chunks: Any) -> Any:
        def run(client: Any) -> np.ndarray:
            with rx.set_options(group_bytes=group):
                var = xr.open_dataset(path, engine="rumi", chunks=chunks,
                                      mask_and_scale=False).band_data
            return var.mean("time").compute().values
        return run

    def engine_arm(client: Any) -> np.ndarray:
        return client.submit(engine_mean, str(path), header, pure=False).result()

    arms = {"engine": engine_arm, "xr chunks={}": dask_arm({}),
            'xr chunks="auto"': dask_arm("auto")}
    times: dict[str, list[float]] = {k: [] for k in arms}
    shape: dict[str, str] = {}
    readers: dict[str, int] = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        for label in ("xr chunks={}", 'xr chunks="auto"'):
            with rx.set_options(group_bytes=group):
                var = xr.open_dataset(path, engine="rumi",
                                      chunks={} if label.endswith("{}") else "auto").band_data
            mean = var.mean("time").data
            shape[label] = (f"{var.data.npartitions} chunks "
                            f"{[len(c) for c in var.data.chunks]} per dim, "
                            f"{len(mean.__dask_graph__())} tasks")
        if shape["xr chunks={}"] == shape['xr chunks="auto"']:
            raise SystemExit(f"the arms do not differ: {shape}")
        for run in range(1 + args.reps):
            order = list(arms) if run % 2 == 0 else list(reversed(arms))
            for label in order:
                client.run(rx.clear_cache)
                client.run(snapshot, True)
                start = time.perf_counter()
                got = arms[label](client)
                elapsed = time.perf_counter() - start
                if run == 0:
                    if not np.allclose(got, expected):
                        raise SystemExit(f"{label}: time mean differs from rumi.read's")
                    if label != "engine":
                        calls = {w: c["calls"] for w, c in client.run(snapshot).items()}
                        readers[label] = sum(1 for c in calls.values() if c)
                        if readers[label] < 2:
                            raise SystemExit(f"{label}: only {readers[label]} worker read "
                                             f"({calls})")
                else:
                    times[label].append(elapsed)
    medians = {k: statistics.median(v) for k, v in times.items()}
    out = [f"data {path} ({raw.nbytes / 2**20:.0f} MiB, {'x'.join(map(str, raw.shape))} "
           f"uint16); read groups {group}"]
    for label, text in shape.items():
        out.append(f"  {label:18s} {text}; {readers[label]} workers read")
    out.append(f"time mean on LocalCluster(2 workers x 1 thread), median of {args.reps}:")
    for label, m in medians.items():
        out.append(f"  {label:18s} {m:.3f} s  (min {min(times[label]):.3f})  "
                   f"{m / medians['engine']:.2f}x the engine")
    verdicts = []
    for label in ("xr chunks={}", 'xr chunks="auto"'):
        ratio = medians[label] / medians["engine"]
        verdicts.append("MET" if ratio <= ENGINE_BAR else "MISS")
        out.append(f"  [{verdicts[-1]}] {label} / engine = {ratio:.2f} (bar <= {ENGINE_BAR})")
    ratio = medians["xr chunks={}"] / medians['xr chunks="auto"']
    verdicts.append("MET" if ratio <= AUTO_BAR else "MISS")
    out.append(f"  [{verdicts[-1]}] xr chunks={{}} / chunks=\"auto\" = {ratio:.2f} "
               f"(bar <= {AUTO_BAR})")
    runpy.run_path(str(REPO / "benchmarks" / "outfile.py"))["save"](args.tag, out, argv)
    return 0 if all(v == "MET" for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
