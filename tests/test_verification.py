"""Checksum verification is a guarantee: a read it cannot protect is refused (issue 19).

librumi fixes its verification setting at the first decoded frame of a
process. When a user's own ``rumi.read`` came first, verification is pinned
off; rumi_xarray then refuses every read with ``RumiVerificationError`` (never a
warning and wrong numbers) until the user accepts unverified reads. The
setting is process-wide, so each case runs in a fresh interpreter.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rumi_xarray as rx
from rumi_xarray.errors import with_context
from rumi_xarray.model.cube import Scene
from rumi_xarray.native import binding, reads
from rumi_xarray.write.to_rumi import write_array

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A good file, the same file with one bit flipped in every frame, and its truth."""
    folder = tmp_path_factory.mktemp("verify")
    data = np.random.default_rng(21).integers(0, 3000, (2, 2, 128, 128)).astype(np.uint16)
    good = folder / "good.rumi"
    header = write_array(good, data, bands=["a", "b"], time=["2024-01-01", "2024-01-02"],
                         transform=(10, 0, 0, 0, -10, 0), crs=32633, tile_size=64)
    blob = bytearray(good.read_bytes())
    rng = random.Random(3)
    for offset, length in reads.plan_ranges(Scene(str(good), header), None, None,
                                            0, 0, 128, 128):
        blob[offset + rng.randrange(length)] ^= 1 << rng.randrange(8)
    corrupt = folder / "corrupt.rumi"
    corrupt.write_bytes(bytes(blob))
    truth = folder / "truth.npy"
    np.save(truth, data)
    return {"good": good, "corrupt": corrupt, "truth": truth}


PRELUDE = """
import sys, warnings, numpy as np
warnings.simplefilter("error", RuntimeWarning)  # a warning in place of an error fails
good, corrupt, truth = {good!r}, {corrupt!r}, np.load({truth!r})
{before}
loaded_before_import = "rumi" in sys.modules
import xarray as xr
import rumi_xarray as rx
import_loaded_rumi = "rumi" in sys.modules and not loaded_before_import
import rumi

def wrong(**kw):
    return int((xr.open_dataset(corrupt, engine="rumi", **kw).band_data.values != truth).sum())

def refused(**kw):
    try:
        wrong(**kw)
    except rx.RumiVerificationError as exc:
        return exc
    raise AssertionError("the unverifiable read was not refused")
"""


def _run(program: str, files: dict[str, Path], before: str = "", **env: str) -> str:
    """Run ``program`` after ``import rumi_xarray``, and ``before`` ahead of that import."""
    full = PRELUDE.format(before=before, **{k: str(v) for k, v in files.items()}) + program
    environment = {k: v for k, v in os.environ.items() if k != "RUMI_VERIFY"}
    environment.update(env)
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", full], env=environment, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_a_direct_rumi_read_before_the_import_makes_every_read_refuse_naming_the_file(files):
    out = _run("""
assert not rumi.get_checksum_verification()  # pinned off before the import
for kw in ({}, {"chunks": {}}, {}, {"chunks": {}}):  # every read, lazy and dask
    exc = refused(**kw)
    assert isinstance(exc, rx.RumiSettingsError) and isinstance(exc, RuntimeError)
    assert not isinstance(exc, OSError)
    text = str(exc)
    assert text.startswith(corrupt + ": reading"), text
    assert exc.source == corrupt
    for remedy in ("RUMI_VERIFY=1", "import rumi_xarray before the first direct rumi.read",
                   "rx.set_options(verify=False)", "pinned off"):
        assert remedy in text, remedy
# a good file is refused too: nothing is read unverified behind the user's back
try:
    xr.open_dataset(good, engine="rumi").band_data.values
    raise AssertionError("read unverified")
except rx.RumiVerificationError:
    pass
print("refused")
""", files, before="import rumi; rumi.read(good, rumi.info(source=good).header)  # a check")
    assert out.strip() == "refused"


def test_verify_false_accepts_unverified_reads_and_the_refusal_comes_back(files):
    out = _run("""
with rx.set_options(verify=False):
    n = wrong()  # accepted: the corrupt frames decode into wrong numbers
    m = wrong(chunks={})
assert n > 0 and m == n, (n, m)
refused()  # the block's end restores verify=True: refused again
rx.set_options(verify=False)
assert wrong(chunks={}) == n
try:
    rx.set_options(verify=True)  # cannot be had: said at once
    raise AssertionError("set_options(verify=True) accepted")
except rx.RumiVerificationError as exc:
    assert "pinned off" in str(exc) and "RUMI_VERIFY=1" in str(exc)
assert rx.get_options()["verify"] is False
print("accepted", n)
""", files, before="import rumi; rumi.read(good, rumi.info(source=good).header)")
    assert out.startswith("accepted")


def test_unverified_reads_chosen_by_the_environment_are_not_refused(files):
    # RUMI_VERIFY=0 is respected by the import: librumi's default (off) is kept.
    out = _run("""
import os
assert os.environ["RUMI_VERIFY"] == "0" and not rumi.get_checksum_verification()
rumi.read(good, rumi.info(source=good).header)
print("wrong", wrong(), wrong(chunks={}))
""", files, RUMI_VERIFY="0")
    assert out.split()[0] == "wrong" and int(out.split()[1]) > 0


#: librumi's own reads of the corrupt file: every one must raise, none return numbers.
DIRECT_READS = """
header = rumi.info(source=corrupt).header
for call in (lambda: rumi.read(corrupt, header),
             lambda: rumi.read_many([corrupt], [header], windows=[(0, 0, 64, 64)])):
    try:
        call()
        raise AssertionError("librumi's own read returned unverified numbers")
    except OSError as exc:
        assert "checksum" in str(exc).lower(), exc
"""


@pytest.mark.parametrize("rumi_loaded", [False, True])
def test_the_import_turns_verification_on_for_librumis_own_reads(files, rumi_loaded):
    # librumi loaded and asked for its setting before the import (it read its default,
    # off), or not loaded at all: after `import rumi_xarray` its own reads are verified.
    before = ("import rumi; assert not rumi.get_checksum_verification()" if rumi_loaded
              else "")
    out = _run("""
import os
assert not import_loaded_rumi, "import rumi_xarray loaded librumi"
assert os.environ["RUMI_VERIFY"] == "1"
assert rumi.get_checksum_verification()
""" + DIRECT_READS + """
try:
    wrong()
    raise AssertionError("corruption not detected")
except rx.RumiChecksumError:
    pass
print("verified")
""", files, before=before)
    assert out.strip() == "verified"


@pytest.mark.parametrize("how", ["environment", "set_options"])
def test_verification_chosen_before_a_direct_read_detects_the_corruption(files, how):
    program = """
if HOW == "set_options":
    rx.set_options(verify=True)  # applied at once: the direct read below is verified
rumi.read(good, rumi.info(source=good).header)
assert rumi.get_checksum_verification()
for kw in ({}, {"chunks": {}}):
    try:
        wrong(**kw)
        raise AssertionError("corruption not detected")
    except rx.RumiChecksumError as exc:
        assert isinstance(exc, rx.RumiIOError) and isinstance(exc, OSError)
        assert str(exc).startswith(corrupt + ": reading"), exc
        assert "checksum mismatch" in str(exc)
try:
    rumi.read(corrupt, rumi.info(source=corrupt).header)  # librumi's own read too
    raise AssertionError("rumi.read missed the corruption")
except OSError:
    pass
print("detected")
""".replace("HOW", repr(how))
    env = {"RUMI_VERIFY": "1"} if how == "environment" else {}
    assert _run(program, files, **env).strip() == "detected"


def test_verification_pinned_on_when_off_was_asked_keeps_reads_verified(files):
    out = _run("""
rumi.read(good, rumi.info(source=good).header)  # pinned on by RUMI_VERIFY=1
warnings.simplefilter("ignore", RuntimeWarning)
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    rx.set_options(verify=False)
assert any("stay verified" in str(w.message) for w in seen), seen
try:
    wrong()
    raise AssertionError("corruption not detected")
except rx.RumiChecksumError:
    print("verified")
""", files, RUMI_VERIFY="1")
    assert out.strip() == "verified"


def test_a_librumi_runtime_error_during_a_read_is_not_a_settings_error(files, monkeypatch):
    err = with_context(RuntimeError("rumi: internal error"), "x.rumi: reading")
    assert isinstance(err, rx.RumiInternalError) and isinstance(err, RuntimeError)
    assert not isinstance(err, rx.RumiSettingsError)

    # librumi's internal errors cannot be provoked on demand: stand in for one at
    # the binding, and check what a read makes of it.
    def internal(*args, **kwargs):
        raise RuntimeError("rumi: internal error (status 99)")

    monkeypatch.setattr(binding, "read_into", internal)
    import xarray as xr

    with pytest.raises(rx.RumiInternalError) as info:
        _ = xr.open_dataset(files["good"], engine="rumi").band_data.values
    assert not isinstance(info.value, rx.RumiSettingsError)
    assert str(info.value).startswith(f"{files['good']}: reading")
    assert "internal error" in str(info.value)
