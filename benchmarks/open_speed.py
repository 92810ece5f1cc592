"""How long opening and planning take on the client: catalogs of 1,000 and 10,000 scenes.

Run: ``.venv/bin/python benchmarks/open_speed.py [--scenes 1000,10000]``.
Prints seconds; nothing here is asserted (the tests check structure, this
measures time).

The catalog rows are built from the header of one real single-date scene
(4 bands, 1024 x 1024 uint16, tile 256); their paths need not exist, since
nothing here reads pixels. For each size it times, on the client:

- ``rx.open_catalog(table)`` (lazy) and ``rx.open_catalog(table, chunks={})``;
- building a 256 x 256-window time mean (``isel`` + ``mean``) on the chunked cube;
- planning it: the graph ``compute`` would send (dask's optimize and cull), with
  its task count and the largest pickled task (the cube must be one node, not
  carried by every task);
- ``ds.rumi.explain()`` of the window mean (librumi plans every byte range).

Bar of issue 11: open + build + plan of the 10,000-scene window mean < 2 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# When a script here runs, benchmarks/ is sys.path[0], where a module may shadow an
# optional package other libraries probe for (a file named like PyPI's `sparse`, which
# dask.array imports when found, once broke dask here): the folder leaves the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import rumi_xarray as rx  # noqa: E402

#: open + build + plan of the 10,000-scene window mean, on the client.
PLAN_BAR_S = 2.0


def timed(reps: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Return the median wall time of ``reps`` calls and the last result."""
    times, out = [], None
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _write_array() -> Any:
    try:
        from rumi_xarray.write.to_rumi import write_array
    except ImportError:  # the layout before the restructuring (commit b938ca8)
        from rumi_xarray.writer import write_array  # type: ignore[no-redef]
    return write_array


def catalog_rows(folder: Path, scenes: int) -> pd.DataFrame:
    """Return ``scenes`` catalog rows sharing one real header, one day apart."""
    data = np.random.default_rng(0).integers(0, 4000, (1, 4, 1024, 1024)).astype(np.uint16)
    path = folder / "scene.rumi"
    if not path.exists():
        _write_array()(path, data, bands=["B02", "B03", "B04", "B08"],
                       time=[dt.date(2024, 1, 1)],
                       transform=(10, 0, 600000, 0, -10, 5000000), crs=32633, tile_size=256)
    row = rx.catalog([path]).iloc[0]
    table = pd.DataFrame([row] * scenes).reset_index(drop=True)
    table["time_seconds"] = [[int(row["time_seconds"][0]) + 86400 * i] for i in range(scenes)]
    table["path"] = [f"s3://bucket/tile/scene_{i:05d}.rumi" for i in range(scenes)]
    return table


def plan(array: Any) -> dict[Any, Any]:
    """Return the low-level graph ``compute`` would run (optimized and culled)."""
    import dask
    from dask.core import flatten
    from dask.optimization import cull

    if hasattr(array, "expr"):  # dask's array query planning
        optimized = array.optimize()
    else:
        (optimized,) = dask.optimize(array)
    graph, _ = cull(dict(optimized.__dask_graph__()), list(flatten(optimized.__dask_keys__())))
    return dict(graph)


def measure(table: pd.DataFrame, reps: int) -> dict[str, Any]:
    """Time open, build, plan and explain of a window time mean over ``table``'s scenes."""
    out: dict[str, Any] = {"scenes": len(table)}
    out["open_lazy_s"], _ = timed(reps, lambda: rx.open_catalog(table))
    out["open_chunked_s"], cube = timed(reps, lambda: rx.open_catalog(table, chunks={}))

    def build() -> Any:
        return cube.band_data.isel(y=slice(256, 512), x=slice(512, 768)).mean("time")

    out["build_s"], mean = timed(reps, build)
    out["plan_s"], graph = timed(reps, lambda: plan(mean.data))
    out["open_build_plan_s"] = out["open_chunked_s"] + out["build_s"] + out["plan_s"]
    sizes = sorted((len(pickle.dumps(node, protocol=5)) for node in graph.values()),
                   reverse=True)
    out["tasks"] = len(graph)
    out["largest_task_bytes"] = sizes[0]
    out["second_largest_task_bytes"] = sizes[1] if len(sizes) > 1 else 0
    out["chunks"] = [len(c) for c in cube.band_data.data.chunks]
    try:
        out["explain_s"], explanation = timed(1, lambda: mean.rumi.explain())
        out["explain"] = str(explanation)
    except Exception as exc:  # an older checkout may not explain dask graphs
        out["explain_s"], out["explain"] = float("nan"), f"{type(exc).__name__}: {exc}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", default="1000,10000")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"rumi_xarray from {Path(rx.__file__).resolve().parent}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(v) for v in args.scenes.split(",")):
            table = catalog_rows(Path(tmp), n)
            r = measure(table, args.reps)
            print(f"{n:6d} scenes: open lazy {r['open_lazy_s']:.3f} s, chunks={{}} "
                  f"{r['open_chunked_s']:.3f} s (chunks per dim {r['chunks']}); "
                  f"window mean: build {r['build_s']:.3f} s, plan {r['plan_s']:.3f} s "
                  f"({r['tasks']} tasks, largest pickled task {r['largest_task_bytes']:,} B, "
                  f"next {r['second_largest_task_bytes']:,} B); explain {r['explain_s']:.3f} s")
            print(f"        explain: {r['explain']}")
            if n >= 10000:
                total = r["open_build_plan_s"]
                verdict = "MET" if total < PLAN_BAR_S else "MISS"
                print(f"        [{verdict}] open + build + plan {total:.3f} s "
                      f"< {PLAN_BAR_S} s on the client")
    return 0


if __name__ == "__main__":
    sys.exit(main())
