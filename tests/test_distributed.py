"""A real dask.distributed LocalCluster with worker processes."""

from __future__ import annotations

import numpy as np
import pytest
import rumi

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


def test_workers_use_grouped_reads_and_size_rumi_pool(client, corpus):
    path, _, data, _ = corpus["cell_hwbt_u16"]
    var = rx.open_dataset(path, chunks={}).band_data
    client.run(rx.stats, reset=True)
    np.testing.assert_array_equal(var.values, data)
    per_worker = client.run(rx.stats)
    calls = sum(s["calls"] for s in per_worker.values())
    chunks = var.data.npartitions
    assert 0 < calls < chunks
    threads = client.run(lambda: rumi.get_num_threads())
    assert set(threads.values()) == {2}


def test_xarray_engine_path_on_cluster(client, corpus):
    import xarray as xr

    path, _, data, _ = corpus["cell_tbhw_f64"]
    ds = xr.open_dataset(path, engine="rumi", chunks={})
    np.testing.assert_array_equal(ds.band_data.compute().values, data)
