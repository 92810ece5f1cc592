"""CF facts in their three spellings: the sidecar's JSON, catalog columns, STAC ``raster:bands``.

Every case writes a real file with a known nodata (NaN, +inf, -inf, none, an
integer on float and on integer samples) and checks what each spelling holds
against the value written and the spelling the formats define (strict JSON;
the raster extension's ``"nan"``/``"inf"``/``"-inf"``), then that reading each
spelling back masks exactly the samples numpy says equal the nodata written.
The codec's own round trips are checked as properties (hypothesis).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import rumi
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import rumi_xarray as rx
from rumi_xarray.conventions.facts import Facts, column_differences
from rumi_xarray.conventions.sidecar import Sidecar
from rumi_xarray.write.to_rumi import write_array
from tests.truth import strict_json

TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4600000.0)
EPSG = 32633
SIZE = 16

#: (case id, stored dtype, nodata written, nodata as strict JSON holds it (absent: no
#: key), nodata as the raster extension spells it)
CASES = [
    ("float-nan", "float32", math.nan, "nan", "nan"),
    ("float-inf", "float32", math.inf, "inf", "inf"),
    ("float-minus-inf", "float64", -math.inf, "-inf", "-inf"),
    ("float-none", "float32", None, None, None),
    ("float-integer", "float32", -9999, -9999, -9999),  # as write_array was given it
    ("int16-integer", "int16", -9999, -9999, -9999),
    ("uint16-zero", "uint16", 0, 0, 0),
    ("int16-none", "int16", None, None, None),
]
ABSENT = object()


def same(a: Any, b: Any) -> bool:
    """Equal numbers, NaN equal to NaN, and the same Python type family (int vs float)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and isinstance(a, int) == isinstance(b, int)


def written(dtype: str, nodata: Any, seed: int) -> np.ndarray:
    """A (1, 2, 16, 16) array of ``dtype`` whose first pixels are the nodata value."""
    rng = np.random.default_rng(seed)
    data = rng.integers(1, 200, size=(1, 2, SIZE, SIZE)).astype(dtype)
    if nodata is not None:
        data[0, :, :3, :5] = nodata
    if np.dtype(dtype).kind == "f":
        data[0, 1, -1, -1] = np.nan if nodata is None or not math.isnan(nodata) else 1.5
    return data


def expected_mask(data: np.ndarray, nodata: Any) -> np.ndarray:
    """Where decoding must give NaN: numpy on the written samples."""
    missing = np.isnan(data) if data.dtype.kind == "f" else np.zeros(data.shape, bool)
    if nodata is not None and not (isinstance(nodata, float) and math.isnan(nodata)):
        missing |= data == nodata
    return missing


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, np.ndarray]]:
    root = tmp_path_factory.mktemp("facts")
    out = {}
    for seed, (name, dtype, nodata, _, _) in enumerate(CASES):
        data = written(dtype, nodata, seed)
        path = root / f"{name}.rumi"
        write_array(path, data, bands=["a", "b"], time=["2024-05-01"], transform=TRANSFORM,
                    crs=EPSG, tile_size=8, nodata=nodata, progress=False)
        out[name] = (path, data)
    return out


def check_fill(attrs: dict[str, Any], dtype: str, nodata: Any) -> None:
    """``_FillValue`` is the nodata written, as a sample of the stored type."""
    if nodata is None:
        assert "_FillValue" not in attrs
        return
    fill = attrs["_FillValue"]
    assert np.asarray(fill).dtype == np.dtype(dtype)
    assert same(float(fill), float(nodata))


def check_decoded(values: np.ndarray, data: np.ndarray, nodata: Any) -> None:
    """Decoded values: NaN exactly where numpy says nodata (or NaN) was written."""
    missing = expected_mask(data, nodata)
    np.testing.assert_array_equal(np.isnan(values), missing)
    np.testing.assert_array_equal(values[~missing], data[~missing].astype(values.dtype))


@pytest.mark.parametrize(("name", "dtype", "nodata", "in_json", "in_stac"), CASES,
                         ids=[c[0] for c in CASES])
def test_sidecar_json(files, name, dtype, nodata, in_json, in_stac) -> None:
    path, data = files[name]
    sidecar = Path(f"{path}.aux.json")
    content = strict_json(sidecar.read_text())  # every file written has one (its digests)
    assert content["format"] == "rumi-xarray-sidecar"
    if nodata is None:
        assert "nodata" not in content  # nothing to record
    else:
        assert same(content["nodata"], in_json)
    assert np.dtype(rumi.info(source=os.fspath(path)).dtype.name) == np.dtype(dtype)
    raw = xr.open_dataset(path, engine="rumi", mask_and_scale=False).band_data
    check_fill(raw.attrs, dtype, nodata)
    np.testing.assert_array_equal(raw.values, data)
    decoded = xr.open_dataset(path, engine="rumi", mask_and_scale=True).band_data
    check_decoded(decoded.values, data, nodata)


def test_info_json_is_strict(files, capsys: pytest.CaptureFixture[str]) -> None:
    from rumi_xarray.cli.main import main

    for name, *_, in_json, _ in CASES:
        assert main(["info", "--json", os.fspath(files[name][0])]) == 0
        described = strict_json(capsys.readouterr().out)
        assert same(described["nodata"], in_json)
    assert main(["info", os.fspath(files["float-minus-inf"][0])]) == 0
    assert "nodata -inf  (from the sidecar)" in capsys.readouterr().out


def test_catalog_columns(files, tmp_path: Path) -> None:
    table = rx.catalog([files[c[0]][0] for c in CASES])
    table.to_parquet(tmp_path / "cat.parquet")
    read = pd.read_parquet(tmp_path / "cat.parquet")
    for i, (name, dtype, nodata, _, _) in enumerate(CASES):
        column = read["nodata"].iloc[i]
        # A float column: the number written, NaN for NaN and for "none" (Parquet's
        # float null as pandas gives it back).
        if nodata is None or math.isnan(float(nodata)):
            assert math.isnan(column)
        else:
            assert float(column) == float(nodata)
        path, data = files[name]
        row = read.iloc[[i]]
        raw = rx.open_catalog(row, mask_and_scale=False).band_data
        np.testing.assert_array_equal(raw.values, data)
        if nodata is None and np.dtype(dtype).kind == "f":
            # The one case the column cannot tell apart: a float file without nodata
            # reads as NaN nodata, which masks what it would have masked anyway.
            assert math.isnan(raw.attrs["_FillValue"])
        else:
            check_fill(raw.attrs, dtype, nodata)
        decoded = rx.open_catalog(row, mask_and_scale=True).band_data
        check_decoded(decoded.values, data, nodata)


def test_catalog_columns_of_one_kind_keep_none(files) -> None:
    """Without a float column to spell it, an unknown nodata is a null, not a NaN."""
    table = rx.catalog([files["float-none"][0], files["int16-none"][0]])
    assert list(table["nodata"]) == [None, None]
    assert list(table["scale_factor"]) == [None, None]


@pytest.mark.parametrize(("name", "dtype", "nodata", "in_json", "in_stac"), CASES,
                         ids=[c[0] for c in CASES])
def test_stac_raster_bands(files, name, dtype, nodata, in_json, in_stac) -> None:
    path, data = files[name]
    (item,) = rx.to_stac([path])
    plain = item.to_dict()
    json.dumps(plain, allow_nan=False)  # strict JSON: no NaN or Infinity literal
    bands = plain["assets"]["data"]["raster:bands"]
    assert len(bands) == 2
    for band in bands:
        assert band["data_type"] == dtype
        if in_stac is None:
            assert "nodata" not in band
        else:
            assert same(band["nodata"], in_stac)
        assert not {"scale", "offset", "unit"} & set(band)
    raw = rx.open_stac(plain)
    for band, var in enumerate(("a", "b")):
        np.testing.assert_array_equal(raw[var].values[0], data[0, band])
        if nodata is None:
            assert "nodata" not in raw[var].attrs
        else:
            assert same(float(raw[var].attrs["nodata"]), float(nodata))
    decoded = rx.open_stac(plain, mask_and_scale=True)
    for band, var in enumerate(("a", "b")):
        check_decoded(decoded[var].values[0], data[0, band], nodata)


def test_scale_offset_units_in_every_spelling(tmp_path: Path) -> None:
    data = np.arange(2 * SIZE * SIZE, dtype=np.int16).reshape(1, 2, SIZE, SIZE)
    path = tmp_path / "packed.rumi"
    write_array(path, data, bands=["a", "b"], time=["2024-05-01"], transform=TRANSFORM,
                crs=EPSG, tile_size=8, nodata=-1, scale_factor=0.5, add_offset=-3.0,
                units="K", progress=False)
    content = strict_json(Path(f"{path}.aux.json").read_text())
    assert {k: content[k] for k in ("nodata", "scale_factor", "add_offset", "units")} == {
        "nodata": -1, "scale_factor": 0.5, "add_offset": -3.0, "units": "K"}
    table = rx.catalog([path])
    assert (table.loc[0, "scale_factor"], table.loc[0, "add_offset"], table.loc[0, "units"]) \
        == (0.5, -3.0, "K")
    (item,) = rx.to_stac(table)
    band = item.to_dict()["assets"]["data"]["raster:bands"][0]
    assert band == {"data_type": "int16", "nodata": -1, "scale": 0.5, "offset": -3.0,
                    "unit": "K"}
    truth = data.astype(np.float32) * np.float32(0.5) + np.float32(-3.0)
    for opened in (xr.open_dataset(path, engine="rumi").band_data,
                   rx.open_catalog(table).band_data):
        assert opened.dtype == np.float32 and opened.attrs["units"] == "K"
        np.testing.assert_array_equal(opened.values, truth)
    decoded = rx.open_stac(item, mask_and_scale=True)
    np.testing.assert_array_equal(decoded["a"].values, truth[:, 0])
    assert decoded["a"].attrs["units"] == "K"


def _item_with(files, bands: dict[str, Any], key: str = "raster:bands") -> dict[str, Any]:
    (item,) = rx.to_stac([files["float-none"][0]])
    plain = item.to_dict()
    asset = plain["assets"]["data"]
    asset.pop("raster:bands")
    asset[key] = [dict(bands), dict(bands)]
    return plain


@pytest.mark.parametrize(("spelled", "value"), [
    ("nan", math.nan), ("NaN", math.nan), ("inf", math.inf), ("-inf", -math.inf),
    ("+inf", math.inf), (-9999, -9999.0), (2.5, 2.5)])
def test_stac_in_reads_the_raster_extension_spelling(files, spelled, value) -> None:
    plain = _item_with(files, {"nodata": spelled, "scale": 2.0, "offset": 1.0, "unit": "m",
                               "data_type": "float32"})
    ds = rx.open_stac(plain)
    assert same(float(ds["a"].attrs["nodata"]), value)
    assert (ds["a"].attrs["scale_factor"], ds["a"].attrs["add_offset"]) == (2.0, 1.0)
    assert ds["a"].attrs["units"] == "m"


def test_stac_in_reads_stac_1_1_bands(files) -> None:
    plain = _item_with(files, {"name": "a", "nodata": "-inf", "raster:scale": 0.25,
                               "raster:offset": 4, "unit": "K"}, key="bands")
    ds = rx.open_stac(plain)
    assert ds["a"].attrs["nodata"] == -np.inf
    assert (ds["a"].attrs["scale_factor"], ds["a"].attrs["add_offset"]) == (0.25, 4.0)


def test_stac_in_refuses_what_one_file_cannot_hold(files) -> None:
    plain = _item_with(files, {"nodata": 0})
    plain["assets"]["data"]["raster:bands"][1]["nodata"] = 1
    with pytest.raises(rx.RumiCatalogError, match="one set for all its bands"):
        rx.open_stac(plain)
    (item,) = rx.to_stac([files["int16-none"][0]])
    plain = item.to_dict()
    for band in plain["assets"]["data"]["raster:bands"]:
        band["nodata"] = "nan"
    with pytest.raises(rx.RumiCatalogError, match="nodata nan cannot be a int16 sample"):
        rx.open_stac(plain)
    for band in plain["assets"]["data"]["raster:bands"]:
        band["nodata"] = "missing"
    with pytest.raises(rx.RumiCatalogError, match="nodata 'missing' is not a number"):
        rx.open_stac(plain)


def test_a_sidecar_number_that_is_not_one_is_a_format_error(files, tmp_path: Path) -> None:
    path = files["int16-integer"][0]
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "rumi-xarray-sidecar", "version": 1,
                                 "nodata": "none"}))
    with pytest.raises(rx.RumiFormatError, match=r"other\.json.*nodata 'none' is not a number"):
        xr.open_dataset(path, engine="rumi", sidecar=other)
    other.write_text(json.dumps({"format": "rumi-xarray-sidecar", "version": 1,
                                 "nodata": "-9999", "scale_factor": "+Inf"}))
    # What scale_factor= refuses as a keyword is refused from a sidecar too.
    with pytest.raises(rx.RumiFormatError,
                       match=r"other\.json.*scale_factor inf must be a finite number"):
        xr.open_dataset(path, engine="rumi", sidecar=other)
    other.write_text(json.dumps({"format": "rumi-xarray-sidecar", "version": 1,
                                 "nodata": "-9999", "scale_factor": "2"}))
    attrs = xr.open_dataset(path, engine="rumi", sidecar=other,
                            mask_and_scale=False).band_data.attrs
    assert attrs["_FillValue"] == -9999 and attrs["scale_factor"] == 2


# --- the codec's round trips, as properties -----------------------------------------

numbers = st.floats(allow_nan=True, allow_infinity=True, width=64)
nodata_values = st.one_of(st.none(), numbers, st.integers(-(2**63), 2**64 - 1))
#: Scales and offsets the one validation accepts (finite; a scale other than 0).
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
facts = st.builds(Facts, nodata=nodata_values,
                  scale=st.one_of(st.none(), finite.filter(lambda v: v != 0)),
                  offset=st.one_of(st.none(), finite),
                  units=st.one_of(st.none(), st.text(min_size=1, max_size=8)),
                  decoded_dtype=st.sampled_from([None, "float32", "float64"]))


@settings(max_examples=200, deadline=None)
@given(facts)
def test_json_round_trip(f: Facts) -> None:
    text = json.dumps(f.to_json(), allow_nan=False)
    back = Facts.from_json(strict_json(text))
    assert back == f
    assert type(back.nodata) is type(f.nodata)  # integers stay exact integers


@settings(max_examples=100, deadline=None)
@given(facts, st.sampled_from(["float32", "int16", "uint64"]))
def test_columns_round_trip_through_arrow(f: Facts, dtype: str) -> None:
    table = pa.Table.from_pandas(pd.DataFrame([f.to_columns()]))
    back = Facts.from_columns(table.to_pandas().iloc[0], dtype)
    def null(value: Any) -> Any:  # a NaN in a float column is a null
        return None if isinstance(value, float) and math.isnan(value) else value

    # ...except a NaN nodata of floating-point samples, which is a NaN nodata
    nodata = f.nodata if np.dtype(dtype).kind == "f" else null(f.nodata)
    assert back == Facts(nodata, null(f.scale), null(f.offset), f.units, f.decoded_dtype)


@settings(max_examples=200, deadline=None)
@given(facts.filter(lambda f: f.scale is None or math.isfinite(f.scale))
       .filter(lambda f: f.offset is None or math.isfinite(f.offset)),
       st.sampled_from(["float32", "float64"]))
def test_raster_band_round_trip(f: Facts, dtype: str) -> None:
    band = json.loads(json.dumps(f.to_raster_band(dtype), allow_nan=False))
    assert band["data_type"] == dtype
    if isinstance(f.nodata, float) and not math.isfinite(f.nodata):
        assert band["nodata"] in ("nan", "inf", "-inf")
    back = Facts.from_raster_bands([band, band], dtype)
    assert back == Facts(f.nodata, f.scale, f.offset, f.units)  # no decoded dtype in STAC


def test_catalog_index_compares_facts_by_meaning(tmp_path: Path) -> None:
    """A task checks each scene's sidecar columns against the reference row's.

    An integer file without nodata is a null in one Parquet file and a NaN in
    another (a float column spells null so): the same fact, so they stack; a
    nodata that differs is refused naming the row and the column.
    """
    data = written("int16", None, 1)
    paths = []
    for day in (1, 2, 3):
        path = tmp_path / f"d{day}.rumi"
        write_array(path, data, bands=["a", "b"], time=[f"2024-05-0{day}"],
                    transform=TRANSFORM, crs=EPSG, tile_size=8, progress=False,
                    nodata=-9999 if day == 3 else None)
        paths.append(path)
    folder = tmp_path / "cat"
    folder.mkdir()
    first = rx.catalog(paths[:1])
    assert first["nodata"].isna().all() and first["nodata"].dtype == object
    first.to_parquet(folder / "a.parquet")
    second = rx.catalog(paths[1:2]).assign(nodata=np.nan)
    assert second["nodata"].dtype == np.float64
    second.to_parquet(folder / "b.parquet")
    cube = rx.open_catalog(folder, chunks={}, mask_and_scale=False).band_data
    np.testing.assert_array_equal(cube.values, np.concatenate([data, data]))
    assert "_FillValue" not in cube.attrs
    # (a float column, as the other files': Parquet does not merge int64 with double)
    rx.catalog(paths[2:]).astype({"nodata": float}).to_parquet(folder / "c.parquet")
    with pytest.raises(rx.RumiCatalogError, match=r"d3\.rumi.*nodata -9999\.0 != None"):
        rx.open_catalog(folder, chunks={}, mask_and_scale=False).band_data.compute()


def test_sidecar_differences_compare_as_facts_do_nan_being_nan() -> None:
    # One rule for "the same fact": Facts' equality (NaN is NaN), used by the sidecar too.
    a = Sidecar(Facts(nodata=math.nan, units="K"), crs_wkt="WKT")
    assert a.differences(Sidecar(Facts(nodata=math.nan, units="K"), crs_wkt="WKT")) == []
    assert a.differences(Sidecar(Facts(nodata=0, units="K"), crs_wkt="other")) == [
        "nodata nan != 0", "crs_wkt 'WKT' != 'other'"]
    assert column_differences({"scale_factor": 2.0}, {"scale_factor": None},
                              ["scale_factor"]) == ["scale_factor 2.0 != None"]
