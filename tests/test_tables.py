"""Remote metadata reads, table identity and typed failures of catalog and STAC tables.

Ground truth is ``rumi.read`` of the files (tests/truth.py) and numpy on what
was written. Remote cases go through the loopback servers of tests/servers.py
(real HTTP, seeded fault injection); clusters are real dask.distributed ones.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rumi_xarray as rx
from rumi_xarray.catalogs import index as tables
from rumi_xarray.catalogs.table import ROW_DIGEST, row_digest
from rumi_xarray.conventions.sidecar import sidecar_path
from rumi_xarray.sources import retry
from rumi_xarray.write.to_rumi import write_array
from tests.servers import RangeHTTPServer
from tests.truth import read

BANDS = ["B1", "B2"]
TRANSFORM = (10.0, 0.0, 600000.0, 0.0, -10.0, 5000000.0)
FILES = 4


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Four small files with nodata/scale sidecars; file i is 2024-01-(i+1)."""
    folder = tmp_path_factory.mktemp("tables")
    rng = np.random.default_rng(33)
    data = rng.integers(1, 1000, (FILES, 1, 2, 40, 36)).astype(np.uint16)
    data[:, :, :, :3, :3] = 0  # nodata pixels
    paths = []
    for i in range(FILES):
        path = folder / f"s{i}.rumi"
        write_array(path, data[i], bands=BANDS, time=[dt.date(2024, 1, 1 + i)],
                    transform=TRANSFORM, crs=32633, tile_size=16, nodata=0, scale_factor=0.5)
        paths.append(path)
    return folder, paths, data, rx.catalog(paths)


def decoded(raw: np.ndarray) -> np.ndarray:
    return np.where(raw == 0, np.nan, raw * np.float32(0.5))


def truth_of(paths, order) -> np.ndarray:
    """The raw stack of ``paths[k] for k in order``, by rumi.read."""
    return np.concatenate([read(paths[k]) for k in order])


def write_table(table: pd.DataFrame, path: Path) -> Path:
    table.to_parquet(path, row_group_size=2, index=False)
    return path


def reversed_files(base: pd.DataFrame) -> pd.DataFrame:
    """The same dates over the files in reverse order: a rewrite of the same shape."""
    swapped = base.copy()
    for column in ("path", "header"):
        swapped[column] = list(base[column][::-1])
    # each row digested anew, as rx.catalog writes it: a good table, only another one
    swapped[ROW_DIGEST] = [row_digest(row) for _, row in swapped.iterrows()]
    return swapped


# --- 1. sidecars: retried, typed, opted out ------------------------------------------


@pytest.fixture
def served(files):
    folder = files[0]
    with RangeHTTPServer(folder) as server:
        yield server


def test_a_sidecar_failing_for_a_while_is_retried_and_its_facts_kept(files, served,
                                                                     monkeypatch):
    monkeypatch.setenv("KARU_MAX_ATTEMPTS", "8")
    _, paths, data, _ = files
    served.fail("s1.rumi.aux.json", 503)
    stop = threading.Event()

    def heal_after_two_failures() -> None:
        while not stop.is_set():
            if len(served.requests("s1.rumi.aux.json")) >= 2:
                served.heal("s1.rumi.aux.json")
                return
            stop.wait(0.01)

    healer = threading.Thread(target=heal_after_two_failures)
    healer.start()
    try:
        ds = rx.open_dataset(served.url("s1.rumi"))
    finally:
        stop.set()
        healer.join()
    side = served.requests("s1.rumi.aux.json")
    assert [r.status for r in side[:2]] == [503, 503] and side[-1].status == 200
    assert ds.band_data.encoding["scale_factor"] == 0.5
    np.testing.assert_array_equal(ds.band_data.values, decoded(data[1]))


def test_a_sidecar_that_cannot_be_read_is_an_error_unless_opted_out(files, served,
                                                                    monkeypatch):
    monkeypatch.setenv("KARU_MAX_ATTEMPTS", "2")
    _, paths, data, _ = files
    served.fail("s2.rumi.aux.json", 503)
    url = served.url("s2.rumi")
    with pytest.raises(rx.RumiIOError, match=r"s2\.rumi\.aux\.json after 2 attempts.*"
                                             r"sidecar=False"):
        rx.open_dataset(url)
    assert len(served.requests("s2.rumi.aux.json")) >= 2
    with pytest.raises(rx.RumiIOError, match=r"s2\.rumi\.aux\.json"):
        rx.catalog([url])  # never rows without the facts
    raw = rx.open_dataset(url, sidecar=False).band_data
    assert "scale_factor" not in raw.encoding
    np.testing.assert_array_equal(raw.values, data[2].astype(raw.dtype))


def test_a_missing_sidecar_is_no_sidecar(files, served, tmp_path):
    # A 404 is the answer for a file without a sidecar (an older file, or one written by
    # another tool): no error, no facts. write_array always writes one (its labels digest),
    # so it is removed here to make such a file.
    data = np.arange(16 * 16, dtype=np.uint16).reshape(1, 1, 16, 16)
    plain = files[0] / "plain.rumi"
    write_array(plain, data, bands=["B1"], time=["2024-05-01"], tile_size=16)
    Path(sidecar_path(str(plain))).unlink()
    ds = rx.open_dataset(served.url("plain.rumi"))
    assert [r.status for r in served.requests("plain.rumi.aux.json")] == [404]
    np.testing.assert_array_equal(ds.band_data.values, data.astype(np.float32))


def test_the_retry_policy_is_karus(monkeypatch):
    monkeypatch.delenv("KARU_MAX_ATTEMPTS", raising=False)
    monkeypatch.delenv("KARU_MAX_RETRIES", raising=False)
    assert retry.attempts() == 8
    monkeypatch.setenv("KARU_MAX_RETRIES", "2")
    assert retry.attempts() == 3
    monkeypatch.setenv("KARU_MAX_ATTEMPTS", "5")
    assert retry.attempts() == 5
    aiohttp = pytest.importorskip("aiohttp")
    for status, again in ((503, True), (500, True), (429, True), (404, False), (403, False)):
        exc = aiohttp.ClientResponseError(None, (), status=status)  # type: ignore[arg-type]
        assert retry.transient(exc) is again, status
    assert retry.transient(aiohttp.ClientPayloadError("cut"))
    assert retry.transient(ConnectionResetError(104, "reset"))
    assert not retry.transient(FileNotFoundError(2, "gone"))


# --- 2, 3. tables identified by content at open and at every task read ---------------


def test_a_table_rewritten_after_the_open_is_refused_and_a_fresh_open_reads_it(files,
                                                                              tmp_path):
    _, paths, data, base = files
    path = write_table(base, tmp_path / "rolling.parquet")
    first = rx.open_catalog(path, chunks={}, mask_and_scale=False)
    np.testing.assert_array_equal(first.band_data.values, truth_of(paths, range(FILES)))
    # the nightly job: the same row-group shape, each date now a different file
    swapped = reversed_files(base)
    write_table(swapped, path)
    stale = rx.open_catalog(path, chunks={}, mask_and_scale=False)  # fresh open, same process
    np.testing.assert_array_equal(stale.band_data.values,
                                  truth_of(paths, range(FILES))[::-1])
    tables.clear_row_cache()  # a worker that has not read this table yet
    with pytest.raises(rx.RumiFileChangedError, match=r"rolling\.parquet.*changed since it "
                                                      r"was opened"):
        first.band_data.values  # noqa: B018


def test_a_table_truncated_or_deleted_after_the_open_is_a_typed_error(files, tmp_path):
    _, _, _, base = files
    path = write_table(base, tmp_path / "t.parquet")
    ds = rx.open_catalog(path, chunks={})
    tables.clear_row_cache()
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])
    with pytest.raises(rx.RumiError, match=r"t\.parquet"):
        ds.band_data.values  # noqa: B018
    path.unlink()
    with pytest.raises(rx.RumiFileNotFoundError, match=r"t\.parquet"):
        ds.band_data.values  # noqa: B018


def stac_archive(paths, target: Path, offset_days: int = 0) -> Path:
    import pyarrow.parquet as pq

    from rumi_xarray.stac.geoparquet import to_table

    items = [i.to_dict(transform_hrefs=False) for i in rx.to_stac(paths)]
    for k, item in enumerate(items):
        when = pd.Timestamp("2024-01-01", tz="UTC") + pd.Timedelta(days=k + offset_days)
        item["properties"]["datetime"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    pq.write_table(to_table(items), target, row_group_size=2)
    return target


def test_a_stac_archive_rewritten_after_a_task_lookup_open_is_refused(files, tmp_path):
    _, paths, _, _ = files
    path = stac_archive(paths, tmp_path / "archive.parquet")
    grid = {"crs": "EPSG:32633", "resolution": 10}
    lazy = rx.open_stac(str(path), lookup="task", bbox=_bbox(paths[0]), chunks={},
                        groupby="time", **grid)
    eager = rx.open_stac(str(path), bbox=_bbox(paths[0]), chunks={}, groupby="time", **grid)
    np.testing.assert_array_equal(lazy.B1.values, eager.B1.values)
    assert np.isfinite(eager.B1.values).any()
    stac_archive(paths[::-1], path)  # same shape, other files under the same dates
    with pytest.raises(rx.RumiFileChangedError, match=r"archive\.parquet.*changed"):
        lazy.B1.values  # noqa: B018


def _bbox(path: Path) -> tuple[float, float, float, float]:
    from pyproj import Transformer

    to = Transformer.from_crs(32633, 4326, always_xy=True)
    x0, y0 = TRANSFORM[2], TRANSFORM[5]
    (w, e), (s, n) = zip(to.transform(x0 + 50, y0 - 350), to.transform(x0 + 300, y0 - 50),
                         strict=True)
    return (min(w, e), min(s, n), max(w, e), max(s, n))


# --- 4. corrupt footers: typed errors, never a dead process -------------------------


def test_corrupt_footers_raise_typed_errors_and_never_kill_the_process(files, tmp_path):
    _, _, _, base = files
    path = write_table(base, tmp_path / "c.parquet")
    script = textwrap.dedent(f"""
        import random, sys
        import numpy as np
        import rumi_xarray as rx
        good = open({str(path)!r}, "rb").read()
        truth = rx.open_catalog({str(path)!r}, chunks={{}}).band_data.values
        length = int.from_bytes(good[-8:-4], "little")
        rng = random.Random(13)
        outcomes = {{"exact": 0, "typed": 0}}
        for trial in range(30):
            data = bytearray(good)
            at = rng.randrange(len(good) - 8 - length, len(good))
            data[at] ^= 1 << rng.randrange(8)
            bad = {str(tmp_path)!r} + f"/flip{{trial}}.parquet"
            open(bad, "wb").write(data)
            try:
                got = rx.open_catalog(bad, chunks={{}}).band_data.values
            except rx.RumiError:
                outcomes["typed"] += 1
                continue
            except Exception as exc:
                print("UNTYPED", at, type(exc).__name__, exc)
                sys.exit(3)
            if not np.array_equal(got, truth, equal_nan=True):
                print("WRONG", at)
                sys.exit(4)
            outcomes["exact"] += 1
        print(outcomes)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.getcwd()},
                          check=False)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "'typed'" in done.stdout


# --- 5. tables over HTTP: retried at compute time, typed after the retries -----------


def test_a_table_row_group_read_over_http_that_keeps_failing_is_typed(files, served,
                                                                      monkeypatch):
    monkeypatch.setenv("KARU_MAX_ATTEMPTS", "2")
    folder, _, _, base = files
    write_table(base, folder / "http.parquet")
    # the served table's rows name local files: the caller allows them (a remote catalog)
    with rx.set_options(allowed_hrefs=["file:"]):
        ds = rx.open_catalog(served.url("http.parquet"), chunks={})
        tables.clear_row_cache()
        served.fail("http.parquet", 503)
        with pytest.raises(rx.RumiIOError,
                           match=r"http\.parquet row group \d.*after 2 attempts"):
            ds.band_data.values  # noqa: B018


# --- 6. inputs that raised something other than a RumiError ---------------------------


def _cell(column, value, row=1):
    def change(table):
        table[column] = table[column].astype(object)
        table.at[row, column] = value
    return change


BAD_ROWS = {
    "null header": _cell("header", None),
    "NaN transform": _cell("transform", [float("nan"), 0.0, 600000.0, 0.0, -10.0, 5e6]),
    "CRS 999999": lambda t: t.__setitem__("crs", [999999] * len(t)),
    "null time": _cell("time_seconds", None),
    "time 2**62": _cell("time_seconds", [2**62]),
    "two steps for one": _cell("time_seconds", [1_704_067_200, 1_704_153_600]),
    "NUL in a path": _cell("path", "/data/s\x001.rumi"),
}


@pytest.mark.parametrize("where", ["memory", "disk"])
@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_bad_catalog_rows_raise_typed_errors_naming_the_row(files, tmp_path, case, where):
    _, _, _, base = files
    table = base.copy(deep=True)
    BAD_ROWS[case](table)
    named = r"catalog row \d|row group \d|bad\.parquet"
    # rx.catalog's row digests catch the edit first (a typed error naming the row) ...
    source = table if where == "memory" else write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(rx.RumiError, match=named):
        rx.open_catalog(source, chunks={}).band_data.values  # noqa: B018
    # ... and without them (a table from another tool, or a row changed on purpose with a
    # null digest) the cell checks do
    table[ROW_DIGEST] = None
    source = table if where == "memory" else write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(rx.RumiCatalogError, match=named):
        rx.open_catalog(source, chunks={}).band_data.values  # noqa: B018


def _transform(value):
    def change(item):
        for asset in item["assets"].values():
            if "proj:transform" in asset:
                asset["proj:transform"] = value
        if "proj:transform" in item["properties"]:
            item["properties"]["proj:transform"] = value
    return change


def _nul_href(item):
    for asset in item["assets"].values():
        asset["href"] = asset["href"].replace("s0.rumi", "s\x000.rumi")


BAD_ITEMS = {
    "NaN proj:transform": _transform([float("nan"), 0.0, 600000.0, 0.0, -10.0, 5e6]),
    "zero-resolution proj:transform": _transform([0.0, 0.0, 600000.0, 0.0, -10.0, 5e6]),
    "NUL in an href": _nul_href,
}


@pytest.mark.parametrize("case", list(BAD_ITEMS))
def test_bad_stac_items_raise_typed_errors_naming_the_item(files, case):
    _, paths, _, _ = files
    item = rx.to_stac(paths[:1])[0].to_dict(transform_hrefs=False)
    item = copy.deepcopy(item)
    BAD_ITEMS[case](item)
    with pytest.raises(rx.RumiCatalogError, match=r"STAC item 's0'"):
        rx.open_stac([item], chunks={}).load()


# --- 7. transient faults on every remote read ------------------------------------------


def test_faults_on_every_remote_read_end_exact_or_typed(files, monkeypatch):
    """Data, sidecars and the table itself over one server failing 25 % of requests
    (503s, bodies cut short, connections reset)."""
    monkeypatch.setenv("KARU_MAX_ATTEMPTS", "4")
    folder, paths, data, _ = files
    outcomes = []
    kinds_seen: set[str] = set()
    # the served table's rows name this server: the caller allows it (a remote catalog)
    with RangeHTTPServer(folder) as server, \
            rx.set_options(allowed_hrefs=[f"127.0.0.1:{server.port}"]):
        urls = [server.url(p.name) for p in paths]
        table = rx.catalog(urls)  # read before the faults: sidecar facts in every row
        assert table["scale_factor"].tolist() == [0.5] * FILES
        write_table(table, folder / "remote.parquet")
        want = decoded(data[:, 0])
        for trial in range(5):
            tables.clear_row_cache()
            rx.clear_cache()
            faults = server.inject_faults(rate=0.25, seed=trial, kinds=("503", "cut", "reset"))
            try:
                one = rx.open_dataset(urls[trial % FILES]).band_data.values
                cube = rx.open_catalog(server.url("remote.parquet"), chunks={}).band_data
                got = cube.values
            except rx.RumiError as exc:
                assert "127.0.0.1" in str(exc) or ".rumi" in str(exc) or ".parquet" in str(exc)
                outcomes.append("typed")
            else:
                np.testing.assert_array_equal(one[0], want[trial % FILES])
                np.testing.assert_array_equal(got, want)
                outcomes.append("exact")
            finally:
                server.heal()
            assert sum(faults.injected.values()) > 0
            kinds_seen.update(k for k, n in faults.injected.items() if n)
    assert kinds_seen == {"503", "cut", "reset"}
    assert outcomes.count("exact") >= 3, outcomes


def _clear_rows() -> None:
    from rumi_xarray.catalogs import index

    index.clear_row_cache()


def test_a_table_rewritten_between_open_and_compute_is_refused_on_workers(files, tmp_path):
    distributed = pytest.importorskip("distributed")
    _, _, _, base = files
    path = write_table(base, tmp_path / "nightly.parquet")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client:
        ds = rx.open_catalog(path, chunks={})
        want = ds.band_data.compute().values  # the worker now caches the rows
        swapped = reversed_files(base)
        write_table(swapped, path)
        fresh = rx.open_catalog(path, chunks={}).band_data.compute().values
        np.testing.assert_array_equal(fresh, want[::-1])  # not the worker's cached rows
        client.run(_clear_rows)
        with pytest.raises(rx.RumiFileChangedError, match=r"nightly\.parquet"):
            ds.band_data.compute()
