"""What librumi's frame checksum verification costs (rumi_xarray turns it on).

Run: ``.venv/bin/python benchmarks/verify_cost.py [FILE]``. The setting is
process-wide and pinned at first use, so each mode runs in its own process;
runs alternate between the modes and the medians are compared.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys, time
import rumi_xarray as rx, xarray as xr, rumi
path = sys.argv[1]
assert rumi.get_checksum_verification() == (sys.argv[2] == "1")
rx.set_options(cache_bytes=0)
times = []
for _ in range(int(sys.argv[3])):
    # a fresh open each time: xarray keeps the values of a variable once loaded
    var = xr.open_dataset(path, engine="rumi").band_data
    start = time.perf_counter()
    var.load()
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def main() -> None:
    repo = Path(__file__).resolve().parent.parent
    found = sorted(glob.glob(str(repo / "bench-data" / "*.rumi")))
    path = sys.argv[1] if len(sys.argv) > 1 else (found[0] if found else None)
    if path is None:
        raise SystemExit("no file: run benchmarks/run.py first or pass a .rumi path")
    results: dict[str, list[float]] = {"0": [], "1": []}
    for _ in range(3):
        for mode in ("0", "1"):
            env = {**os.environ, "RUMI_VERIFY": mode, "RUMI_NUM_THREADS": "2"}
            out = subprocess.run([sys.executable, "-c", CHILD, path, mode, "5"], env=env,
                                 capture_output=True, text=True, check=True)
            results[mode].extend(json.loads(out.stdout)[1:])  # first read warms up
    off, on = statistics.median(results["0"]), statistics.median(results["1"])
    print(f"{os.path.basename(path)}: whole-file lazy read, median of {len(results['0'])}")
    print(f"  checksums off {off:.3f} s, on {on:.3f} s: verification costs "
          f"{(on / off - 1) * 100:+.1f} %")


if __name__ == "__main__":
    main()
