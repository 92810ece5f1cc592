"""Band short names: fields are split on commas outside brackets only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.conventions.bands import top_level_fields
from rumi_xarray.demo import synthetic


def read(path: Path) -> np.ndarray:
    """The file's samples as plain librumi reads them, ``(time, band, y, x)``."""
    header = rumi.info(source=str(path)).header
    return rumi.read(str(path), header, pattern="t b y x")


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
