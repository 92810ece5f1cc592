"""Nothing silently wrong: labels, sidecars, facts, catalog rows and option contexts.

librumi verifies frames (tests/test_hardening.py flips their bits); everything
else that changes an answer is protected by the digests of
``rumi_xarray.conventions.digests``. Every case here ends exact (the same
Dataset as the undamaged file gives) or with a typed ``RumiError``, never with
a different answer.
"""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray import options
from rumi_xarray.backend import cache
from rumi_xarray.catalogs.table import ROW_DIGEST, row_digest
from rumi_xarray.conventions.facts import Facts
from rumi_xarray.write.to_rumi import write_array

#: Sampled positions per corruption test (the whole suite stays within seconds).
TRIALS = int(os.environ.get("RUMI_INTEGRITY_TRIALS", "60"))
BANDS = ["B02, Blue, 490nm", "B03, Green, 560nm", "B04, Red, 665nm"]
TIMES = ["2024-01-01", "2024-02-01"]


def _write(path: Path, seed: int, time: list[str] = TIMES) -> np.ndarray:
    data = np.random.default_rng(seed).integers(1, 3000, (len(time), 3, 16, 16)
                                               ).astype(np.uint16)
    data[0, 0, 0, 0] = 0  # one masked sample: nodata matters to the answer
    write_array(path, data, bands=BANDS, time=time, tile_size=8, nodata=0,
                scale_factor=1e-4, add_offset=-0.1, units="reflectance",
                transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), crs=32633)
    return data


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, xr.Dataset]:
    path = tmp_path_factory.mktemp("integrity") / "scene.rumi"
    _write(path, 3)
    return path, xr.open_dataset(path, engine="rumi").load()


def _outcome(path: Path, truth: xr.Dataset, **kwargs: object) -> str:
    """Return "typed", "exact", or raise: the answer of a damaged copy must be one of them."""
    cache.clear_cache()
    try:
        got = xr.open_dataset(path, engine="rumi", **kwargs).load()
    except rx.RumiError:
        return "typed"
    xr.testing.assert_identical(got, truth)
    return "exact"


def _copy(scene_path: Path, where: Path, blob: bytes | None = None,
          side: bytes | None = None) -> Path:
    target = where / "copy.rumi"
    target.write_bytes(scene_path.read_bytes() if blob is None else blob)
    Path(f"{target}.aux.json").write_bytes(
        Path(f"{scene_path}.aux.json").read_bytes() if side is None else side)
    return target


def _flip(blob: bytes, bit: int) -> bytes:
    damaged = bytearray(blob)
    damaged[bit // 8] ^= 1 << (bit % 8)
    return bytes(damaged)


# --- labels: the trailer ---------------------------------------------------------------


def test_a_flipped_band_text_or_time_raises_naming_the_file(scene, tmp_path: Path) -> None:
    path, truth = scene
    blob = path.read_bytes()
    # Flips librumi's frame checksums do not see: a band text changes, the file still reads.
    at = blob.rindex(b"Green")
    damaged = _copy(path, tmp_path, _flip(blob, at * 8 + 1))
    assert rx.open_dataset(damaged, sidecar=False).band_text.values[1] != BANDS[1]
    with pytest.raises(rx.RumiIntegrityError, match=r"copy\.rumi: its labels"):
        xr.open_dataset(damaged, engine="rumi")
    with pytest.raises(rx.RumiIntegrityError, match=r"copy\.rumi: its labels"):
        rx.catalog([str(damaged)])
    assert _outcome(_copy(path, tmp_path), truth) == "exact"


def test_single_bit_flips_over_the_whole_file_are_exact_or_typed(scene, tmp_path: Path
                                                                 ) -> None:
    path, truth = scene
    blob = path.read_bytes()
    rng = random.Random(11)
    # Half the trials in the trailer (the last 400 bytes: labels), half anywhere.
    tail = max(0, len(blob) - 400) * 8
    bits = ([rng.randrange(tail, len(blob) * 8) for _ in range(TRIALS // 2)]
            + [rng.randrange(len(blob) * 8) for _ in range(TRIALS - TRIALS // 2)])
    outcomes = [_outcome(_copy(path, tmp_path, _flip(blob, bit)), truth) for bit in bits]
    assert outcomes.count("typed") > 0


# --- sidecars ---------------------------------------------------------------------------


def test_sidecar_bit_flips_and_one_character_edits_are_exact_or_typed(
        scene, tmp_path: Path) -> None:
    path, truth = scene
    side = Path(f"{path}.aux.json").read_bytes()
    rng = random.Random(5)
    cases = [_flip(side, rng.randrange(len(side) * 8)) for _ in range(TRIALS // 2)]
    for _ in range(TRIALS - TRIALS // 2):
        at = rng.randrange(len(side))
        cases.append(side[:at] + bytes([rng.choice(b'0123456789.-e"na ,:')]) + side[at + 1:])
    outcomes = [_outcome(_copy(path, tmp_path, side=case), truth) for case in cases]
    assert "typed" in outcomes
    # The edit that mattered most before digests: a fact changed by one character.
    content = json.loads(side)
    edited = json.dumps({**content, "nodata": 1}).encode()
    with pytest.raises(rx.RumiIntegrityError, match=r"copy\.rumi\.aux\.json: the sidecar"):
        xr.open_dataset(_copy(path, tmp_path, side=edited), engine="rumi")


def test_sidecars_without_a_digest(scene, tmp_path: Path) -> None:
    path, truth = scene
    content = json.loads(Path(f"{path}.aux.json").read_text())
    del content["digest"]
    # Version 2 records its digest: one missing was removed.
    with pytest.raises(rx.RumiIntegrityError, match="has no \"digest\""):
        xr.open_dataset(_copy(path, tmp_path, side=json.dumps(content).encode()),
                        engine="rumi")
    # Version 1 (written before digests): read, range-checked, its facts applied.
    old = {k: v for k, v in content.items() if k != "labels_digest"} | {"version": 1}
    assert _outcome(_copy(path, tmp_path, side=json.dumps(old).encode()), truth) == "exact"
    with pytest.raises(rx.RumiFormatError, match=r"scale_factor 0\.0 must be a finite number"):
        xr.open_dataset(_copy(path, tmp_path, side=json.dumps(old | {"scale_factor": 0})
                              .encode()), engine="rumi")


def test_a_sidecar_of_another_file_is_refused(scene, tmp_path: Path) -> None:
    path, _ = scene
    other = tmp_path / "other.rumi"
    _write(other, 4, time=["2025-01-01", "2025-02-01"])
    with pytest.raises(rx.RumiIntegrityError, match="belongs to another file"):
        xr.open_dataset(path, engine="rumi", sidecar=f"{other}.aux.json")


# --- facts: one validation whatever the source -----------------------------------------


@pytest.mark.parametrize(("key", "value"), [("scale_factor", 0.0), ("add_offset", np.inf),
                                            ("scale_factor", -np.inf)])
def test_a_fact_refused_as_a_keyword_is_refused_from_every_source(
        scene, tmp_path: Path, key: str, value: float) -> None:
    path, _ = scene
    with pytest.raises(rx.RumiArgumentError, match=key):
        xr.open_dataset(path, engine="rumi", **{key: value})
    rows = rx.catalog([str(path)])
    rows[key] = value
    rows[ROW_DIGEST] = None  # changed on purpose: no digest to check
    with pytest.raises(rx.RumiCatalogError, match=rf"catalog row 0 \(.*scene\.rumi\): {key}"):
        rx.open_catalog(rows)
    spelled = {"scale_factor": "scale", "add_offset": "offset"}[key]
    with pytest.raises(ValueError, match=key):
        Facts.from_raster_bands([{spelled: value}], "uint16")


# --- catalog rows -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, xr.Dataset]:
    where = tmp_path_factory.mktemp("table")
    paths = [where / f"s{i}.rumi" for i in range(3)]
    for i, p in enumerate(paths):
        _write(p, 20 + i, time=[f"2024-0{i + 1}-01"])
    rows = rx.catalog([str(p) for p in paths])
    out = where / "catalog.parquet"
    # Uncompressed, without dictionaries: a flipped bit lands in a value, not a decoder.
    rows.to_parquet(out, compression=None, use_dictionary=False)
    return out, rows, rx.open_catalog(out, chunks={}).load()


def test_a_row_changed_in_memory_is_refused_naming_it(table) -> None:
    _, rows, _ = table
    moved = rows.copy()
    moved.at[1, "time_seconds"] = [int(moved.at[1, "time_seconds"][0]) + 86400]
    with pytest.raises(rx.RumiIntegrityError, match=r"catalog row 1 \(.*s1\.rumi\)"):
        rx.open_catalog(moved)
    moved.at[1, ROW_DIGEST] = row_digest(moved.loc[1])  # changed on purpose, digest renewed
    assert rx.open_catalog(moved).time.size == 3


def _value_spans(path: Path, rows: pd.DataFrame) -> list[tuple[int, int]]:
    """Return the byte spans of row values in a Parquet file: times, paths, headers, digests.

    Each value is looked for in its column chunk after the page header (whose statistics
    hold copies of some values). Of a time, the low four bytes: a time moved by up to 68
    years; one beyond any calendar is another refusal (an untyped one today, at open).
    """
    blob = path.read_bytes()
    group = pq.ParquetFile(path).metadata.row_group(0)
    chunks = {group.column(j).path_in_schema.split(".")[0]: group.column(j)
              for j in range(group.num_columns)}
    spans = []
    for _, row in rows.iterrows():
        for column, needle, length in (
                ("time_seconds", np.int64(row["time_seconds"][0]).tobytes(), 4),
                ("path", row["path"].encode(), None), ("header", bytes(row["header"]), None),
                (ROW_DIGEST, row[ROW_DIGEST].encode(), None),
                ("scale_factor", np.float64(row["scale_factor"]).tobytes(), None)):
            chunk = chunks[column]
            start = chunk.data_page_offset
            at = blob.rfind(needle, start, start + chunk.total_compressed_size)
            assert at >= 0, column
            spans.append((at, length or len(needle)))
    return spans


def test_bit_flips_in_a_catalog_tables_rows_are_exact_or_typed(table, tmp_path: Path) -> None:
    path, rows, truth = table
    blob = path.read_bytes()
    spans = _value_spans(path, rows)
    rng = random.Random(3)
    damaged = tmp_path / "damaged.parquet"
    outcomes = []
    for _ in range(TRIALS // 2):
        at, length = rng.choice(spans)
        damaged.write_bytes(_flip(blob, (at + rng.randrange(length)) * 8 + rng.randrange(8)))
        try:
            got = rx.open_catalog(damaged, chunks={}).load()
        except rx.RumiError:
            outcomes.append("typed")
            continue
        xr.testing.assert_identical(got, truth)
        outcomes.append("exact")
    assert "typed" in outcomes
    # Rows in memory (pandas read back the damaged table): the same.
    for _ in range(TRIALS // 4):
        at, length = rng.choice(spans)
        damaged.write_bytes(_flip(blob, (at + rng.randrange(length)) * 8 + rng.randrange(8)))
        try:
            got = rx.open_catalog(pd.read_parquet(damaged)).load()
        except rx.RumiError:
            continue
        xr.testing.assert_identical(got, truth)


def test_a_time_flipped_in_a_table_fails_the_task_naming_the_row(table, tmp_path: Path
                                                                  ) -> None:
    path, rows, _ = table
    blob = path.read_bytes()
    at = _value_spans(path, rows)[2 * 5][0]  # row 2's time
    damaged = tmp_path / "moved.parquet"
    damaged.write_bytes(_flip(blob, at * 8 + 20))  # about 12 days off
    # Open reads the time column of every row but only one whole row: the moved scene is
    # caught when a task reads its row.
    ds = rx.open_catalog(damaged, chunks={})
    with pytest.raises(rx.RumiIntegrityError, match=r"catalog row 2 of .*moved\.parquet"):
        ds.load()


# --- option contexts under threads ------------------------------------------------------


def test_overlapping_option_blocks_in_threads_restore_the_process_values() -> None:
    before = dict(rx.get_options())
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def first() -> None:
        with rx.set_options(sidecar=False, group_bytes="1MiB"):
            a_in.set()
            b_in.wait(10)
            seen["first"] = (options.option("sidecar"), options.option("group_bytes"))
        a_out.set()

    def second() -> None:
        a_in.wait(10)
        with rx.set_options(sidecar=True):
            b_in.set()
            a_out.wait(10)  # the first block ends inside this one
            seen["second"] = options.option("sidecar")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert seen == {"first": (False, 2**20), "second": True}
    assert dict(rx.get_options()) == before


def test_a_block_around_compute_applies_in_dask_pool_threads() -> None:
    def look(block: np.ndarray) -> np.ndarray:
        return np.array([options.option("sidecar")])

    array = da.zeros(4, chunks=1).map_blocks(look, dtype=bool)
    with rx.set_options(sidecar=False):
        assert not array.compute(scheduler="threads").any()
    assert array.compute(scheduler="threads").all()


def test_process_settings_refuse_blocks_overlapping_another_threads() -> None:
    inside, done = threading.Event(), threading.Event()

    def hold() -> None:
        with rx.set_options(cache_bytes="8MiB"):
            inside.set()
            done.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait(10)
    try:
        with pytest.raises(rx.RumiSettingsError, match="another thread"):
            rx.set_options(cache_bytes="16MiB")
    finally:
        done.set()
        holder.join(10)
    assert rx.get_options()["cache_bytes"] is None
    with rx.set_options(cache_bytes="16MiB"):  # nothing overlaps any more
        assert rx.get_options()["cache_bytes"] == 16 * 2**20


def test_a_call_outside_a_block_changes_the_process_values() -> None:
    rx.set_options(progress=False)
    try:
        seen = []
        worker = threading.Thread(target=lambda: seen.append(options.option("progress")))
        worker.start()
        worker.join(10)
        assert seen == [False] and not options._changes
    finally:
        rx.set_options(progress=None)
    assert rx.get_options()["progress"] is None


def test_a_call_inside_a_block_holds_for_the_rest_of_it_and_after() -> None:
    with rx.set_options(progress=True):
        rx.set_options(progress=False)
        assert rx.get_options()["progress"] is False
    try:
        assert rx.get_options()["progress"] is False  # a call outside `with` stays
    finally:
        rx.set_options(progress=None)
