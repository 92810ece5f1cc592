"""Hardening: corruption, hostile input, concurrency, resources, worker faults."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.backend import cache
from rumi_xarray.model.cube import Scene
from rumi_xarray.native import process, reads
from rumi_xarray.sources.redact import redact_text
from rumi_xarray.write.to_rumi import write_array
from tests.checks import run_threads

HERE = Path(__file__).parent
FLIPS = int(os.environ.get("RUMI_BITFLIP_TRIALS", "120"))
# `make test` soaks briefly; `make fuzz` soaks ten times longer (RUMI_SOAK_*).
SOAK_SECONDS = float(os.environ.get("RUMI_SOAK_SECONDS", "8"))
SOAK_READS = int(os.environ.get("RUMI_SOAK_READS", "3000"))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("hard") / "small.rumi"
    data = np.random.default_rng(21).integers(0, 3000, (2, 2, 128, 128)).astype(np.uint16)
    header = write_array(path, data, bands=["a", "b"], time=["2024-01-01", "2024-01-02"],
                         transform=(10, 0, 0, 0, -10, 0), crs=32633, tile_size=64)
    return path, header, data


def test_checksums_are_on_by_default():
    assert process.verification()


def test_import_turns_checksums_on_and_sizes_no_pool(small):
    path, _, _ = small
    program = f"""
import sys, rumi
assert not rumi.get_checksum_verification()
import rumi_xarray, xarray as xr
xr.backends.list_engines()
assert rumi.get_checksum_verification(), "import did not turn checksums on"
assert rumi.get_num_threads() == 1, "import sized librumi's pool"
xr.open_dataset({str(path)!r}, engine="rumi").band_data.values
assert rumi.get_checksum_verification()
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k not in ("RUMI_VERIFY", "RUMI_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_every_single_bit_flip_raises_naming_the_file(small, tmp_path):
    path, header, data = small
    blob = path.read_bytes()
    frames = reads.plan_ranges(Scene(str(path), header), None, None, 0, 0, 128, 128)
    rng = random.Random(7)
    corrupt = tmp_path / "corrupt.rumi"
    for trial in range(FLIPS):
        offset, length = rng.choice(frames)
        position = offset + rng.randrange(length)
        damaged = bytearray(blob)
        damaged[position] ^= 1 << rng.randrange(8)
        corrupt.write_bytes(bytes(damaged))
        cache.clear_cache()
        # Typed (a RumiError naming the file), and an integrity failure, not a refusal.
        with pytest.raises((rx.RumiIOError, rx.RumiFormatError), match=r"corrupt\.rumi"):
            if trial % 2:  # the lazy path, with the header a catalog would give
                var = xr.open_dataset(corrupt, engine="rumi", header=header).band_data
            else:  # dask chunks (read groups)
                var = xr.open_dataset(corrupt, engine="rumi", chunks={}).band_data
            got = var.values
            # Only reached if no error: then the values must be exact.
            np.testing.assert_array_equal(got, data)
            raise AssertionError(f"flip at byte {position} was not detected")


def test_explicit_opt_out_is_respected_and_pinned_off_is_reported(small):
    path, _, _ = small
    program = f"""
import rumi, rumi_xarray as rx, xarray as xr
xr.open_dataset({str(path)!r}, engine="rumi").band_data.values
assert not rumi.get_checksum_verification()
try:
    rx.set_options(verify=True)
except rx.RumiSettingsError as exc:
    assert "pinned off" in str(exc), exc
    print("reported")
"""
    env = {**os.environ, "RUMI_VERIFY": "0"}
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "reported"


def test_hostile_inputs_never_crash_or_hang(small, corpus, tmp_path):
    # The program also fails on any error that is not an rx.RumiError.
    path, header, _ = small
    other_header = corpus["cell_hwbt_u16"][1]
    examples = int(os.environ.get("RUMI_FUZZ_EXAMPLES", "80"))
    args = [sys.executable, str(HERE / "programs" / "fuzz_inputs.py"), str(path),
            header.hex(), other_header.hex(), str(tmp_path), str(examples)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60 + examples)
    assert out.returncode == 0, f"crashed with {out.returncode}: {out.stderr[-3000:]}"
    assert "examples ok" in out.stdout


def test_threads_soak_equals_ground_truth(corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    lazy = xr.open_dataset(path, engine="rumi").band_data
    grouped = rx.open_dataset(path, chunks={}).band_data
    deadline = time.monotonic() + SOAK_SECONDS
    failures: list[str] = []
    counts = [0] * 16

    def worker(i: int) -> None:
        rng = np.random.default_rng(i)
        while time.monotonic() < deadline and not failures:
            t = rng.integers(0, data.shape[0], size=rng.integers(1, 3))
            b = int(rng.integers(0, data.shape[1]))
            y0, x0 = int(rng.integers(0, 140)), int(rng.integers(0, 190))
            sel = {"time": t, "band": b, "y": slice(y0, y0 + int(rng.integers(1, 80))),
                   "x": slice(x0, x0 + int(rng.integers(1, 80)), int(rng.integers(1, 4)))}
            var = grouped if i % 4 == 0 else lazy
            got = var.isel(sel).values
            expected = data[t][:, b][:, sel["y"], sel["x"]]
            if not np.array_equal(got, expected):
                failures.append(f"thread {i}: {sel}")
            counts[i] += 1

    run_threads(worker, 16)
    assert failures == []
    assert min(counts) > 0


def test_no_fd_thread_or_memory_growth(small):
    psutil = pytest.importorskip("psutil")
    path, header, data = small
    proc = psutil.Process()

    def reads(n: int) -> None:
        var = xr.open_dataset(path, engine="rumi", header=header).band_data
        for i in range(n):  # every read reaches librumi: the tile cache is off
            y, x = i % 128, (i * 7) % 128
            assert var[i % 2, i % 2, y, x].item() == data[i % 2, i % 2, y, x]

    def opens(n: int) -> None:
        for _ in range(n):
            with xr.open_dataset(path, engine="rumi") as ds:
                assert ds.sizes["x"] == 128

    with rx.set_options(cache_bytes=0):
        reads(500)  # warm up pools and lazy imports
        opens(50)
        fds, rss, threads = proc.num_fds(), proc.memory_info().rss, proc.num_threads()
        reads(SOAK_READS)
        opens(SOAK_READS // 10)
        assert proc.num_fds() <= fds + 2
        assert proc.num_threads() <= threads
        assert proc.memory_info().rss - rss < 48 * 2**20


def test_fork_safety_with_multiprocessing_scheduler(corpus, process_pool):
    path, _, data, _ = corpus["plane_bt_i16"]
    with rx.set_options(group_bytes=64 * 64 * 2):
        var = xr.open_dataset(path, engine="rumi", chunks={}).band_data
    np.testing.assert_array_equal(var.values, data)  # parent has used librumi
    got = var.mean("time").compute(scheduler="processes", pool=process_pool)
    np.testing.assert_allclose(got.values, data.mean(axis=0))
    pid = os.fork()
    if pid == 0:  # the child reads after the parent did
        ok = np.array_equal(xr.open_dataset(path, engine="rumi").band_data.values, data)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_credentials_never_appear(tmp_path):
    url = "https://bob:hunter2@127.0.0.1:9/data/scene.rumi?X-Amz-Signature=abc123&token=zzz"
    scene = Scene(url, b"header")
    for text in (repr(scene), scene.name, scene.describe(),
                 redact_text(f"failed to fetch {url} (status 403)")):
        assert "hunter2" not in text and "abc123" not in text and "zzz" not in text
        assert "bob" not in text
    assert "127.0.0.1:9/data/scene.rumi" in scene.name
