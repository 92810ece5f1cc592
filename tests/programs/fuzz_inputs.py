"""Feed mutated Rumi files and headers to rumi_xarray; exit non-zero on a crash or an untyped error.

Run in a subprocess by the tests so that a segfault or an abort fails the
test instead of killing the test runner. Usage:
    fuzz_inputs.py FILE HEADER_HEX OTHER_HEADER_HEX WORKDIR EXAMPLES
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rumi_xarray as rx

path, header_hex, other_hex, workdir, examples = sys.argv[1:6]
blob = Path(path).read_bytes()
header = bytes.fromhex(header_hex)
other = bytes.fromhex(other_hex)
target = Path(workdir) / "mutant.rumi"
#: Every failure must be a typed rumi_xarray error naming the file: anything else
#: (a bare ValueError from deep inside, a crash) fails the run. The README's one
#: exception, a plain TypeError for an argument of the wrong Python type, cannot
#: happen here: the program passes a path and bytes.
EXPECTED = (rx.RumiError,)


def mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for position, value in edits:
        out[position % len(out)] = value
    return bytes(out[:cut] if cut is not None else out)


def exercise(file_bytes: bytes, header_bytes: bytes | None) -> None:
    target.write_bytes(file_bytes)
    try:
        ds = xr.open_dataset(target, engine="rumi", header=header_bytes)
        np.asarray(ds.band_data.isel(x=slice(0, 70), y=slice(60, 70)).values)
        rx.open_dataset(target, chunks={}, header=header_bytes).band_data.load()
    except EXPECTED:
        pass


edit = st.tuples(st.integers(0, 2**31), st.integers(0, 255))
region = st.sampled_from(["head", "tail", "anywhere"])


@settings(max_examples=int(examples), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(region, st.lists(edit, min_size=1, max_size=6), st.one_of(st.none(),
       st.integers(0, len(blob))), st.sampled_from([None, "own", "other", "mutated"]))
def run(where, edits, cut, which):
    size = len(blob)
    span = {"head": 512, "tail": 4096, "anywhere": size}[where]
    base = 0 if where != "tail" else size - span
    placed = [(base + p % span, v) for p, v in edits]
    chosen = {None: None, "own": header, "other": other,
              "mutated": mutate(header, edits, None)}[which]
    exercise(mutate(blob, placed, cut), chosen)
    exercise(blob, mutate(header, edits, None))


run()
print(f"{examples} examples ok")
