"""Catalogs from strangers: where a catalog's hrefs may lead, and what its errors may say.

A catalog read from a remote location (STAC Items files, stac-geoparquet
archives, catalog tables) may not send a reader to local files, nor to
loopback, link-local or private addresses unless the caller allows them
(``allowed_hrefs``); relative hrefs resolve against the catalog's own location
in every process; errors about files reached through a catalog quote nothing
of them. The hostile cases run in a subprocess whose Python audit hook (and,
where strace is installed, whose system calls) record every connect and file
open: none reaches a refused target before the refusal. All servers are on
loopback; nothing leaves it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rumi_xarray as rx
from rumi_xarray.sources.hrefs import Hrefs
from rumi_xarray.write.to_rumi import write_array
from tests.checks import renew_digests
from tests.servers import RangeHTTPServer
from tests.truth import read

ROOT = Path(__file__).resolve().parents[1]
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 6000000.0)
EPSG = 32633


def _write(path: Path, day: int, seed: int) -> np.ndarray:
    data = np.random.default_rng(seed).integers(1, 5000, (1, 2, 32, 32)).astype("uint16")
    write_array(path, data, bands=["B04", "B08"], time=[dt.date(2024, 1, day)],
                transform=TRANSFORM, crs=EPSG, tile_size=16)
    return data


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two small scenes, a local non-Rumi 'secret' file, and a rotated-grid scene."""
    root = tmp_path_factory.mktemp("hrefs")
    (root / "scenes").mkdir()
    a, b = root / "scenes" / "a.rumi", root / "scenes" / "b.rumi"
    _write(a, 1, 1)
    _write(b, 17, 2)
    secret = root / "secret.rumi"
    secret.write_bytes(b"SECRET-CONTENT-of-someone-else\n" * 3)
    return {"root": root, "a": a, "b": b, "secret": secret}


def _item(item_id: str, href: str, *, header: bool = False, path: Path | None = None
          ) -> dict:
    """A STAC Item of a 32 x 32 scene; without ``header`` a reader would fetch the href."""
    asset: dict = {"href": href, "type": "application/vnd.rumi", "roles": ["data"]}
    if header:
        assert path is not None
        stac = rx.to_stac([os.fspath(path)])[0].to_dict(transform_hrefs=False)
        return {**stac, "id": item_id, "links": [],
                "assets": {"data": {**stac["assets"]["data"], "href": href}}}
    properties = {"datetime": "2024-01-01T00:00:00Z", "proj:code": f"EPSG:{EPSG}",
                  "proj:transform": list(TRANSFORM), "proj:shape": [32, 32]}
    west, south, east, north = 14.9, 54.0, 15.0, 54.1
    ring = [[west, south], [east, south], [east, north], [west, north], [west, south]]
    return {"type": "Feature", "stac_version": "1.0.0", "id": item_id,
            "geometry": {"type": "Polygon", "coordinates": [ring]},
            "bbox": [west, south, east, north], "properties": properties,
            "assets": {"data": asset}, "links": []}


def _collection(*items: dict) -> dict:
    return {"type": "FeatureCollection", "features": list(items)}


# --- the policy itself ----------------------------------------------------------------

REMOTE = "https://catalog.example.org/stac/items.json"


@pytest.mark.parametrize("href", [
    "file:///etc/passwd", "FILE:///etc/passwd", "/etc/passwd", "~/.aws/credentials",
    "//evil.example/x.rumi", "http://169.254.169.254/latest/meta-data/", "http://2852039166/",
    "http://0xa9fea9fe/x", "http://169.254.43518/x", "http://[::ffff:169.254.169.254]/x",
    "http://[fe80::1]/x", "http://127.0.0.1:8080/x.rumi", "http://127.1/x", "http://[::1]/x",
    "http://localhost/x", "http://LOCALHOST./x", "http://10.0.0.7/x", "http://192.168.1.1/x",
    "http://172.16.0.1/x", "http://0.0.0.0/x", "http://metadata.google.internal/x",
    "/vsicurl/http://169.254.169.254/x", "simplecache::file:///etc/passwd",
    "simplecache::https://ok.example/x", "memory://x.rumi", "ftp://ok.example/x",
    "x\x00.rumi", "x\n.rumi", "/vsimem/x.rumi",
])
def test_a_remote_catalog_may_not_send_a_reader_home(href: str) -> None:
    with pytest.raises(rx.RumiHrefError) as caught:
        Hrefs.of_catalog(REMOTE).follow(href, "STAC item 'evil'")
    err = caught.value
    assert isinstance(err, rx.RumiCatalogError)
    assert str(err).startswith("STAC item 'evil': href ")  # names the Item and the href
    assert err.where == "STAC item 'evil'" and err.href


@pytest.mark.parametrize(("href", "target"), [
    ("b.rumi", "https://catalog.example.org/stac/b.rumi"),
    ("../../../../etc/passwd", "https://catalog.example.org/etc/passwd"),  # stays on host
    ("a%20b/c.rumi?sig=1", "https://catalog.example.org/stac/a%20b/c.rumi?sig=1"),
    ("https://data.example.org/x.rumi", "https://data.example.org/x.rumi"),
    ("s3://bucket/x.rumi", "s3://bucket/x.rumi"),
    ("/vsis3/bucket/x.rumi", "s3://bucket/x.rumi"),
    ("http://8.8.8.8/x.rumi", "http://8.8.8.8/x.rumi"),
])
def test_a_remote_catalog_reaches_what_is_remote(href: str, target: str) -> None:
    assert Hrefs.of_catalog(REMOTE).follow(href, "item") == target


def test_the_caller_allows_hosts_networks_prefixes_and_schemes(tmp_path: Path) -> None:
    catalog = "http://127.0.0.1:8000/c/items.json"
    with pytest.raises(rx.RumiHrefError):
        Hrefs.of_catalog(catalog).follow("x.rumi", "item")
    for allowed in (["127.0.0.1:8000"], ["127.0.0.0/8"], ["http://127.0.0.1:8000/c/"], ["*"]):
        assert Hrefs.of_catalog(catalog, allowed=allowed).follow("x.rumi", "item") == (
            "http://127.0.0.1:8000/c/x.rumi")
    # A prefix is a prefix of folders, dot segments included, and a port is a port.
    prefix = Hrefs.of_catalog(catalog, allowed=["http://127.0.0.1:8000/c/"])
    for outside in ("../d/x.rumi", "http://127.0.0.1:8000/c/../d/x.rumi",
                    "http://127.0.0.1:8000/cc/x.rumi"):
        with pytest.raises(rx.RumiHrefError):
            prefix.follow(outside, "item")
    with pytest.raises(rx.RumiHrefError):
        Hrefs.of_catalog(catalog, allowed=["127.0.0.1:9"]).follow("x.rumi", "item")
    local = Hrefs.of_catalog(REMOTE, allowed=[f"{tmp_path}/"])
    assert local.follow(f"{tmp_path}/x.rumi", "item") == f"{tmp_path}/x.rumi"
    with pytest.raises(rx.RumiHrefError):
        local.follow(f"{tmp_path}-other/x.rumi", "item")
    assert Hrefs.of_catalog(REMOTE, allowed="file:").follow("/d/x.rumi", "i") == "/d/x.rumi"


def test_the_allow_list_is_one_setting_with_an_environment_variable() -> None:
    with rx.set_options(allowed_hrefs="127.0.0.1:8000, file:"):
        assert rx.get_options()["allowed_hrefs"] == ("127.0.0.1:8000", "file:")
    assert rx.get_options()["allowed_hrefs"] == ()
    for bad in (["http//no"], ["10.0.0.0/99"], [3], "a b"):
        with pytest.raises(rx.RumiSettingsValueError, match="allowed_hrefs"):
            rx.set_options(allowed_hrefs=bad)
    code = ("import rumi_xarray as rx; print(rx.get_options()['allowed_hrefs'])")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUMI_XARRAY_ALLOWED_HREFS": "[::1]:80,file:"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=120).stdout
    assert out.strip() == "('[::1]:80', 'file:')"


def test_a_local_catalog_is_the_callers_own(tmp_path: Path) -> None:
    hrefs = Hrefs.of_catalog(os.fspath(tmp_path / "items.json"))
    assert hrefs.follow("/data/x.rumi", "item") == "/data/x.rumi"
    assert hrefs.follow("../x.rumi", "item") == os.fspath(tmp_path.parent / "x.rumi")
    assert hrefs.follow("http://127.0.0.1:1/x", "item") == "http://127.0.0.1:1/x"
    with pytest.raises(rx.RumiHrefError, match="NUL"):
        hrefs.follow("x\x00y", "item")


# --- hostile catalogs, with every connect and open recorded ------------------------------

#: Opens each catalog (argv: JSON list of [kind, url]) with Python's audit hook recording
#: sockets and opens from the first open on, and prints what each open raised and recorded.
_PROBE = textwrap.dedent("""
    import json, sys
    import rumi_xarray as rx
    import rumi_xarray.stac.load, rumi_xarray.catalogs.cube, rumi_xarray.stac.archive
    import fsspec.implementations.http, aiohttp, pyarrow.parquet, pyarrow.dataset
    events = []
    armed = []
    def hook(event, args):
        if armed and event == "socket.connect":
            events.append(["connect", repr(args[1])])
        elif armed and event == "open":
            events.append(["open", str(args[0])])
    sys.addaudithook(hook)
    results = []
    for kind, url, bbox in json.loads(sys.argv[1]):
        armed.append(1)
        events.clear()
        try:
            if kind == "stac":
                rx.open_stac(url, chunks={})
            elif kind == "archive":
                rx.open_stac(url, lookup="task", bbox=bbox, chunks={})
            else:
                rx.open_catalog(url, chunks={})
            outcome = ["opened", ""]
        except rx.RumiHrefError as exc:
            outcome = ["refused", str(exc)]
        except BaseException as exc:
            outcome = [type(exc).__name__, str(exc)]
        armed.clear()
        results.append([kind, url, outcome, list(events)])
    print(json.dumps(results))
""")


def _hostile_hrefs(scenes: dict[str, Path], port: int) -> list[str]:
    secret = os.fspath(scenes["secret"])
    return [f"file://{secret}", secret, "http://169.254.169.254/latest/meta-data/x.rumi",
            f"http://127.0.0.1:{port}/a.rumi", "http://[::ffff:169.254.169.254]/x.rumi",
            "http://0xa9fea9fe/x.rumi", f"simplecache::file://{secret}",
            "/vsicurl/http://169.254.169.254/x.rumi", "../" * 12 + secret.lstrip("/"),
            "a\x00.rumi"]


def test_hostile_catalogs_are_refused_before_any_connect_or_open(
        scenes: dict[str, Path], tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(scenes["a"], served / "a.rumi")
    with RangeHTTPServer(served) as server:
        port = server.port
        cases = []
        for i, href in enumerate(_hostile_hrefs(scenes, server.port)):
            (served / f"items{i}.json").write_text(json.dumps(_collection(_item("evil", href))))
            cases.append(["stac", server.url(f"items{i}.json"), None])
            # A hostile table carries digests that match: they catch damage, not intent.
            rows = renew_digests(rx.catalog([os.fspath(scenes["a"])]).assign(path=[href]))
            rows.to_parquet(served / f"table{i}.parquet")
            cases.append(["table", server.url(f"table{i}.parquet"), None])
        from rumi_xarray.stac.geoparquet import to_table

        evil = [_item("evil", h, header=True, path=scenes["a"])
                for h in _hostile_hrefs(scenes, server.port)[:4]]
        import pyarrow.parquet as pq

        pq.write_table(to_table(evil[:1]), served / "archive.parquet")
        cases.append(["archive", server.url("archive.parquet"), evil[0]["bbox"]])
        pq.write_table(to_table(evil[3:4]), served / "archive_loopback.parquet")
        cases.append(["stac", server.url("archive_loopback.parquet"), None])
        server.reset()
        results = _probe(cases, tmp_path, server.port, scenes["secret"])
        # The server answered the catalogs' own reads, never a request for a.rumi.
        assert not [r for r in server.requests() if r.path.endswith("a.rumi")]
    for kind, url, (outcome, message), events in results:
        assert outcome == "refused", (kind, url, outcome, message)
        assert "is refused" in message and ("STAC item 'evil'" in message
                                            or "catalog row 0" in message), message
        connects = [e for e in events if e[0] == "connect"]
        assert all(f"'127.0.0.1', {port})" in e[1] for e in connects), (url, connects)
        opened = [e[1] for e in events if e[0] == "open"]
        assert os.fspath(scenes["secret"]) not in opened, url


def _probe(cases: list[list], tmp_path: Path, port: int, secret: Path) -> list:
    """Run the probe; under strace too where it exists, checking native connects and opens."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", _PROBE, json.dumps(cases)]
    trace = tmp_path / "strace.txt"
    if shutil.which("strace"):
        command = ["strace", "-f", "-qq", "-e", "trace=connect,open,openat", "-o",
                   os.fspath(trace), *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    if trace.exists():
        calls = trace.read_text()
        assert os.fspath(secret) not in calls  # librumi's own opens included
        for line in calls.splitlines():
            if "connect(" in line and "AF_INET" in line:
                assert "127.0.0.1" in line and f"htons({port})" in line, line
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_remote_catalog_on_loopback_reads_when_the_caller_allows_it(
        scenes: dict[str, Path], tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(scenes["a"], served / "a.rumi")
    with RangeHTTPServer(served) as server:
        (served / "items.json").write_text(json.dumps(_collection(
            _item("a", "a.rumi", header=True, path=scenes["a"]))))
        renew_digests(rx.catalog([server.url("a.rumi")]).assign(path=["a.rumi"])).to_parquet(
            served / "table.parquet")
        with pytest.raises(rx.RumiHrefError, match="loopback"):
            rx.open_catalog(server.url("table.parquet"))
        with rx.set_options(allowed_hrefs=[f"127.0.0.1:{server.port}"]):
            table = rx.open_catalog(server.url("table.parquet"), chunks={},
                                    mask_and_scale=False)
            items = rx.open_stac(server.url("items.json"), chunks={}, mask_and_scale=False,
                                 band_as_variable=False)
        truth = read(scenes["a"])
        np.testing.assert_array_equal(table.band_data.values, truth)
        np.testing.assert_array_equal(items.band_data.values, truth)


# --- relative hrefs: the catalog's own location, in every process ------------------------


def _relative_table(scenes: dict[str, Path], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = rx.catalog([os.fspath(scenes["a"]), os.fspath(scenes["b"])])
    rows = renew_digests(rows.assign(path=[os.path.relpath(p, folder) for p in rows["path"]]))
    assert not any(os.path.isabs(p) for p in rows["path"])
    table = folder / "catalog.parquet"
    rows.to_parquet(table)
    return table


def _truth(scenes: dict[str, Path]) -> np.ndarray:
    return np.concatenate([read(scenes[k]) for k in ("a", "b")])


def test_a_relative_table_means_the_same_files_from_any_working_directory(
        scenes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _relative_table(scenes, tmp_path / "tables" / "deep")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    ds = rx.open_catalog(table, chunks={"time": 1}, mask_and_scale=False)
    np.testing.assert_array_equal(ds.band_data.compute(scheduler="threads").values,
                                  _truth(scenes))
    # The same table as a folder (its rows resolve inside it), and split into cubes.
    folder = tmp_path / "folder_table"
    folder.mkdir()
    rows = pd.read_parquet(table)
    rows = renew_digests(rows.assign(path=[os.path.relpath(os.path.join(table.parent, p), folder)
                                           for p in rows["path"]]))
    rows.iloc[:1].to_parquet(folder / "part-0.parquet")
    rows.iloc[1:].to_parquet(folder / "part-1.parquet")
    ds = rx.open_catalog(folder, mask_and_scale=False)
    np.testing.assert_array_equal(ds.band_data.values, _truth(scenes))
    [cube] = rx.open_catalog_grids(table, mask_and_scale=False)
    np.testing.assert_array_equal(cube.band_data.values, _truth(scenes))


@pytest.mark.parametrize("name", ["a#b", "what?", "100%25 sure", "two words", "x#1?y=2%20z"])
def test_relative_hrefs_resolve_inside_folders_with_url_characters(
        scenes: dict[str, Path], tmp_path: Path, name: str) -> None:
    folder = tmp_path / name / "items"
    folder.mkdir(parents=True)
    # Decoys where a fragment- or query-reading join would land.
    shutil.copy(scenes["b"], tmp_path / "a.rumi")
    shutil.copy(scenes["b"], folder.parent / "a.rumi")
    shutil.copy(scenes["a"], folder / "a.rumi")
    item = _item("a", "a.rumi", header=True, path=scenes["a"])
    (folder / "items.json").write_text(json.dumps(_collection(item)))
    ds = rx.open_stac(folder / "items.json", mask_and_scale=False, band_as_variable=False)
    np.testing.assert_array_equal(ds.band_data.values, read(scenes["a"]))
    import pyarrow.parquet as pq

    from rumi_xarray.stac.geoparquet import to_table

    pq.write_table(to_table([item]), folder / "items.parquet")
    ds = rx.open_stac(folder / "items.parquet", mask_and_scale=False,
                      band_as_variable=False)
    np.testing.assert_array_equal(ds.band_data.values, read(scenes["a"]))


# --- errors, missing scenes, rotated grids ---------------------------------------------


def test_errors_about_catalog_files_quote_nothing_of_them(
        scenes: dict[str, Path], tmp_path: Path) -> None:
    secret = scenes["secret"]
    size = str(secret.stat().st_size)
    rows = renew_digests(rx.catalog([os.fspath(scenes["a"])]).assign(path=[os.fspath(secret)]))
    ds = rx.open_catalog(rows, chunks={})
    with pytest.raises(rx.RumiError) as caught:
        ds.band_data.compute()
    item = _item("evil", os.fspath(secret))
    with pytest.raises(rx.RumiError) as fetched:
        rx.open_stac([item])
    for err in (caught.value, fetched.value):
        import traceback

        shown = "".join(traceback.format_exception(err))
        assert os.path.basename(secret) in str(err)  # says which file
        for leak in ("0x53", "SECRET", "0x45 0x43", size):
            assert leak not in shown, shown


def test_a_missing_scene_is_file_not_found_through_every_door(
        scenes: dict[str, Path], tmp_path: Path) -> None:
    gone = tmp_path / "gone.rumi"
    shutil.copy(scenes["a"], gone)
    rows = rx.catalog([os.fspath(gone), os.fspath(scenes["b"])])
    gone.unlink()
    cube = rx.open_catalog(rows)
    with pytest.raises(rx.RumiFileNotFoundError, match=r"gone\.rumi"):
        rx.read_chips(cube, [(0, 0, 0)], 8)
    with pytest.raises(rx.RumiFileNotFoundError, match=r"gone\.rumi"):
        cube.band_data.isel(time=0).load()
    with pytest.raises(rx.RumiFileNotFoundError, match=r"gone\.rumi"):
        rx.open_catalog(rows, chunks={}).band_data.compute()
    with pytest.raises(rx.RumiFileNotFoundError, match=r"gone\.rumi"):
        rx.open_stac([_item("gone", os.fspath(gone))])


def test_bbox_on_a_rotated_grid_is_refused(tmp_path: Path) -> None:
    from tests.corpus import CASES

    [rotated] = [c for c in CASES if c.name == "rotated"]
    path, _, _ = rotated.write(tmp_path)
    rows = rx.catalog([os.fspath(path)])
    with pytest.raises(rx.RumiCatalogError, match="axis-aligned"):
        rx.open_catalog(rows, bbox=(8.9, 45.0, 9.1, 45.2))
