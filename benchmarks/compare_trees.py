"""Interleaved A/B of two checkouts of rumi_xarray on the same data: did a change cost time?

Run: ``python benchmarks/compare_trees.py BASE_TREE [--after TREE] [--data DIR] [--rounds N]``.
``BASE_TREE`` is a checkout of the commit to compare against (``git worktree add
--detach ../base <commit>``); ``--after`` defaults to this repository. Each
round runs one subprocess per tree, the order alternating, with that tree first
on ``PYTHONPATH``; each subprocess times every workload once after a warm-up
on the cube ``benchmarks/run.py`` writes (``--data``, 12 x 4 x 2048^2 uint16),
with the tile cache off so every run reads.
Medians over rounds are compared: a change is refactoring-neutral when no
workload's after/base ratio exceeds ``--bar`` (default 1.15, above the spread
two runs of one tree show on a shared 2-core machine). The native calls and
planned frames of each workload are compared exactly. Results:
``benchmarks/results/latest-compare-trees.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Each workload once after a warm-up, in a fresh process per tree; prints JSON
#: ``{workload: [seconds, native calls, planned frames]}``.
PROGRAM = r'''
import json, sys, time
import numpy as np, xarray as xr, dask
import rumi_xarray as rx
from rumi_xarray.native import process

process.configure()  # rumi_xarray's librumi settings, as users get them
dask.config.set(scheduler="threads", num_workers=2)
# No tile cache: the warm-up run would otherwise serve the timed run's planes.
rx.set_options(cache_bytes=0)
cube = sys.argv[1]
starts = np.random.default_rng(0).integers(0, 2048 - 256, (50, 2))

def lazy_full():
    xr.open_dataset(cube, engine="rumi").band_data.values

def dask_mean():
    xr.open_dataset(cube, engine="rumi", chunks={}).band_data.mean("time").values

def dask_tiles_mean():
    ds = xr.open_dataset(cube, engine="rumi", chunks={"y": 512, "x": 512})
    ds.band_data.mean("time").values

def lazy_chips():
    var = xr.open_dataset(cube, engine="rumi").band_data
    for r, c in starts:
        var.isel(y=slice(r, r + 256), x=slice(c, c + 256)).values

def chain():
    var = xr.open_dataset(cube, engine="rumi", chunks={}).band_data
    var.isel(time=3).sel(band=var.band.values[2]).isel(y=slice(0, 100), x=slice(0, 100)).values

def opens():
    for _ in range(20):
        xr.open_dataset(cube, engine="rumi")

out = {}
for name, run in [("lazy full load", lazy_full), ("dask chunks={} time mean", dask_mean),
                  ("dask tile chunks time mean", dask_tiles_mean), ("lazy 50 chips", lazy_chips),
                  ("dask chained-selection chip", chain), ("20 opens", opens)]:
    run()
    rx.stats(reset=True)
    began = time.perf_counter()
    run()
    took = time.perf_counter() - began
    counts = rx.stats()
    out[name] = [took, counts["calls"], counts["planned_frames"]]
print(json.dumps(out))
'''


def main(argv: list[str] | None = None) -> int:
    """Run the A/B and write its results; return 1 when a bar is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="checkout of the commit to compare against")
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--data", type=Path, default=HERE.parent / "bench-data",
                        help="folder holding cube.rumi (benchmarks/run.py writes it)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--bar", type=float, default=1.15)
    args = parser.parse_args(argv)
    cube = args.data / "cube.rumi"
    if not cube.is_file():
        raise SystemExit(f"{cube}: no cube; run `python benchmarks/run.py` first")
    trees = {"base": args.base.resolve(), "after": args.after.resolve()}
    got: dict[str, list[dict[str, list[float]]]] = {name: [] for name in trees}
    for i in range(args.rounds):
        for name in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
            env = {**os.environ, "PYTHONPATH": str(trees[name])}
            done = subprocess.run([sys.executable, "-c", PROGRAM, str(cube)], env=env,
                                  capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{name} ({trees[name]}) failed:\n{done.stderr[-3000:]}")
            got[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {i + 1} {name}: done", flush=True)
    lines = [f"base {trees['base']}; after {trees['after']}; cube {cube}",
             f"median seconds of {args.rounds} interleaved rounds (one process per tree per "
             "round); calls and planned frames of one run",
             f"  {'workload':30} {'base s':>8} {'after s':>8} {'ratio':>6}  calls b/a  frames b/a",
             ]
    verdicts = []
    for workload in got["base"][0]:
        base = statistics.median(r[workload][0] for r in got["base"])
        after = statistics.median(r[workload][0] for r in got["after"])
        calls = (got["base"][0][workload][1], got["after"][0][workload][1])
        frames = (got["base"][0][workload][2], got["after"][0][workload][2])
        lines.append(f"  {workload:30} {base:8.3f} {after:8.3f} {after / base:6.2f}"
                     f"  {calls[0]:>4}/{calls[1]:<4}  {frames[0]:>5}/{frames[1]:<5}")
        ok = after / base <= args.bar and calls[0] == calls[1] and frames[0] == frames[1]
        verdicts.append(f"  [{'met' if ok else 'MISSED'}] {workload}: after/base "
                        f"{after / base:.2f} (bar <= {args.bar}), same calls and frames: "
                        f"{calls[0] == calls[1] and frames[0] == frames[1]}")
    lines += ["", "bars:", *verdicts]
    runpy.run_path(str(HERE / "outfile.py"))["save"]("compare-trees", lines,
                                                       argv if argv is not None else None)
    return 1 if any("MISSED" in v for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
