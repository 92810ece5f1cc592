"""The loopback servers in ``tests/servers.py`` work, and rumi reads through them.

Facts these tests pin down about rumi-eo 0.26 (librumi's Karu transport):

* ``rumi.info`` of a remote file costs two ranged GETs of 16 KiB (one suffix range for
  the trailer/index, one from byte 0 for the header); a small-window ``rumi.read``
  costs one ranged GET that coalesces every frame of the tiles it touches.
* Karu reads its ``AWS_*`` / ``KARU_*`` variables each time a source is opened, not
  once per process, so ``monkeypatch.setenv`` in one test takes effect at once and
  does not leak into the next (``test_karu_reads_env_per_open`` guards this).
* Karu keeps a process-wide pool of keep-alive connections across calls.
"""

from __future__ import annotations

import base64
import http.client
import socket
import threading
import time
from pathlib import Path

import fsspec
import numpy as np
import pytest
import rumi

from tests.servers import S3_ENV_TO_UNSET, RangeHTTPServer, S3Server

BUCKET = "rumi-test"
WINDOW = (10, 20, 16, 16)


def assert_same_metadata(remote: rumi.Metadata, local: rumi.Metadata) -> None:
    for name in ("header", "shape", "time_count", "tile", "frame_layout", "index_order",
                 "frames", "bands", "time", "time_kind", "transform", "crs",
                 "pixel_is_point"):
        assert getattr(remote, name) == getattr(local, name), name
    assert remote.dtype.name == local.dtype.name


def test_http_info_matches_local(http_server: RangeHTTPServer, remote_dir: Path) -> None:
    remote = rumi.info(source=http_server.url("a.rumi"))
    assert_same_metadata(remote, rumi.info(source=remote_dir / "a.rumi"))

    log = http_server.requests("a.rumi")
    assert log, "rumi.info made no request"
    assert all(r.method == "GET" and r.range and r.status == 206 for r in log)
    # Only the header and the index travel, never the frames.
    assert http_server.bytes_served <= 64 * 1024


def test_http_read_window_matches_local(http_server: RangeHTTPServer, remote_dir: Path) -> None:
    url, local = http_server.url("a.rumi"), remote_dir / "a.rumi"
    header = rumi.info(source=local).header
    http_server.reset()

    got = rumi.read(url, header, pattern="t b y x", window=WINDOW)

    want = rumi.read(local, header, pattern="t b y x", window=WINDOW)
    np.testing.assert_array_equal(got, want)
    assert got.shape == (3, 4, 16, 16)
    log = http_server.requests("a.rumi")
    assert log
    assert all(r.method == "GET" and r.range and r.status == 206 for r in log)
    # The window lies in one of six tile columns/rows: far less than the file travels.
    assert http_server.bytes_served < (local.stat().st_size // 2)


def test_http_read_many_matches_local(http_server: RangeHTTPServer, remote_dir: Path) -> None:
    names = ["a.rumi", "b.rumi"]
    headers = [rumi.info(source=remote_dir / n).header for n in names]
    windows = [(0, 0, 300, 700), (0, 0, 300, 700)]

    got = rumi.read_many(
        [http_server.url(n) for n in names], headers, windows=windows, pattern="n t b y x"
    )

    want = rumi.read_many(
        [remote_dir / n for n in names], headers, windows=windows, pattern="n t b y x"
    )
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got[0], got[1])
    assert {r.path for r in http_server.requests()} == {"/a.rumi", "/b.rumi"}


def test_http_missing_file_raises(http_server: RangeHTTPServer) -> None:
    with pytest.raises(OSError, match="404"):
        rumi.info(source=http_server.url("missing.rumi"))
    assert http_server.requests("missing.rumi")[0].status == 404


@pytest.mark.usefixtures("karu_fail_fast")
def test_http_server_error_raises(http_server: RangeHTTPServer, remote_dir: Path) -> None:
    header = rumi.info(source=remote_dir / "a.rumi").header
    http_server.fail("a.rumi")

    with pytest.raises(OSError, match="500"):
        rumi.info(source=http_server.url("a.rumi"))
    with pytest.raises(OSError, match="500"):
        rumi.read(http_server.url("a.rumi"), header, window=WINDOW)

    assert {r.status for r in http_server.requests()} == {500}
    http_server.heal()
    assert rumi.info(source=http_server.url("a.rumi")).header == header


def test_http_basic_auth(remote_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with RangeHTTPServer(remote_dir, auth=("reader", "s3cret")) as server:
        with pytest.raises(OSError, match="401"):
            rumi.info(source=server.url("a.rumi"))

        token = base64.b64encode(b"reader:s3cret").decode()
        monkeypatch.setenv("KARU_HTTP_HEADERS", f"Authorization: Basic {token}")
        server.reset()
        rumi.info(source=server.url("a.rumi"))
        assert {r.status for r in server.requests()} == {206}


def test_karu_reuses_connections(http_server: RangeHTTPServer) -> None:
    url = http_server.url("a.rumi")
    header = rumi.info(source=url).header
    for row in range(0, 300, 50):
        rumi.read(url, header, window=(row, 0, 8, 8))
    assert http_server.connections < len(http_server.requests())


# --- the HTTP server itself, spoken to with the standard library --------------------------


def test_range_server_protocol(remote_dir: Path) -> None:
    data = (remote_dir / "a.rumi").read_bytes()
    size = len(data)
    with RangeHTTPServer(remote_dir) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)

        def ask(method: str, path: str, **headers: str) -> tuple[http.client.HTTPResponse, bytes]:
            conn.request(method, path, headers={k.replace("_", "-"): v for k, v in headers.items()})
            response = conn.getresponse()
            return response, response.read()

        response, body = ask("HEAD", "/a.rumi")
        assert response.status == 200 and body == b""
        assert response.getheader("Content-Length") == str(size)
        assert response.getheader("Accept-Ranges") == "bytes"
        etag = response.getheader("ETag")
        assert etag and response.getheader("Last-Modified")

        cases = {
            "bytes=10-19": (10, 20),
            f"bytes={size - 5}-": (size - 5, size),
            "bytes=-7": (size - 7, size),
            f"bytes={size - 3}-{size + 1000}": (size - 3, size),
            f"bytes=-{size + 10}": (0, size),
        }
        for spec, (first, end) in cases.items():
            response, body = ask("GET", "/a.rumi", Range=spec)
            assert response.status == 206, spec
            assert body == data[first:end], spec
            assert response.getheader("Content-Range") == f"bytes {first}-{end - 1}/{size}"

        for spec in (f"bytes={size}-", "bytes=-0"):
            response, _ = ask("GET", "/a.rumi", Range=spec)
            assert response.status == 416, spec
            assert response.getheader("Content-Range") == f"bytes */{size}"

        # Ranges a single-range server does not understand are ignored: whole body.
        for spec in ("bytes=0-1,5-6", "items=0-3", "bytes=9-3"):
            response, body = ask("GET", "/a.rumi", Range=spec)
            assert response.status == 200 and body == data, spec

        assert ask("GET", "/a.rumi", Range="bytes=0-3", If_Match=etag)[0].status == 206
        assert ask("GET", "/a.rumi", Range="bytes=0-3", If_Match='"other"')[0].status == 412
        assert ask("GET", "/missing.rumi")[0].status == 404
        assert ask("HEAD", "/missing.rumi")[0].status == 404
        assert ask("GET", "/../../etc/passwd")[0].status == 404
        assert ask("GET", "/")[0].status == 404  # directories are not listed
        server.fail("a.rumi", 503)
        assert ask("GET", "/a.rumi")[0].status == 503
        server.heal()

        log = server.requests()
        assert server.connections == 1, "HTTP/1.1 keep-alive should carry every request"
        assert [r.range for r in server.requests("a.rumi", method="GET")][:2] == [
            "bytes=10-19",
            f"bytes={size - 5}-",
        ]
        assert server.bytes_served == sum(r.bytes_sent for r in log)
        assert server.requests(method="HEAD")[0].bytes_sent == 0
        conn.close()

        server.reset()
        assert server.requests() == [] and server.bytes_served == 0


def test_range_server_stops_with_open_connection(remote_dir: Path) -> None:
    server = RangeHTTPServer(remote_dir).start()
    port = server.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/a.rumi", headers={"Range": "bytes=0-0"})
    conn.getresponse().read()
    # The idle keep-alive connection must not keep the server alive.
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 5
    assert not any(t.name == f"RangeHTTPServer:{port}" for t in threading.enumerate())
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    conn.close()


# --- S3 ------------------------------------------------------------------------------------


def test_s3_info_and_read_match_local(s3_server: S3Server, remote_dir: Path) -> None:
    url, local = f"s3://{BUCKET}/a.rumi", remote_dir / "a.rumi"

    remote = rumi.info(source=url)
    assert_same_metadata(remote, rumi.info(source=local))
    got = rumi.read(url, remote.header, pattern="t b y x", window=WINDOW)

    want = rumi.read(local, remote.header, pattern="t b y x", window=WINDOW)
    np.testing.assert_array_equal(got, want)
    log = s3_server.requests(f"{BUCKET}/a.rumi")
    assert log and len(log) == len(s3_server.requests())
    assert all(r.method == "GET" and r.range and r.status == 206 for r in log)
    # Path-style addressing on the custom endpoint, signed with the env credentials.
    assert {r.headers["host"] for r in log} == {f"127.0.0.1:{s3_server.port}"}
    assert all(
        r.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=testing/") for r in log
    )


def test_s3_read_many_matches_local(s3_server: S3Server, remote_dir: Path) -> None:
    names = ["a.rumi", "b.rumi"]
    headers = [rumi.info(source=remote_dir / n).header for n in names]
    windows = [(0, 0, 64, 64), (236, 636, 64, 64)]

    got = rumi.read_many(
        [f"s3://{BUCKET}/{n}" for n in names], headers, windows=windows, pattern="n t b y x"
    )

    want = rumi.read_many(
        [remote_dir / n for n in names], headers, windows=windows, pattern="n t b y x"
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.usefixtures("karu_fail_fast")
def test_karu_reads_env_per_open(
    s3_server: S3Server, remote_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{BUCKET}/a.rumi"
    header = rumi.info(source=remote_dir / "a.rumi").header
    with socket.socket() as probe:
        # Bound but never listening: connections are refused and nobody else gets the port.
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"

        # Same process, after a successful read: a new endpoint is honoured at once ...
        rumi.info(source=url)
        monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", dead)
        with pytest.raises(OSError, match=dead):
            rumi.read(url, header, window=WINDOW)
    # ... and so are a restored one (the _S3 variable wins) and removed credentials.
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint_url)
    rumi.read(url, header, window=WINDOW)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(OSError, match="no AWS credentials"):
        rumi.info(source=url)


def test_karu_virtual_hosting(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    # libcurl resolves *.localhost to loopback itself, so bucket-in-host addressing works
    # without DNS; Karu only switches to it when AWS_VIRTUAL_HOSTING says so.
    endpoint = f"http://localhost:{s3_server.port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    monkeypatch.setenv("AWS_VIRTUAL_HOSTING", "TRUE")

    assert rumi.info(source=f"s3://{BUCKET}/a.rumi").shape == (3, 4, 300, 700)

    log = s3_server.requests()
    assert {r.headers["host"] for r in log} == {f"{BUCKET}.localhost:{s3_server.port}"}
    assert {r.path for r in log} == {"/a.rumi"}


def test_s3fs_glob_from_env(s3_server: S3Server) -> None:
    # fsspec caches filesystem instances by constructor arguments, and an argument-less
    # instance would outlive this test's endpoint; skip the cache.
    fs = fsspec.filesystem("s3", skip_instance_cache=True)

    assert fs.glob(f"s3://{BUCKET}/*.rumi") == [f"{BUCKET}/a.rumi", f"{BUCKET}/b.rumi"]
    listing = s3_server.requests(BUCKET, method="GET")
    assert listing and "list-type=2" in listing[0].query


def test_s3fs_glob_from_storage_options(
    s3_server_session: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (*S3_ENV_TO_UNSET, *s3_server_session.env):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    files = fsspec.open_files(
        f"s3://{BUCKET}/*.rumi", **s3_server_session.storage_options, skip_instance_cache=True
    )

    assert [f.full_name for f in files] == [f"s3://{BUCKET}/a.rumi", f"s3://{BUCKET}/b.rumi"]


def test_s3_server_helpers(s3_server: S3Server) -> None:
    url = s3_server.put_bytes("scratch", "dir/x.bin", b"0123456789")
    assert url == "s3://scratch/dir/x.bin"
    response = s3_server.client().get_object(Bucket="scratch", Key="dir/x.bin", Range="bytes=2-4")
    assert response["Body"].read() == b"234"
    get = s3_server.requests("scratch/dir/x.bin", method="GET")
    assert [(r.range, r.status, r.bytes_sent) for r in get] == [("bytes=2-4", 206, 3)]
