"""Remote reads through librumi's transport: loopback HTTP and S3 servers."""

from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.write.to_rumi import write_array
from tests.servers import S3_ENV_TO_UNSET
from tests.test_indexing_property import assert_outer_selections
from tests.truth import read

EXAMPLES = int(os.environ.get("RUMI_PROPERTY_EXAMPLES", "60"))


@pytest.fixture(scope="module")
def published(remote_dir, corpus):
    """Corpus files and an 8 x 8-frame file copied into the served directory."""
    names = {}
    for name in ("plane_tb_u16", "cell_hwbt_u16", "tile512_edge"):
        path, header, data, case = corpus[name]
        shutil.copy(path, remote_dir / path.name)
        names[name] = (path.name, header, data, case)
    data = np.random.default_rng(9).integers(0, 5000, (2, 1, 512, 512)).astype(np.uint16)
    header = write_array(remote_dir / "grid8.rumi", data, bands=["B1"],
                         time=["2024-05-01", "2024-05-11"], tile_size=64)
    names["grid8"] = ("grid8.rumi", header, data, None)
    return names


@pytest.mark.parametrize("name", ["plane_tb_u16", "cell_hwbt_u16", "tile512_edge"])
def test_http_values_equal_local(http_server, published, name):
    file, header, data, case = published[name]
    url = http_server.url(file)
    ds = xr.open_dataset(url, engine="rumi")
    got = ds.band_data.values if case.t > 1 else ds.band_data.values[np.newaxis]
    np.testing.assert_array_equal(got, read(url, header))
    np.testing.assert_array_equal(got, data)
    assert ds.band_data.encoding["source"] == url
    grouped = rx.open_dataset(url, chunks={}).band_data
    np.testing.assert_array_equal(grouped.values, got if case.t > 1 else got[0])


def test_http_outer_selections_equal_numpy(http_server, published):
    file, _, data, _ = published["plane_tb_u16"]
    var = xr.open_dataset(http_server.url(file), engine="rumi").band_data
    assert_outer_selections(var, data, max(15, EXAMPLES // 3))


def test_open_reads_only_metadata(http_server, published):
    file = published["grid8"][0]
    rx.open_dataset(http_server.url(file), chunks={})
    log = http_server.requests(file)
    assert len(log) == 2 and all(r.status == 206 for r in log)


def test_region_of_16_frames_costs_about_one_read(http_server, published):
    file, header, data, _ = published["grid8"]
    url = http_server.url(file)
    http_server.reset()
    union = read(url, header, time=[1], window=(128, 64, 256, 256))
    baseline = len(http_server.requests(file))

    # the call xarray users type: one read group (here the whole file) per chunk
    var = xr.open_dataset(url, engine="rumi", chunks={}, header=header).band_data
    http_server.reset()
    rx.stats(reset=True)
    region = var.isel(time=1, band=0, y=slice(128, 384), x=slice(64, 320)).values
    grouped = len(http_server.requests(file))
    np.testing.assert_array_equal(region, union[0, 0])
    np.testing.assert_array_equal(region, data[1, 0, 128:384, 64:320])
    assert rx.stats()["calls"] == 1 and rx.stats()["planned_frames"] == 16
    assert grouped <= baseline + 1, (grouped, baseline)


def test_s3_values_equal_local(s3_server, remote_dir):
    url = "s3://rumi-test/a.rumi"
    local = remote_dir / "a.rumi"
    expected = read(local)
    ds = rx.open_dataset(url, chunks={})
    np.testing.assert_array_equal(ds.band_data.values, expected)
    assert any(r.path.endswith("/a.rumi") for r in s3_server.requests())


def test_http_errors_name_the_url(http_server, published, karu_fail_fast):
    file, header, _, _ = published["grid8"]
    var = rx.open_dataset(http_server.url(file), chunks={}, header=header).band_data
    http_server.fail(f"/{file}", 500)
    with pytest.raises(OSError, match=file):
        var.isel(time=0).load()


def test_remote_open_overlaps_the_sidecar_with_the_metadata_reads(remote_dir, tmp_path):
    # Three requests (two metadata ranges, the sidecar GET) used to run one
    # after the other. With 0.3 s of latency per answer, the sidecar's GET
    # must arrive while the first range is still being answered.
    from tests.servers import RangeHTTPServer

    data = np.arange(2 * 64 * 64, dtype=np.uint16).reshape(1, 2, 64, 64)
    write_array(remote_dir / "scaled.rumi", data, bands=["B1", "B2"], time=["2024-05-01"],
                tile_size=32, nodata=0, scale_factor=0.5)
    delay = 0.3
    with RangeHTTPServer(remote_dir, delay=delay) as server:
        ds = xr.open_dataset(server.url("scaled.rumi"), engine="rumi")
        ranges = server.requests("scaled.rumi")
        side = server.requests("scaled.rumi.aux.json")
        values = ds.band_data.values
    assert len(ranges) == 2 and len(side) == 1, (ranges, side)
    first = min(r.arrived for r in ranges)
    assert side[0].arrived - first < delay, "the sidecar GET waited for the metadata"
    assert ds.band_data.encoding["scale_factor"] == 0.5
    expected = np.where(data == 0, np.nan, data * np.float32(0.5))
    np.testing.assert_array_equal(values, expected)


def test_an_unreadable_prefetched_sidecar_is_an_error_at_the_users_open(remote_dir,
                                                                        karu_fail_fast):
    # The GET runs in a thread, its outcome is taken on the caller's thread: a sidecar
    # that cannot be read (after the retries) stops the open there, naming the sidecar,
    # rather than opening the file without its nodata/scale/offset.
    from tests.servers import RangeHTTPServer

    data = np.ones((1, 1, 16, 16), dtype=np.uint8)
    write_array(remote_dir / "badside.rumi", data, bands=["B1"], time=["2024-05-01"],
                tile_size=16, nodata=0)
    with RangeHTTPServer(remote_dir, fail=["/badside.rumi.aux.json"]) as server:
        with pytest.raises(rx.RumiIOError, match=r"badside\.rumi\.aux\.json.*sidecar=False"):
            xr.open_dataset(server.url("badside.rumi"), engine="rumi")
        side = server.requests("badside.rumi.aux.json")
        ds = xr.open_dataset(server.url("badside.rumi"), engine="rumi", sidecar=False)
    assert len(side) >= 1
    assert "_FillValue" not in ds.band_data.encoding


# --- storage_options for URLs librumi reads itself: honoured through fsspec, never dropped ---


@pytest.fixture
def s3_env_cleared(s3_server_session, monkeypatch):
    """No AWS_* variable at all: only storage_options can reach the test server."""
    for name in (*S3_ENV_TO_UNSET, *s3_server_session.env):
        monkeypatch.delenv(name, raising=False)
    # botocore would otherwise probe the link-local metadata service for credentials
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s3_server_session.reset()
    return s3_server_session


def test_s3_storage_options_alone_reach_the_server(s3_env_cleared, remote_dir):
    url = "s3://rumi-test/b.rumi"
    options = {**s3_env_cleared.storage_options, "skip_instance_cache": True}
    expected = read(remote_dir / "b.rumi")
    eager = xr.open_dataset(url, engine="rumi", storage_options=options).band_data
    np.testing.assert_array_equal(eager.values, expected)
    lazy = rx.open_dataset(url, chunks={}, storage_options=options).band_data
    np.testing.assert_array_equal(lazy.values, expected)
    assert any(r.path.endswith("/b.rumi") and r.status == 206
               for r in s3_env_cleared.requests())


def test_s3_storage_options_win_over_the_environment(s3_server, remote_dir, monkeypatch):
    # The environment names a closed port and a wrong key pair: librumi's transport would
    # fail with it; the keyword's endpoint and keys are the ones used.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    options = {**s3_server.storage_options, "skip_instance_cache": True}
    got = xr.open_dataset("s3://rumi-test/a.rumi", engine="rumi", storage_options=options)
    np.testing.assert_array_equal(got.band_data.values, read(remote_dir / "a.rumi"))


def test_s3_storage_options_a_key_s3fs_does_not_take_is_refused(s3_server):
    options = {**s3_server.storage_options, "region": "eu-west-1"}
    with pytest.raises(rx.RumiArgumentError, match=r"s3://rumi-test/a.rumi: storage_options "
                       r"key 'region' .*client_kwargs=\{'region_name'") as caught:
        xr.open_dataset("s3://rumi-test/a.rumi", engine="rumi", storage_options=options)
    assert caught.value.keyword == "storage_options"
    assert s3_server.secret_key not in str(caught.value)  # values are never echoed


def test_storage_options_for_a_scheme_whose_fsspec_package_is_missing_are_refused():
    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed: gs:// storage_options are honoured")
    with pytest.raises(rx.RumiArgumentError, match=r"gs://b/x.rumi: storage_options.*gcsfs"):
        xr.open_dataset("gs://b/x.rumi", engine="rumi", storage_options={"token": "anon"})
