"""Band names as people use them: short names split on commas outside brackets only,
full texts kept and written back, companions (common name, wavelength) like stackstac."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.conventions.bands import top_level_fields
from rumi_xarray.demo import synthetic
from rumi_xarray.write.to_rumi import to_rumi, write_array
from tests.scenes import TEXTS, reflectance, scene_geotiff
from tests.truth import read

# The text `make demo` gives its land-cover file (rumi_xarray/demo/ndvi.py).
LAND_COVER = ("land cover ("
              + ", ".join(f"{k} {name}" for k, name in enumerate(synthetic.LAND_COVER)) + ")")


@pytest.mark.parametrize(("text", "fields"), [
    ("B04, Red, 665nm", ["B04", "Red", "665nm"]),
    (LAND_COVER, [LAND_COVER]),
    ("mask [0 clear, 1 cloud], QA", ["mask [0 clear, 1 cloud]", "QA"]),
    ("flags {a, (b, c)}, d", ["flags {a, (b, c)}", "d"]),
    ("odd), x", ["odd)", "x"]),  # a stray closing bracket is text
])
def test_top_level_fields(text: str, fields: list[str]) -> None:
    assert top_level_fields(text) == fields


def test_a_parenthesised_list_stays_in_the_short_name(tmp_path: Path) -> None:
    assert LAND_COVER == "land cover (0 water, 1 forest, 2 crop, 3 urban)"
    data = np.arange(2 * 6 * 7, dtype=np.uint8).reshape(1, 2, 6, 7) % 4
    path = tmp_path / "land_cover.rumi"
    rx.write_array(path, data, bands=[LAND_COVER, "B04, Red, 665nm"], time=["2024-01-01"])
    ds = xr.open_dataset(path, engine="rumi")
    assert list(ds.band.values) == [LAND_COVER, "B04"]
    assert list(ds.band_text.values) == [LAND_COVER, "B04, Red, 665nm"]
    truth = read(path)
    np.testing.assert_array_equal(ds.band_data.sel(band=LAND_COVER).values, truth[:, 0])
    np.testing.assert_array_equal(ds.band_data.sel(band="B04").values, truth[:, 1])
    with pytest.raises(KeyError):
        ds.band_data.sel(band="land cover (0 water")  # the old, split name
    by_variable = xr.open_dataset(path, engine="rumi", band_as_variable=True)
    assert list(by_variable.data_vars) == [LAND_COVER, "B04"]


def test_the_demo_land_cover_file_alone(tmp_path: Path) -> None:
    # As the demo writes it: one band, so its text is its own short name.
    scene = xr.DataArray(np.zeros((6, 7), np.uint8), dims=("y", "x"))
    path = tmp_path / "land_cover.rumi"
    rx.to_rumi(scene.expand_dims(band=[LAND_COVER]), path,
               time=(np.datetime64("2024-01-01"), np.datetime64("2025-01-01")))
    ds = xr.open_dataset(path, engine="rumi")
    assert list(ds.band.values) == [LAND_COVER] and "band_text" not in ds.coords
    np.testing.assert_array_equal(ds.band_data.sel(band=LAND_COVER).values,
                                  read(path)[:, 0])


# --- band names as people use them: full texts, short names, companions ---------------


def test_bands_select_by_short_name_like_stackstac(converted: Path) -> None:
    ds = xr.open_dataset(converted, engine="rumi")
    assert list(ds.band.values) == ["B04", "B08", "B11"]
    assert list(ds.band_text.values) == TEXTS
    assert list(ds.common_name.values[:2]) == ["red", "nir"]
    np.testing.assert_allclose(ds.center_wavelength.values, [0.665, 0.842, 1.61])
    red = ds.band_data.sel(band="B04")
    np.testing.assert_array_equal(red.values, ds.band_data.values[:, 0])
    assert str(red.band_text.values) == "B04, Red, 665nm"
    by_variable = xr.open_dataset(converted, engine="rumi", band_as_variable=True)
    assert list(by_variable.data_vars) == ["B04", "B08", "B11"]
    assert by_variable["B08"].attrs["long_name"] == "B08, NIR, 842nm"
    np.testing.assert_array_equal(by_variable["B11"].values, ds.band_data.values[:, 2])
    # Texts whose first fields repeat keep the whole text as the name.
    twins = converted.with_name("twins.rumi")
    write_array(twins, np.zeros((1, 2, 4, 4), np.uint8), bands=["B04, a", "B04, b"],
                time=["2024-01-01"])
    assert list(xr.open_dataset(twins, engine="rumi").band.values) == ["B04, a", "B04, b"]


def test_band_texts_round_trip_in_full(converted: Path, tmp_path: Path) -> None:
    rioxarray = pytest.importorskip("rioxarray")
    ds = rx.open_dataset(converted)
    again = tmp_path / "again.rumi"
    to_rumi(ds, again)  # band_text wins over the short names
    assert rumi.info(source=os.fspath(again)).bands == TEXTS
    subset = tmp_path / "subset.rumi"
    to_rumi(ds.sel(band=["B11", "B04"]), subset)
    assert rumi.info(source=os.fspath(subset)).bands == [TEXTS[2], TEXTS[0]]
    # band_as_variable keeps each full text in long_name: it is what is stored,
    # so the band companions come back as they were.
    by_variable = tmp_path / "by_variable.rumi"
    to_rumi(rx.open_dataset(converted, band_as_variable=True), by_variable)
    assert rumi.info(source=os.fspath(by_variable)).bands == TEXTS
    back = rx.open_dataset(by_variable)
    for name in ("band", "band_text", "common_name", "center_wavelength"):
        xr.testing.assert_identical(back[name], ds[name])
    np.testing.assert_array_equal(back.band_data.values, ds.band_data.values)
    for band in ds.band.values:
        np.testing.assert_array_equal(
            rx.open_dataset(by_variable, band_as_variable=True)[str(band)].values,
            ds.band_data.sel(band=band).values)
    # rioxarray objects: GDAL descriptions, one text for several equal ones.
    same = scene_geotiff(tmp_path / "same.tif", reflectance()[:2], descriptions=["NIR"] * 2)
    to_rumi(rioxarray.open_rasterio(same), tmp_path / "same.rumi", time="2024-01-01")
    assert rumi.info(source=os.fspath(tmp_path / "same.rumi")).bands == ["NIR (1)", "NIR (2)"]
