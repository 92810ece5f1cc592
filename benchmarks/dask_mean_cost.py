"""What dask itself costs for a time mean by chunk shape, without any I/O (issue 20).

Usage::

    python benchmarks/dask_mean_cost.py

The benchmark cube's shape (12 x 4 x 2048² uint16) in memory, as a dask array
chunked like ``chunks={}`` (read groups) and like tile-sized user chunks (one
frame per chunk), time mean with 2 threads, median of 5 interleaved runs. Over
HTTP the two make the same requests (``run.py``'s ``xr-tiles`` row); what is
left between them is this: 768 one-date chunks make dask combine 12 partial
float64 sums per pixel instead of reducing inside each chunk.
"""

from __future__ import annotations

import statistics
import time

import dask
import dask.array as da
import numpy as np


def main() -> None:
    dask.config.set(scheduler="threads", num_workers=2)
    x = np.random.default_rng(0).integers(0, 10000, (12, 4, 2048, 2048), dtype=np.uint16)
    shapes = {"read groups (12,4,1024,2048)": (12, 4, 1024, 2048),
              "tiles (1,1,512,512)": (1, 1, 512, 512)}
    arrays = {k: da.from_array(x, chunks=c) for k, c in shapes.items()}
    times: dict[str, list[float]] = {k: [] for k in shapes}
    for _ in range(5):
        for k, a in arrays.items():
            t = time.perf_counter()
            a.mean(axis=0).compute()
            times[k].append(time.perf_counter() - t)
    for k, v in times.items():
        print(f"{k:32s} median {statistics.median(v):.3f} s  min {min(v):.3f} s")
    groups, tiles = (statistics.median(v) for v in times.values())
    print(f"tiles / read groups: {tiles / groups:.2f}x (no I/O: dask's reduction alone)")


if __name__ == "__main__":
    main()
