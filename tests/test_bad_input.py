"""Bad input: a clear exception that names the file, never wrong numbers."""

from __future__ import annotations

import re
import socket

import numpy as np
import pytest
import xarray as xr
from xarray.core import indexing

import rumi_xarray as rx
from rumi_xarray.backend.accessor import backend_arrays
from rumi_xarray.backend.entrypoint import RumiBackendEntrypoint


@pytest.fixture
def good(corpus):
    return corpus["plane_tb_u16"]


def test_non_rumi_file(tmp_path):
    path = tmp_path / "holiday.rumi"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    with pytest.raises(ValueError, match=r"holiday\.rumi"):
        xr.open_dataset(path, engine="rumi")


@pytest.mark.parametrize("keep", [3, 100, 5000, 0.5, 0.999])
def test_truncated_file(tmp_path, good, keep):
    path, header, _, _ = good
    data = path.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    cut = tmp_path / "cut.rumi"
    cut.write_bytes(data[:n])
    with pytest.raises((ValueError, OSError), match=r"cut\.rumi"):
        xr.open_dataset(cut, engine="rumi")
    # With the header from a catalog, open succeeds; the read fails, naming file and window.
    ds = xr.open_dataset(path, engine="rumi")
    backend = backend_arrays(ds)[0]
    from rumi_xarray.model.cube import Cube, Scene

    broken = type(backend)(Cube.single(Scene(str(cut), header), backend.cube.grid), True)
    with pytest.raises((ValueError, OSError), match=r"cut\.rumi.*window"):
        broken[indexing.BasicIndexer((slice(None),) * 4)]


def test_header_of_another_file(corpus, good):
    path = good[0]
    other_header = corpus["cell_hwbt_u16"][1]
    with pytest.raises(ValueError, match=rf"{re.escape(path.name)}.*header"):
        xr.open_dataset(path, engine="rumi", header=other_header)


def test_missing_file(tmp_path):
    missing = tmp_path / "nowhere" / "scene.rumi"
    with pytest.raises(FileNotFoundError, match=r"scene\.rumi"):
        xr.open_dataset(missing, engine="rumi")


def test_unreachable_url_names_it_without_credentials():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://alice:s3cret@127.0.0.1:{port}/x.rumi?X-Amz-Signature=deadbeef"
    with pytest.raises(OSError) as info:
        xr.open_dataset(url, engine="rumi")
    text = str(info.value)
    assert f"127.0.0.1:{port}/x.rumi" in text
    assert "s3cret" not in text and "deadbeef" not in text and "alice" not in text
    # one redaction style, and the URL not repeated back to back
    assert "<redacted>" not in text
    named = f"http://***@127.0.0.1:{port}/x.rumi?***"
    assert f"{named}: {named}" not in text and text.count(named) <= 2, text


def test_out_of_range_selection_names_file(good):
    path, _, data, _ = good
    ds = xr.open_dataset(path, engine="rumi")
    backend = backend_arrays(ds)[0]
    for key in [(0, 0, 0, data.shape[3]), (0, 0, np.array([0, data.shape[2]]), 0),
                (data.shape[0], 0, 0, 0), (0, -data.shape[1] - 1, 0, 0)]:
        with pytest.raises(IndexError, match=re.escape(path.name)):
            backend[indexing.OuterIndexer(tuple(
                np.atleast_1d(k) if isinstance(k, np.ndarray) else k for k in key))]
    # xarray itself rejects out-of-range positions before any read
    with pytest.raises(IndexError):
        ds.band_data.isel(x=data.shape[3]).load()


def test_unsupported_object(tmp_path):
    with pytest.raises(TypeError, match="Rumi source"):
        rx.open_dataset(12345)


def test_guess_can_open_makes_no_network_request():
    # Any socket opened while guessing fails the test: the guess must come
    # from the name alone.
    real = socket.socket

    def forbidden(*args, **kwargs):
        raise AssertionError("guess_can_open opened a socket")

    socket.socket = forbidden  # type: ignore[misc]
    try:
        entry = RumiBackendEntrypoint()
        assert entry.guess_can_open("https://example.invalid/scene.rumi")
        assert not entry.guess_can_open("https://example.invalid/scene.nc")
        assert entry.guess_can_open("s3://bucket/key/scene.rumi")
    finally:
        socket.socket = real  # type: ignore[misc]


@pytest.mark.parametrize("password", ["s3cret", "s3c#ret", "s3c?ret", "s3c/ret"])
def test_remote_catalog_errors_never_show_the_password(password, monkeypatch):
    # Nothing listens on the port: a refused connection is retried as Karu retries it
    # (8 attempts over ~33 s by default). Two attempts show the same final error.
    monkeypatch.setenv("KARU_MAX_ATTEMPTS", "2")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"https://alice:{password}@127.0.0.1:{port}/catalog.parquet"
    with pytest.raises(rx.RumiError) as info:
        rx.open_catalog(url)
    text = str(info.value)
    assert "s3c" not in text and "alice" not in text, text
    assert "catalog.parquet" in text or "127.0.0.1" in text


@pytest.mark.parametrize(("url", "secret"), [
    ("https://host.example?token=abc@s3cret", "s3cret"),
    ("https://alice:pa/s3cret@host.example/key.rumi", "s3cret"),
    ("https://alice:s3cret@host.example/key.rumi?X-Amz-Signature=s3cret", "s3cret"),
])
def test_redaction_hides_every_part_of_credentials(url, secret):
    from rumi_xarray.sources.redact import redact, redact_text

    assert secret not in redact(url) and "alice" not in redact(url)
    assert secret not in redact_text(f"could not open {url}: 403")
