from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.corpus import CASES, Case
from tests.scenes import EPSG, TEXTS, TRANSFORM, convert, reflectance, scene_geotiff
from tests.servers import S3_ENV_TO_UNSET, RangeHTTPServer, S3Server, write_sample

BUCKET = "rumi-test"

# The suite reads ground truth with plain rumi.read, which would pin librumi's
# checksum verification to its default (off) before rumi_xarray's first read
# applies rumi_xarray's default (on). Apply rumi_xarray's settings first.
from rumi_xarray.native import process  # noqa: E402

process.configure()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep each test file on one pytest-xdist worker unless its tests say otherwise.

    ``make test`` runs ``-n 2 --dist loadgroup``: a group runs whole on one worker,
    so a module-scoped fixture (a written corpus, a server, a cluster, an executed
    notebook) is paid once, as without xdist. Tests marked
    ``xdist_group`` (the notebooks, one group each) split a file where its parts
    share no fixture.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse a pytest-xdist worker whose ``--dist loadgroup`` lost the groups.

    pytest-xdist appends ``@<group>`` to each grouped test's id, and schedules by it;
    where pytest keeps ids elsewhere (pytest 9.2 with pytest-xdist 3.8) nothing is
    appended, every test becomes a group of its own, and every module fixture is paid
    on every worker, silently. Better to stop at collection.
    """
    config = session.config
    if getattr(config.option, "loadgroup", False) and hasattr(config, "workerinput"):
        lost = [item.nodeid for item in session.items if "@" not in item.nodeid]
        if lost:
            raise pytest.UsageError(
                f"pytest-xdist's --dist loadgroup left {len(lost)} tests without their group "
                f"(first: {lost[0]}); this pytest and pytest-xdist do not work together")


@pytest.fixture(autouse=True)
def empty_tile_cache() -> Iterator[None]:
    """Each test counts its own reads: nothing decoded by an earlier test is reused."""
    from rumi_xarray.backend import cache

    cache.clear_cache()
    yield


@pytest.fixture(scope="session")
def process_pool() -> Iterator[object]:
    """One pool of two worker processes for the tests of dask's processes scheduler.

    Given no pool, dask starts a new one for every ``compute`` (spawned, as dask's
    ``multiprocessing.context`` default says): each child imports xarray, dask and
    librumi again, about ten seconds a compute on two busy cores. One pool for the
    session keeps what the tests check (reads happen in other processes) at one start.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import dask

    context = multiprocessing.get_context(dask.config.get("multiprocessing.context", "spawn"))
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        yield pool


@pytest.fixture
def local_scheduler(process_pool: object) -> object:
    """Return dask config settings that pick a local scheduler by name.

    ``processes`` gets the session's :func:`process_pool`; ``pool`` is set for it
    alone, since the threaded scheduler would take a ``pool`` setting too.
    """

    def settings(name: str) -> dict[str, object]:
        return {"scheduler": name, **({"pool": process_pool} if name == "processes" else {})}

    return settings


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, bytes, object, Case]]:
    """Every corpus case written once per session: name -> (path, header, array, case)."""
    folder = tmp_path_factory.mktemp("corpus")
    out = {}
    for case in CASES:
        path, header, data = case.write(folder)
        out[case.name] = (path, header, data, case)
    return out


@pytest.fixture(params=[c.name for c in CASES])
def case(request: pytest.FixtureRequest, corpus: dict) -> tuple[Path, bytes, object, Case]:
    return corpus[request.param]


@pytest.fixture(scope="session")
def remote_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory holding ``a.rumi`` and ``b.rumi``, the files every server publishes."""
    root = tmp_path_factory.mktemp("remote")
    write_sample(root / "a.rumi", seed=0)
    write_sample(root / "b.rumi", seed=1)
    return root


@pytest.fixture(scope="session")
def http_server_session(remote_dir: Path) -> Iterator[RangeHTTPServer]:
    with RangeHTTPServer(remote_dir) as server:
        yield server


@pytest.fixture
def http_server(http_server_session: RangeHTTPServer) -> RangeHTTPServer:
    """The session's HTTP server with an empty request log and no failing paths."""
    http_server_session.heal()
    http_server_session.reset()
    return http_server_session


@pytest.fixture(scope="session")
def s3_server_session(remote_dir: Path) -> Iterator[S3Server]:
    with S3Server() as server:
        server.upload(BUCKET, remote_dir / "a.rumi", remote_dir / "b.rumi")
        yield server


@pytest.fixture
def s3_server(s3_server_session: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The session's S3 server, this process's env pointed at it, request log emptied."""
    for name in S3_ENV_TO_UNSET:
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_server_session.env.items():
        monkeypatch.setenv(name, value)
    s3_server_session.reset()
    return s3_server_session


@pytest.fixture
def karu_fail_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """One attempt per request: with Karu's default retries a 5xx takes ~30 s to surface."""
    monkeypatch.setenv("KARU_MAX_ATTEMPTS", "1")


# --- the packed reflectance scene (tests/scenes.py) ------------------------------------


@pytest.fixture
def tif(tmp_path: Path) -> Path:
    """nodata 0, scale 1e-4, offset -0.1, units and band texts: a packed reflectance."""
    return scene_geotiff(tmp_path / "scene.tif", reflectance(), scales=[1e-4] * 3,
                         offsets=[-0.1] * 3, units=["reflectance"] * 3, descriptions=TEXTS)


@pytest.fixture
def converted(tif: Path, tmp_path: Path) -> Path:
    """``tif`` converted by ``rumi-xarray convert`` (16-pixel tiles)."""
    out = tmp_path / "scene.rumi"
    code, _, err = convert("convert", tif, out, "--tile-size", "16")
    assert code == 0, err
    return out


@pytest.fixture
def two_dates(tmp_path: Path) -> tuple[list[Path], np.ndarray]:
    """Two single-date files of the scene (the later date first) and their samples."""
    from rumi_xarray.write.to_rumi import write_array

    data = reflectance(1, (2, 3, 20, 24))
    paths = []
    for i, day in enumerate([dt.date(2024, 5, 11), dt.date(2024, 5, 1)]):
        path = tmp_path / f"s{i}.rumi"
        write_array(path, data[i:i + 1], bands=TEXTS, time=[day], transform=TRANSFORM,
                    crs=EPSG, tile_size=8, nodata=0, scale_factor=1e-4, add_offset=-0.1,
                    units="reflectance")
        paths.append(path)
    return paths, data
