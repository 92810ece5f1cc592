"""xarray itself refuses to combine Rumi data in different CRSs (issue 19).

Before, ``xr.open_mfdataset`` over two UTM zones outer-joined their x/y numbers
as if they were one grid (mostly NaN) and labelled the result with the first
file's CRS; over identical numbers it merged them silently. The CRS index on
``spatial_ref`` makes every xarray combination (open_mfdataset, combine_by_coords,
concat, merge, arithmetic) refuse, while same-CRS combinations work as before.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.conventions.crs_index import RumiCRSIndex
from rumi_xarray.write.to_rumi import write_array
from tests.truth import read

# These tests combine files with xarray's current defaults on purpose: xarray warns that its
# coming join="exact" would refuse them itself (test_every_xarray_combination_refuses_two_crss
# checks join="exact" too); today the CRS index refuses them, which is what is tested.
pytestmark = pytest.mark.filterwarnings(
    "ignore:In a future version of xarray the default value for join:FutureWarning")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Scenes of 64x64 px at 10 m: two dates of one tile, its east neighbour, other zones."""
    folder = tmp_path_factory.mktemp("crs")
    rng = np.random.default_rng(5)
    layout = {  # name: (EPSG, x origin, date)
        "t1": (32633, 500000.0, "2024-01-01"), "t2": (32633, 500000.0, "2024-01-02"),
        "east": (32633, 500640.0, "2024-01-01"),
        "zone34": (32634, 500000.0, "2024-01-02"),  # the same numbers, another zone
        "zone34_shifted": (32634, 500320.0, "2024-01-02"),
    }
    out = {}
    for name, (epsg, x0, date) in layout.items():
        data = rng.integers(1, 3000, (1, 2, 64, 64)).astype(np.uint16)
        path = folder / f"{name}.rumi"
        write_array(path, data, bands=["B04", "B08"], time=[date],
                    transform=(10, 0, x0, 0, -10, 4_000_000), crs=epsg, tile_size=32)
        out[name] = path
    return out


def _refused(info: pytest.ExceptionInfo, *names: Path) -> None:
    err = info.value
    assert isinstance(err, rx.RumiCRSMismatchError)
    assert isinstance(err, ValueError) and isinstance(err, rx.RumiError)
    text = str(err)
    assert "EPSG:32633" in text and "EPSG:32634" in text
    assert "rx.open_stac" in text
    for name in names:
        assert str(name) in text


@pytest.mark.parametrize("pair", [("t1", "zone34"), ("t1", "zone34_shifted")])
@pytest.mark.parametrize("how", [{}, {"chunks": {}}, {"parallel": True},
                                 {"combine": "nested", "concat_dim": "time"},
                                 {"coords": "all", "data_vars": "all"},
                                 {"compat": "override", "coords": "minimal"}])
def test_open_mfdataset_refuses_two_crss(scenes, pair, how):
    files = [scenes[p] for p in pair]
    with pytest.raises(rx.RumiCRSMismatchError) as info:
        xr.open_mfdataset(files, engine="rumi", **how)
    _refused(info, *files)


def test_every_xarray_combination_refuses_two_crss(scenes):
    a = xr.open_dataset(scenes["t1"], engine="rumi")
    b = xr.open_dataset(scenes["zone34"], engine="rumi")
    for combine in (lambda: xr.combine_by_coords([a, b]),
                    lambda: xr.concat([a, b], "time"),
                    lambda: xr.merge([a.rename(band_data="p"), b.rename(band_data="q")]),
                    lambda: a.band_data.isel(time=0) - b.band_data.isel(time=0)):
        with pytest.raises(rx.RumiCRSMismatchError) as info:
            combine()
        _refused(info, scenes["t1"], scenes["zone34"])
    # join="exact" is refused by xarray itself, naming the CRS coordinate
    same_date = xr.open_dataset(scenes["t2"], engine="rumi")
    with pytest.raises(ValueError, match="spatial_ref"):
        xr.align(same_date, b, join="exact")


def test_same_crs_open_mfdataset_is_unchanged(scenes, process_pool):
    truth = {n: read(scenes[n]) for n in ("t1", "t2", "east")}
    # along time
    ds = xr.open_mfdataset([scenes["t2"], scenes["t1"]], engine="rumi")
    assert ds.sizes == {"time": 2, "band": 2, "y": 64, "x": 64}
    np.testing.assert_array_equal(ds.band_data.values,
                                  np.concatenate([truth["t1"], truth["t2"]]))
    assert ds.rio.crs.to_epsg() == 32633
    assert isinstance(ds.xindexes["spatial_ref"], RumiCRSIndex)
    # side by side (one date), through dask and combine_by_coords
    tiles = xr.open_mfdataset([scenes["east"], scenes["t1"]], engine="rumi", chunks={})
    assert tiles.sizes == {"time": 1, "band": 2, "y": 64, "x": 128}
    np.testing.assert_array_equal(tiles.band_data.values,
                                  np.concatenate([truth["t1"], truth["east"]], axis=3))
    parts = [xr.open_dataset(scenes[n], engine="rumi", chunks={}) for n in ("t1", "east")]
    both = xr.combine_by_coords(parts)
    np.testing.assert_array_equal(both.band_data.compute().values, tiles.band_data.values)
    got = tiles.band_data.mean().compute(scheduler="processes", pool=process_pool)
    assert float(got) == pytest.approx(float(np.concatenate(
        [truth["t1"], truth["east"]], axis=3).mean()))
    # the index pickles (dask graphs, distributed) and keeps its CRS
    again = pickle.loads(pickle.dumps(ds))
    assert again.xindexes["spatial_ref"].label == "EPSG:32633"
    assert ds.spatial_ref.ndim == 0  # not grown along time by the combination
    xr.testing.assert_identical(xr.open_dataset(scenes["t1"], engine="rumi"),
                                xr.open_dataset(scenes["t1"], engine="rumi"))


def test_data_without_the_index_still_align(scenes):
    # rioxarray's arrays (or any other) carry no CRS index: they align on x/y as before.
    rio = pytest.importorskip("rioxarray")
    ds = xr.open_dataset(scenes["t1"], engine="rumi")
    plain = xr.DataArray(np.ones((64, 64)), dims=("y", "x"),
                         coords={"y": ds.y.values, "x": ds.x.values, "spatial_ref": 0})
    diff = ds.band_data.isel(time=0) - plain
    assert diff.sizes == {"band": 2, "y": 64, "x": 64}
    xr.align(ds.band_data, plain, join="exact")
    assert rio is not None and ds.band_data.rio.crs.to_epsg() == 32633
    written = ds.rio.write_crs("EPSG:32633")  # replacing spatial_ref drops the index
    assert written.rio.crs.to_epsg() == 32633


def test_equivalent_crs_texts_are_one_crs():
    from pyproj import CRS

    crs = CRS.from_epsg(32633)
    wkt2 = RumiCRSIndex(xr.Variable((), 0, {"crs_wkt": crs.to_wkt()}), "spatial_ref")
    wkt1 = RumiCRSIndex(xr.Variable((), 0, {"crs_wkt": crs.to_wkt("WKT1_GDAL")}),
                        "spatial_ref")
    other = RumiCRSIndex(xr.Variable((), 0, {"crs_wkt": CRS.from_epsg(32634).to_wkt()}),
                         "spatial_ref")
    assert wkt2.wkt != wkt1.wkt and wkt2.equals(wkt1)
    assert not wkt2.equals(other)
    assert wkt2.label == "WGS 84 / UTM zone 33N"  # no epsg attribute: the WKT's name
    with pytest.raises(rx.RumiCRSMismatchError, match="UTM zone 34N"):
        wkt2.join(other)


def test_dropping_spatial_ref_drops_the_guard(scenes):
    ds = xr.open_dataset(scenes["t1"], engine="rumi", drop_variables="spatial_ref")
    assert "spatial_ref" not in ds.xindexes and "spatial_ref" not in ds.coords


def test_a_crs_without_code_suggests_a_crs_pyproj_accepts(tmp_path):
    from pyproj import CRS

    custom = CRS.from_proj4("+proj=tmerc +lat_0=0 +lon_0=15.5 +k=0.9996 +x_0=500000 "
                            "+y_0=0 +ellps=WGS84 +units=m +no_defs")
    assert custom.to_authority() is None
    import rioxarray  # noqa: F401  (the .rio accessor)

    files = []
    # Writing or opening a CRS without an EPSG code says so (once, naming the file).
    with pytest.warns(UserWarning, match="has no EPSG equivalent"):
        for name, crs, date in (("custom", custom, "2024-01-01"),
                                ("utm", CRS.from_epsg(32633), "2024-01-02")):
            path = tmp_path / f"{name}.rumi"
            data = xr.DataArray(np.ones((1, 32, 32), np.uint16), dims=("band", "y", "x"),
                                coords={"band": ["B04"],
                                        "y": 4_000_000 - 5 - 10 * np.arange(32),
                                        "x": 500_005 + 10 * np.arange(32)})
            rx.to_rumi(data.rio.write_crs(crs), path, time=date, tile_size=32)
            files.append(path)
        opened = [xr.open_dataset(f, engine="rumi") for f in files]
    for first, second, expected in ((0, 1, "crs=<target CRS>"), (1, 0, "crs='EPSG:32633'")):
        with pytest.raises(rx.RumiCRSMismatchError) as info:
            xr.concat([opened[first], opened[second]], "time")
        text = str(info.value)
        suggested = text.split("rx.open_stac(rx.to_stac(files), ")[1].split(", resolution")[0]
        assert suggested == expected and "'unknown'" not in text
    with pytest.raises(rx.RumiCRSMismatchError, match="crs=<target CRS>"):
        xr.open_mfdataset(files, engine="rumi")
