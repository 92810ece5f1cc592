"""Where a source lives (``sources.location.locate``), and GDAL ``/vsi`` paths end to end.

The unit tests check each kind of input against what a user means by it; the
property tests hold :func:`locate` to the ``"://"`` rules the package used
before the seam (written out here as the oracle); the end-to-end tests read
``/vsicurl/`` and ``/vsis3/`` paths from the loopback HTTP and S3 servers and
compare them with ``rumi.read`` of the local file.
"""

from __future__ import annotations

import io
import json
import os
import pickle
from pathlib import Path, PurePosixPath

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import rumi_xarray as rx
from rumi_xarray.backend.entrypoint import RumiBackendEntrypoint
from rumi_xarray.cli.main import main
from rumi_xarray.sources import resolve, transport
from rumi_xarray.sources.location import Source, locate
from rumi_xarray.sources.schemes import NATIVE_SCHEMES, VSI_REFUSED, VSI_STORES

# Ground truth: librumi's plain read of the local file.
from tests.truth import read as expected

EXAMPLES = int(os.environ.get("RUMI_PROPERTY_EXAMPLES", "60"))


# --- every kind of input ------------------------------------------------------------


class _PathLike:
    def __init__(self, path: str | bytes) -> None:
        self.path = path

    def __fspath__(self) -> str | bytes:
        return self.path


@pytest.mark.parametrize("given_, target", [
    ("scene.rumi", os.path.join(os.getcwd(), "scene.rumi")),
    ("/data/scene.rumi", "/data/scene.rumi"),
    ("../up/scene.rumi", os.path.normpath(os.path.join(os.getcwd(), "../up/scene.rumi"))),
    ("~/scene.rumi", os.path.join(os.path.expanduser("~"), "scene.rumi")),
    ("/data/with space/é.rumi", "/data/with space/é.rumi"),
    # A local directory whose name merely starts with "vsi" is no GDAL path.
    ("/vsidata/scene.rumi", "/vsidata/scene.rumi"),
    ("/vsis3", "/vsis3"),
])
def test_local_paths_are_absolute_with_home_expanded(given_, target):
    where = locate(given_)
    assert where == Source("local", target, None, given_)
    assert where.local and not where.url and not where.in_memory


def test_path_likes_are_local_paths(tmp_path):
    file = tmp_path / "a.rumi"
    assert locate(file) == Source("local", str(file), None, str(file))
    assert locate(PurePosixPath("/x/a.rumi")).target == "/x/a.rumi"
    assert locate(_PathLike(str(file))).target == str(file)
    # os.fspath may return bytes: decoded with the file system encoding.
    assert locate(_PathLike(os.fsencode(str(file)))).target == str(file)
    # pathlib collapses "//": a Path is never a URL.
    assert locate(Path("s3://bucket/key")).local
    # A Path of a GDAL store path is the URL it names.
    assert locate(Path("/vsis3/bucket/key")).target == "s3://bucket/key"


#: (what the user typed, who reads it, the URL it is; None: the URL as typed)
URLS = [
    ("https://example.org/a.rumi", "native", None),
    ("http://127.0.0.1:8000/a.rumi?X-Amz-Signature=abc", "native", None),
    ("s3://bucket/key.rumi", "native", None),
    ("gs://bucket/key.rumi", "native", None),
    ("az://container/blob.rumi", "native", None),
    ("abfs://container/blob.rumi", "native", None),
    ("hf://owner/name/a.rumi", "native", None),
    ("file:///data/a.rumi", "native", None),
    ("memory://a.rumi", "fsspec", None),
    ("ftp://host/a.rumi", "fsspec", None),
    # GDAL virtual paths: the URLs they name.
    ("/vsicurl/https://example.org/a.rumi", "native", "https://example.org/a.rumi"),
    ("/vsicurl/http://127.0.0.1:9/a.rumi?sig=x", "native", "http://127.0.0.1:9/a.rumi?sig=x"),
    ("/vsicurl_streaming/https://h/a.rumi", "native", "https://h/a.rumi"),
    ("/vsis3/bucket/dir/key.rumi", "native", "s3://bucket/dir/key.rumi"),
    ("/vsis3_streaming/bucket/key.rumi", "native", "s3://bucket/key.rumi"),
    ("/vsigs/bucket/key.rumi", "native", "gs://bucket/key.rumi"),
    ("/vsiaz/container/blob.rumi", "native", "az://container/blob.rumi"),
    ("/vsiadls/container/blob.rumi", "native", "abfs://container/blob.rumi"),
    ("/vsihf/owner/name/a.rumi", "native", "hf://owner/name/a.rumi"),
    ("/vsioss/bucket/key.rumi", "fsspec", "oss://bucket/key.rumi"),
    ("/vsiswift/container/key.rumi", "fsspec", "swift://container/key.rumi"),
    ("/vsihdfs/user/a.rumi", "fsspec", "hdfs://user/a.rumi"),
]


@pytest.mark.parametrize("typed, kind, url", URLS)
def test_urls_say_who_reads_them(typed, kind, url):
    url = url or typed
    where = locate(typed)
    assert where == Source(kind, url, url.split("://", 1)[0], typed)
    assert where.url and not where.local
    assert (kind == "native") == (url.split("://", 1)[0] in NATIVE_SCHEMES)


@pytest.mark.parametrize("typed, scheme", [
    ("S3://bucket/key.rumi", "s3"),
    ("zip://a.rumi::file:///data/x.zip", "zip"),
    ("simplecache::s3://bucket/key.rumi", "simplecache"),
])
def test_schemes_are_lower_case_and_chains_go_to_fsspec(typed, scheme):
    kind = "fsspec" if "::" in typed else "native"
    assert locate(typed) == Source(kind, typed, scheme, typed)


@pytest.mark.parametrize("path, why", [
    ("/vsimem/a.rumi", "/vsimem/ virtual file system has no URL"),
    ("/vsizip/data/x.zip/a.rumi", "/vsizip/ virtual file system has no URL"),
    ("/vsisubfile/100_2000,/data/a.rumi", "/vsisubfile/"),
    ("/vsistdin/", "/vsistdin/"),
    ("/vsicurl/ftp://host/a.rumi", "/vsicurl/ reads http(s) URLs only"),
    ("/vsicurl//data/a.rumi", "/vsicurl/ reads http(s) URLs only"),
    ("/vsis3/", "/vsis3/ needs a bucket"),
])
def test_other_gdal_paths_are_refused_naming_the_path_and_what_to_pass(path, why):
    with pytest.raises(rx.RumiUnsupportedError) as caught:
        locate(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and why in text
    assert "Pass a local path, a URL" in text and "/vsicurl/" in text
    assert caught.value.source == path


def test_refused_gdal_paths_name_no_credentials():
    with pytest.raises(rx.RumiUnsupportedError) as caught:
        locate("/vsicurl/ftp://user:hunter2@host/a.rumi?token=s3cret")
    assert "hunter2" not in str(caught.value) and "s3cret" not in str(caught.value)
    assert "hunter2" not in caught.value.source


def test_every_refused_gdal_file_system_is_refused():
    for name in sorted(VSI_REFUSED):
        with pytest.raises(rx.RumiUnsupportedError, match=f"/{name}/"):
            locate(f"/{name}/x/a.rumi")
    assert not VSI_REFUSED & set(VSI_STORES)


@pytest.mark.parametrize("content", [b"RUMI", bytearray(b"RUMI"), memoryview(b"RUMI")])
def test_bytes_are_in_memory(content):
    assert locate(content) == Source("bytes")
    assert locate(content).in_memory and not locate(content).local


def test_file_objects_and_range_sources_carry_where_they_live(tmp_path):
    assert locate(io.BytesIO(b"RUMI")) == Source("file")
    (tmp_path / "a.rumi").write_bytes(b"RUMI")
    with open(tmp_path / "a.rumi", "rb") as f:
        assert locate(f) == Source("file")
        assert locate(transport.FileObjectSource(f)) == Source("file")
    fs = transport.FsspecSource("memory://x/a.rumi", {"key": "secret"})
    assert locate(fs) == Source("fsspec", "memory://x/a.rumi", "memory", "memory://x/a.rumi")
    assert locate(pickle.loads(pickle.dumps(fs))) == locate(fs)


@pytest.mark.parametrize("obj", [None, 3, 2.5, {"url": "s3://b/k"}, ["a.rumi"], object()])
def test_other_objects_are_a_typed_error(obj):
    with pytest.raises(rx.RumiSourceTypeError, match=r"cannot open .* as a Rumi source"):
        locate(obj)


def test_source_is_frozen():
    where = locate("s3://bucket/key")
    with pytest.raises(AttributeError):
        where.kind = "local"  # type: ignore[misc]
    assert hash(where) == hash(locate("s3://bucket/key"))


# --- the same answers as the "://" tests it replaced ------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=30)
_SCHEMES = st.sampled_from(sorted(NATIVE_SCHEMES | {"memory", "ftp", "zip", "S3", "HTTPS"}))
_SOURCES = st.one_of(
    _TEXT,
    st.builds(lambda s, r: f"{s}://{r}", _SCHEMES, _TEXT),
    st.builds(lambda a, s, r: f"{a}::{s}://{r}", st.sampled_from(["simplecache", "blockcache"]),
              _SCHEMES, _TEXT),
    st.builds(lambda r: f"/data/{r}", _TEXT),
)


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(_SOURCES)
def test_locate_answers_as_the_string_tests_did(text):
    if text.startswith("/vsi"):
        return  # the one input they got wrong (a local path that did not exist)
    where = locate(text)
    # What native/reads, keywords, the CLI, the archive token asked: a local path?
    assert where.local == ("://" not in text and "::" not in text)
    # What transport.needs_fsspec answered.
    legacy_fsspec = "::" in text or (
        "://" in text and text.split("://", 1)[0].lower() not in NATIVE_SCHEMES)
    assert (where.kind == "fsspec") == legacy_fsspec
    # What resolve() handed librumi.
    if where.local:
        assert where.target == os.path.abspath(os.path.expanduser(text))
    else:
        assert where.target == text
    assert where.given == text


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.sampled_from(sorted(VSI_STORES)), st.booleans(),
       st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=30))
def test_every_store_prefix_maps_to_its_url(name, streaming, rest):
    prefix = f"/{name}{'_streaming' if streaming else ''}/"
    where = locate(prefix + rest)
    assert where.target == VSI_STORES[name] + rest and where.url
    assert where.given == prefix + rest


def test_resolve_hands_librumi_what_locate_says(tmp_path):
    assert resolve.resolve("/vsis3/bucket/key.rumi") == "s3://bucket/key.rumi"
    assert resolve.resolve(tmp_path / "a.rumi") == str(tmp_path / "a.rumi")
    assert isinstance(resolve.resolve("/vsioss/bucket/key.rumi"), transport.FsspecSource)
    with pytest.raises(rx.RumiUnsupportedError):
        resolve.resolve("/vsimem/a.rumi")


# --- /vsi paths end to end -------------------------------------------------------------


def test_vsicurl_reads_from_the_http_server(http_server, remote_dir):
    url = http_server.url("a.rumi")
    vsi = f"/vsicurl/{url}"
    ds = xr.open_dataset(vsi, engine="rumi")
    np.testing.assert_array_equal(ds.band_data.values, expected(remote_dir / "a.rumi"))
    assert ds.band_data.encoding["source"] == url  # named by the URL it stands for
    assert http_server.requests("a.rumi")
    # Chunked, through dask: the same values.
    lazy = rx.open_dataset(vsi, chunks={}).band_data
    np.testing.assert_array_equal(lazy.values, ds.band_data.values)


def test_xarray_guesses_our_engine_for_vsi_paths():
    backend = RumiBackendEntrypoint()
    assert backend.guess_can_open("/vsicurl/https://example.org/a.rumi")
    assert backend.guess_can_open("/vsis3/bucket/a.rumi")
    assert not backend.guess_can_open("/vsis3/bucket/a.nc")
    # Ours by name, so that opening it says what to pass instead.
    assert backend.guess_can_open("/vsimem/a.rumi")


def test_vsicurl_of_a_missing_object_names_its_url_without_the_query(http_server):
    url = http_server.url("missing.rumi")
    with pytest.raises(rx.RumiFileNotFoundError) as caught:
        rx.open_dataset(f"/vsicurl/{url}?X-Amz-Signature=s3cret")
    assert url in str(caught.value) and "s3cret" not in str(caught.value)
    assert "/vsicurl/" not in str(caught.value)


def test_vsis3_reads_from_the_s3_server(s3_server, remote_dir):
    for vsi in ("/vsis3/rumi-test/a.rumi", "/vsis3_streaming/rumi-test/a.rumi"):
        s3_server.reset()
        ds = rx.open_dataset(vsi, chunks={})
        np.testing.assert_array_equal(ds.band_data.values, expected(remote_dir / "a.rumi"))
        assert ds.band_data.encoding["source"] == "s3://rumi-test/a.rumi"
        assert any(r.path.endswith("/rumi-test/a.rumi") for r in s3_server.requests())


def test_vsis3_globs_and_catalogs_as_s3_urls(s3_server, remote_dir):
    table = rx.catalog("/vsis3/rumi-test/*.rumi")
    assert sorted(table["path"]) == ["s3://rumi-test/a.rumi", "s3://rumi-test/b.rumi"]
    cube = rx.open_catalog(table[table["path"] == "s3://rumi-test/a.rumi"])
    np.testing.assert_array_equal(cube.band_data.values, expected(remote_dir / "a.rumi"))


def test_vsi_paths_in_the_cli(http_server, remote_dir, capsys):
    code = main(["info", "--json", f"/vsicurl/{http_server.url('a.rumi')}"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert '"file_bytes": null' in out
    code = main(["info", "/vsimem/a.rumi"])
    _, err = capsys.readouterr()
    assert code == 1 and "/vsimem/a.rumi: GDAL's /vsimem/ virtual file system" in err


def test_unsupported_vsi_paths_are_refused_by_every_open():
    path = "/vsizip/data/x.zip/a.rumi"
    with pytest.raises(rx.RumiUnsupportedError, match="/vsizip/"):
        xr.open_dataset(path, engine="rumi")
    with pytest.raises(rx.RumiUnsupportedError, match="/vsizip/"):
        rx.catalog([path])


def test_writes_refuse_vsi_paths_as_they_refuse_urls(tmp_path):
    data = np.zeros((1, 1, 8, 8), dtype=np.uint8)
    for target in ("/vsis3/bucket/a.rumi", "/vsimem/a.rumi", "s3://bucket/a.rumi"):
        with pytest.raises(rx.RumiWriteValueError, match="Rumi writes local files"):
            rx.write_array(target, data, bands=["b"], time=["2024-01-01"])


def test_vsicurl_stac_file_with_relative_hrefs(http_server, remote_dir):
    # A GeoJSON ItemCollection served over HTTP, its asset href relative to it: the
    # href resolves against the URL the /vsicurl/ path names.
    (item,) = rx.to_stac([remote_dir / "a.rumi"])
    plain = item.to_dict(transform_hrefs=False)
    plain["assets"]["data"]["href"] = "a.rumi"
    (remote_dir / "vsi-items.json").write_text(
        json.dumps({"type": "FeatureCollection", "features": [plain]}))
    # A remote catalog's hrefs reach a loopback server only when the caller allows it.
    with rx.set_options(allowed_hrefs=[f"127.0.0.1:{http_server.port}"]):
        ds = rx.open_stac(f"/vsicurl/{http_server.url('vsi-items.json')}", chunks={},
                          band_as_variable=False)
    (name,) = ds.data_vars
    np.testing.assert_array_equal(ds[name].values, expected(remote_dir / "a.rumi"))
    assert http_server.requests("a.rumi")
