"""A real dask.distributed LocalCluster with worker processes."""

from __future__ import annotations

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx

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
    np.testing.assert_array_equal(var.values, rumi.read(str(path), header, pattern="t b y x"))


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


def test_xarray_engine_path_on_cluster(client, corpus):
    import xarray as xr

    path, _, data, _ = corpus["cell_tbhw_f64"]
    ds = xr.open_dataset(path, engine="rumi", chunks={})
    np.testing.assert_array_equal(ds.band_data.compute().values, data)


def _slow_identity(block):
    import time

    time.sleep(0.05)
    return block


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
    sources[1].unlink()
    cube = rx.open_catalog(table, chunks={})
    with pytest.raises(OSError, match=r"scene1\.rumi \(catalog row 1\)"):
        client.compute(cube.band_data.mean()).result(timeout=60)
