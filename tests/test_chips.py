"""Chips for models (issue 22): rx.read_chips, .rumi.chips, explain_chips, rumi_xarray.torch.

Ground truth is ``rumi.read`` of each chip's window from the file holding its date.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import rumi
import torch
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

import rumi_xarray as rx
from rumi_xarray.demo import synthetic
from rumi_xarray.demo.ndvi import _demo_write
from rumi_xarray.torch import ChipDataset, GridChipSampler, RandomChipSampler, collate
from tests.servers import RangeHTTPServer
from tests.truth import read

SIZE = 200  # not a multiple of the tile: the last tile row and column are clipped
TILE = 64
DATES = 4
CHIP = 48


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("chips")
    scene = synthetic.scene_series(n_dates=DATES, size=SIZE)
    paths = _demo_write(scene, str(out), 2024, TILE)
    # A scene with nodata (0) in its sidecar, for mask_and_scale and boundless fills.
    step = scene["band_data"].isel(time=0).copy()
    step.values[:, :10, :10] = 0
    step.attrs.update(_FillValue=0, scale_factor=1e-4)
    paths["nodata"] = str(out / "nodata.rumi")
    rx.to_rumi(step, paths["nodata"], tile_size=TILE)
    paths["root"] = out
    return paths


def truth(path: str, t: int, bands: list[int], row: int, col: int, size: int) -> np.ndarray:
    return read(path, time=[t], bands=bands, window=(row, col, size, size))[0]


def random_starts(rng: np.random.Generator, n: int, times: int, size: int = CHIP) -> np.ndarray:
    starts = np.stack([rng.integers(0, times, n), rng.integers(0, SIZE - size + 1, n),
                       rng.integers(0, SIZE - size + 1, n)], axis=1)
    # Chips at the last tile row and column, ending at the raster's edge.
    starts[0] = (0, SIZE - size, SIZE - size)
    starts[1] = (times - 1, SIZE - size, 0)
    return starts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chips_of_a_multi_date_file_equal_rumi_read(demo: dict, seed: int) -> None:
    ds = xr.open_dataset(demo["series"], engine="rumi")
    rng = np.random.default_rng(seed)
    starts = random_starts(rng, 12, DATES)
    rx.stats(reset=True)
    got = rx.read_chips(ds, starts, CHIP, bands=["B08", "B02"])
    counts = rx.stats(reset=True)
    assert got.shape == (12, 2, CHIP, CHIP) and got.dtype == np.uint16
    for i, (t, r, c) in enumerate(starts.tolist()):
        np.testing.assert_array_equal(got[i], truth(demo["series"], t, [3, 0], r, c, CHIP))
    # One native call per distinct date (frames hold one date each), never per chip.
    assert counts["calls"] == len(set(starts[:, 0].tolist()))
    assert counts["items"] == 12


def test_a_batch_across_scenes_is_one_native_call(demo: dict) -> None:
    cube = rx.open_mfdataset(demo["scenes"])
    starts = random_starts(np.random.default_rng(3), 16, DATES)
    plan = rx.explain_chips(cube, starts, CHIP)
    rx.stats(reset=True)
    got = rx.read_chips(cube, starts, CHIP)
    counts = rx.stats(reset=True)
    assert counts["calls"] == 1 == plan.calls
    assert counts["planned_frames"] == plan.frames and counts["items"] == 16
    assert plan.decoded_bytes == got.nbytes
    for i, (t, r, c) in enumerate(starts.tolist()):
        np.testing.assert_array_equal(got[i], truth(demo["scenes"][t], 0, [0, 1, 2, 3], r, c,
                                                    CHIP))


def test_catalog_chips_over_http_touch_no_more_requests_than_frames(demo: dict) -> None:
    root = Path(demo["root"])
    with RangeHTTPServer(root) as http:
        urls = [http.url(os.path.relpath(p, root)) for p in demo["scenes"]]
        cube = rx.open_catalog(rx.catalog(urls))
        starts = random_starts(np.random.default_rng(4), 12, DATES)
        plan = rx.explain_chips(cube, starts, CHIP, band_index=[1, 2])
        http.reset()
        rx.stats(reset=True)
        got = rx.read_chips(cube, starts, CHIP, band_index=[1, 2])
        counts = rx.stats(reset=True)
        served = http.requests()
    assert counts["calls"] == 1
    assert 0 < len(served) <= plan.frames  # Karu coalesces neighbouring frames
    for i, (t, r, c) in enumerate(starts.tolist()):
        np.testing.assert_array_equal(got[i], truth(demo["scenes"][t], 0, [1, 2], r, c, CHIP))


def test_torch_chips_are_librumis_allocation_and_exact(demo: dict) -> None:
    cube = rx.open_mfdataset(demo["scenes"])
    starts = random_starts(np.random.default_rng(5), 6, DATES)
    got = rx.read_chips(cube, starts, CHIP, framework="torch")
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == (6, 4, CHIP, CHIP)
    np.testing.assert_array_equal(got.numpy(), rx.read_chips(cube, starts, CHIP))
    # Several dates of one file: assembled in one buffer, handed over without a copy.
    series = xr.open_dataset(demo["series"], engine="rumi")
    tensor = rx.read_chips(series, starts, CHIP, framework="torch")
    np.testing.assert_array_equal(tensor.numpy(), rx.read_chips(series, starts, CHIP))


def test_chips_decode_into_a_given_buffer(demo: dict) -> None:
    cube = rx.open_mfdataset(demo["scenes"])
    starts = random_starts(np.random.default_rng(6), 5, DATES)
    buffer = torch.empty((5, 2, CHIP, CHIP), dtype=torch.uint16).share_memory_()
    got = rx.read_chips(cube, starts, CHIP, band_index=[3, 1], out=buffer.numpy())
    assert got.ctypes.data == buffer.data_ptr()  # decoded in place, no copy
    np.testing.assert_array_equal(buffer.numpy(),
                                  rx.read_chips(cube, starts, CHIP, band_index=[3, 1]))
    with pytest.raises(rx.RumiSelectionError, match="out= must be"):
        rx.read_chips(cube, starts, CHIP, out=np.empty((5, 4, CHIP, CHIP), np.float32))


def test_boundless_chips_fill_outside_with_nodata(demo: dict) -> None:
    ds = xr.open_dataset(demo["nodata"], engine="rumi", mask_and_scale=False)
    full = read(demo["nodata"])[0]
    pad = 2 * CHIP
    padded = np.pad(full, ((0, 0), (pad, pad), (pad, pad)), constant_values=0)
    starts = np.array([[0, -20, -30], [0, SIZE - 10, SIZE - 40], [0, -CHIP - 5, 0],
                       [0, 5, 7]])
    with pytest.raises(rx.RumiSelectionError, match=r"crosses the edge.*boundless"):
        rx.read_chips(ds, starts, CHIP)
    got = rx.read_chips(ds, starts, CHIP, boundless=True)
    for i, (_, r, c) in enumerate(starts.tolist()):
        np.testing.assert_array_equal(got[i], padded[:, r + pad:r + pad + CHIP,
                                                     c + pad:c + pad + CHIP])
    # Decoded: nodata -> NaN, scaled, exactly as open_dataset(mask_and_scale=True).
    decoded = xr.open_dataset(demo["nodata"], engine="rumi")
    chips = rx.read_chips(decoded, starts[3:], CHIP, mask_and_scale=True)
    want = decoded.band_data.isel(time=0, y=slice(5, 5 + CHIP), x=slice(7, 7 + CHIP)).values
    np.testing.assert_array_equal(chips[0], want)
    assert np.isnan(chips[0, :, :5, :3]).all()
    outside = rx.read_chips(decoded, starts[:1], CHIP, boundless=True, mask_and_scale=True)
    assert np.isnan(outside[0, :, :20, :30]).all()


def test_labelled_chips_keep_time_coordinates_and_crs(demo: dict) -> None:
    ds = xr.open_dataset(demo["series"], engine="rumi", chunks={})
    starts = np.array([[2, 10, 20], [0, SIZE - CHIP, SIZE - CHIP]])
    da = ds.rumi.chips(starts, CHIP, bands=["B04"])
    assert da.dims == ("chip", "band", "y", "x") and list(da.band.values) == ["B04"]
    np.testing.assert_array_equal(da.time.values, ds.time.values[[2, 0]])
    np.testing.assert_array_equal(da.x.values[0], ds.x.values[20:20 + CHIP])
    np.testing.assert_array_equal(da.y.values[1], ds.y.values[SIZE - CHIP:])
    transform = ds.rio.transform()
    assert da.minx.values[0] == transform.c + 20 * transform.a
    assert da.maxy.values[0] == transform.f + 10 * transform.e
    assert "32633" in da.spatial_ref.attrs["crs_wkt"] or "UTM zone 33N" in da.spatial_ref.attrs[
        "crs_wkt"]
    # chips are raw samples by default (the demo series stores a scale factor)
    raw = xr.open_dataset(demo["series"], engine="rumi", mask_and_scale=False)
    np.testing.assert_array_equal(da.values[0, 0], raw.band_data.isel(
        time=2, band=2, y=slice(10, 10 + CHIP), x=slice(20, 20 + CHIP)).values)


def test_a_time_selection_keeps_its_own_positions(demo: dict) -> None:
    ds = xr.open_dataset(demo["series"], engine="rumi").isel(time=[3, 1])
    got = rx.read_chips(ds, [[0, 0, 0], [1, 4, 4]], CHIP)
    np.testing.assert_array_equal(got[0], truth(demo["series"], 3, [0, 1, 2, 3], 0, 0, CHIP))
    np.testing.assert_array_equal(got[1], truth(demo["series"], 1, [0, 1, 2, 3], 4, 4, CHIP))


def test_hostile_chip_requests_raise_typed_errors_naming_the_scene(demo: dict,
                                                                 tmp_path: Path) -> None:
    cube = rx.open_mfdataset(demo["scenes"])
    name = os.path.basename(demo["scenes"][1])
    with pytest.raises(rx.RumiSelectionError, match=name):
        rx.read_chips(cube, [[1, SIZE - 10, 0]], CHIP)  # crosses the bottom edge
    with pytest.raises(rx.RumiSelectionError, match="outside"):
        rx.read_chips(cube, [[DATES, 0, 0]], CHIP)
    with pytest.raises(rx.RumiSelectionError, match="positive"):
        rx.read_chips(cube, [[0, 0, 0]], 0)
    with pytest.raises(rx.RumiSelectionError, match="band_index=1 for a position"):
        rx.read_chips(cube, [[0, 0, 0]], CHIP, bands=["B04", 1])
    with pytest.raises(rx.RumiSelectionError, match="no band labelled"):
        rx.read_chips(cube, [[0, 0, 0]], CHIP, bands=["B99"])
    with pytest.raises(rx.RumiSelectionError, match=r"\(n, 3\)"):
        rx.read_chips(cube, [[0, 0]], CHIP)
    with pytest.raises(rx.RumiSelectionError, match="integers"):
        rx.read_chips(cube, [[0, 0.5, 0]], CHIP)
    # A scene that is gone: the batch fails naming it and its window.
    import shutil

    moved = [str(tmp_path / os.path.basename(p)) for p in demo["scenes"]]
    for src, dst in zip(demo["scenes"], moved, strict=True):
        shutil.copy(src, dst)
    gone = rx.open_mfdataset(moved)
    os.remove(moved[2])
    with pytest.raises(rx.RumiIOError) as info:
        rx.read_chips(gone, [[0, 0, 0], [2, 8, 8], [3, 0, 0]], CHIP)
    assert isinstance(info.value, rx.RumiError)
    assert os.path.basename(moved[2]) in str(info.value)
    assert "(8, 8, 48, 48)" in str(info.value)


def test_chip_dataset_reads_a_batch_in_one_call_and_collates_without_copy(demo: dict) -> None:
    cube = rx.open_mfdataset(demo["scenes"])
    labels = xr.open_dataset(demo["land_cover"], engine="rumi")
    ds = ChipDataset(cube, CHIP, bands=["B04", "B08"], mask=labels, mask_and_scale=False)
    assert len(pickle.dumps(ds)) < 64 * 1024  # paths and headers, no arrays
    keys = list(RandomChipSampler(cube, CHIP, 8, seed=0))
    rx.stats(reset=True)
    samples = ds.__getitems__(keys)
    assert rx.stats(reset=True)["calls"] == 2  # the chips, and their land-cover labels
    batch = collate(samples)
    assert batch["image"].data_ptr() == samples[0]["image"].data_ptr()
    assert tuple(batch["image"].shape) == (8, 2, CHIP, CHIP)
    lc_path = demo["land_cover"]
    for i, (t, r, c) in enumerate(keys):
        np.testing.assert_array_equal(batch["image"][i].numpy(),
                                      truth(demo["scenes"][t], 0, [2, 3], r, c, CHIP))
        np.testing.assert_array_equal(batch["mask"][i].numpy(),
                                      truth(lc_path, 0, [0], r, c, CHIP)[0])
    assert batch["time"].dtype == torch.int64 and tuple(batch["bounds"].shape) == (8, 4)
    assert "UTM" in batch["crs"][0] or "32633" in batch["crs"][0]
    assert ds.explain(keys).calls == 2


def test_dataloader_batches_are_identical_with_0_and_2_workers(demo: dict) -> None:
    cube = rx.open_mfdataset(demo["scenes"])
    ds = ChipDataset(cube, CHIP, band_index=[0, 3], mask_and_scale=False)
    batches = {}
    for workers in (0, 2):
        loader = DataLoader(ds, batch_size=4, sampler=RandomChipSampler(cube, CHIP, 12, seed=7),
                            num_workers=workers, collate_fn=collate)
        batches[workers] = list(loader)
    assert len(batches[0]) == len(batches[2]) == 3
    for a, b in zip(batches[0], batches[2], strict=True):
        assert a["key"] == b["key"]
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["time"], b["time"])
    # A fresh sampler with the same seed draws the same chips; another seed others.
    again = list(RandomChipSampler(cube, CHIP, 12, seed=7))
    assert again == [k for batch in batches[0] for k in batch["key"]]
    assert again != list(RandomChipSampler(cube, CHIP, 12, seed=8))


def test_samplers_stay_inside_and_cover_the_edges(demo: dict) -> None:
    cube = xr.open_dataset(demo["series"], engine="rumi")
    grid = list(GridChipSampler(cube, CHIP, 64, time=[1]))
    rows = sorted({r for _, r, _ in grid})
    assert rows[-1] == SIZE - CHIP and rows[0] == 0
    assert {t for t, _, _ in grid} == {1}
    drawn = np.asarray(list(RandomChipSampler(cube, CHIP, 200, seed=1, time=[0, 3],
                                              weights=[0.0, 1.0])))
    assert set(drawn[:, 0].tolist()) == {3}
    assert drawn[:, 1:].min() >= 0 and drawn[:, 1:].max() <= SIZE - CHIP


def test_chips_per_grid_from_scenes_on_different_grids(demo: dict, tmp_path: Path) -> None:
    # Two grids (different sizes): one cube each, chips in each scene's own pixel grid.
    small = synthetic.scene_series(n_dates=1, size=128, seed=5)["band_data"].isel(time=0)
    other = str(tmp_path / "other.rumi")
    rx.to_rumi(small, other, tile_size=TILE)
    cubes = rx.open_catalog_grids(rx.catalog([*demo["scenes"], other]))
    assert [c.sizes["time"] for c in cubes] == [DATES, 1]  # one cube per grid
    ds = ChipDataset(cubes, CHIP, mask_and_scale=False)
    keys = list(RandomChipSampler(cubes, CHIP, 60, seed=2))
    assert {k[0] for k in keys} == {0, 1}
    samples = ds.__getitems__(keys)
    for key, sample in zip(keys, samples, strict=True):
        g, t, r, c = key
        path = demo["scenes"][t] if g == 0 else other
        np.testing.assert_array_equal(sample["image"].numpy(),
                                      truth(path, 0, [0, 1, 2, 3], r, c, CHIP))


def test_a_corrupt_frame_fails_the_batch_naming_its_scene(demo: dict, tmp_path: Path) -> None:
    import shutil

    from rumi_xarray.model.cube import Scene
    from rumi_xarray.native.reads import plan_ranges

    copies = [str(tmp_path / os.path.basename(p)) for p in demo["scenes"]]
    for src, dst in zip(demo["scenes"], copies, strict=True):
        shutil.copy(src, dst)
    header = rumi.info(source=copies[1]).header
    offset, length = plan_ranges(Scene(copies[1], header), [0], [2], 0, 0, CHIP, CHIP)[0]
    with open(copies[1], "r+b") as f:  # one bit flipped in the middle of a frame read below
        f.seek(offset + length // 2)
        byte = f.read(1)
        f.seek(offset + length // 2)
        f.write(bytes([byte[0] ^ 0x10]))
    cube = rx.open_mfdataset(copies)  # opened after the flip: checksums, not the file stamp
    with pytest.raises(rx.RumiError) as info:
        rx.read_chips(cube, [[0, 0, 0], [1, 0, 0], [2, 0, 0]], CHIP, band_index=[2])
    assert os.path.basename(copies[1]) in str(info.value)
    assert not isinstance(info.value, rx.RumiFileChangedError)


@pytest.fixture(scope="module")
def padded_series(demo: dict) -> tuple[xr.Dataset, np.ndarray, int]:
    path = demo["series"]
    full = read(path)
    pad = 50  # more than the largest chip reaches outside (40 + 3)
    return (xr.open_dataset(path, engine="rumi"),
            np.pad(full, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=0), pad)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_batch_of_chips_equals_numpy_on_the_read_file(padded_series, data) -> None:
    ds, padded, pad = padded_series
    size = data.draw(st.integers(1, 40), label="size")
    n = data.draw(st.integers(1, 6), label="n")
    boundless = data.draw(st.booleans(), label="boundless")
    low, high = (-size - 3, SIZE + 3) if boundless else (0, SIZE - size)  # some wholly outside
    starts = np.asarray(data.draw(st.lists(
        st.tuples(st.integers(0, DATES - 1), st.integers(low, high), st.integers(low, high)),
        min_size=n, max_size=n), label="starts"))
    bands = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4), label="bands")
    got = rx.read_chips(ds, starts, size, band_index=bands, boundless=boundless)
    assert got.shape == (n, len(bands), size, size)
    for i, (t, r, c) in enumerate(starts.tolist()):
        want = padded[t][bands][:, r + pad:r + pad + size, c + pad:c + pad + size]
        np.testing.assert_array_equal(got[i], want)


def test_chips_from_stac_items_on_one_grid(demo: dict) -> None:
    items = rx.to_stac(demo["scenes"])
    stack = rx.open_stac(items)  # one grid: a catalog cube, one variable per band
    starts = random_starts(np.random.default_rng(9), 6, DATES)
    rx.stats(reset=True)
    got = rx.read_chips(stack, starts, CHIP, bands=["B08", "B04"])
    assert rx.stats(reset=True)["calls"] == 1
    for i, (t, r, c) in enumerate(starts.tolist()):
        np.testing.assert_array_equal(got[i], truth(demo["scenes"][t], 0, [3, 2], r, c, CHIP))


def _labels(demo: dict) -> xr.DataArray:
    return xr.open_dataset(demo["land_cover"], engine="rumi",
                           mask_and_scale=False).band_data.isel(time=0)


@pytest.mark.parametrize("change", ["crs", "shift", "shape"])
def test_a_mask_on_another_grid_is_refused_naming_both_and_the_difference(
        demo: dict, tmp_path: Path, change: str) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)

    labels = _labels(demo)
    if change == "crs":
        labels = labels.rio.write_crs("EPSG:32634")
    elif change == "shift":
        labels = labels.assign_coords(x=labels.x + 5000.0)
    else:
        labels = labels.isel(y=slice(0, SIZE - 8))
    path = str(tmp_path / f"lc_{change}.rumi")
    rx.to_rumi(labels, path, time="2024-01-01", tile_size=TILE)
    cube = rx.open_mfdataset(demo["scenes"])
    with pytest.raises(rx.RumiArgumentError) as info:
        ChipDataset(cube, CHIP, mask=xr.open_dataset(path, engine="rumi"))
    text = str(info.value)
    assert info.value.keyword == "mask" and "lc_" in text and "same grid" in text
    assert {"crs": "EPSG:32634", "shift": "transform", "shape": "shape"}[change] in text


def test_a_multi_band_mask_needs_mask_band(demo: dict, tmp_path: Path) -> None:
    labels = _labels(demo)
    two = xr.concat([labels, labels + 1], dim="band").assign_coords(band=["a", "b"])
    path = str(tmp_path / "lc2.rumi")
    rx.to_rumi(two.astype(labels.dtype), path, time="2024-01-01", tile_size=TILE)
    cube = rx.open_mfdataset(demo["scenes"])
    mask = xr.open_dataset(path, engine="rumi", mask_and_scale=False)
    with pytest.raises(rx.RumiArgumentError, match="mask_band") as info:
        ChipDataset(cube, CHIP, mask=mask)
    assert info.value.keyword == "mask_band"
    keys = [(0, 10, 20), (1, 0, 0)]
    for band in ("b",):
        samples = ChipDataset(cube, CHIP, mask=mask, mask_band=band).__getitems__(keys)
        for (_, r, c), sample in zip(keys, samples, strict=True):
            np.testing.assert_array_equal(sample["mask"].numpy(),
                                          truth(path, 0, [1], r, c, CHIP)[0])
    with pytest.raises(rx.RumiSelectionError):
        ChipDataset(cube, CHIP, mask=mask, mask_band="c")
    with pytest.raises(rx.RumiArgumentError):
        ChipDataset(cube, CHIP, mask_band=0)


@pytest.mark.parametrize("size", [0, -5, 1000, True, 2.5, "48", None])
def test_a_bad_chip_size_is_refused_at_construction(demo: dict, size: object) -> None:
    cube = rx.open_mfdataset(demo["scenes"])
    with pytest.raises(rx.RumiSelectionError, match=r"size|fit"):
        ChipDataset(cube, size)  # type: ignore[arg-type]
    with pytest.raises(rx.RumiSelectionError, match=r"size|fit"):
        RandomChipSampler(cube, size, 4, seed=0)  # type: ignore[arg-type]
    with pytest.raises(rx.RumiSelectionError, match=r"size|fit"):
        GridChipSampler(cube, size, 64)  # type: ignore[arg-type]


def test_bad_strides_and_lengths_are_refused_and_boundless_may_exceed(demo: dict) -> None:
    cube = rx.open_mfdataset(demo["scenes"])
    for stride in (0, -1, False, 1.5):
        with pytest.raises(rx.RumiSelectionError, match="stride"):
            GridChipSampler(cube, CHIP, stride)  # type: ignore[arg-type]
    for length in (0, -3, True, 2.0):
        with pytest.raises(rx.RumiSelectionError, match="length"):
            RandomChipSampler(cube, CHIP, length)  # type: ignore[arg-type]
    assert len(ChipDataset(cube, np.int64(CHIP))) == DATES * 5 * 5
    assert len(ChipDataset(cube, SIZE + 8, boundless=True)) == DATES


def test_forked_workers_never_reuse_the_parents_http_connections(demo: dict) -> None:
    # The parent reads over HTTP first, so librumi's transport holds open keep-alive
    # connections when DataLoader forks its workers. A child writing on an inherited
    # socket would interleave its requests with the parent's on one connection; the
    # server sees which connection (client port) carried every request.
    series = Path(demo["series"])
    with RangeHTTPServer(series.parent) as http:
        cube = xr.open_dataset(http.url(series.name), engine="rumi")
        ds = ChipDataset(cube, CHIP, band_index=[0, 3])  # bands= selects by label

        def sampler() -> RandomChipSampler:  # the same 16 chips every epoch
            return RandomChipSampler(cube, CHIP, 16, seed=11)

        expected = list(DataLoader(ds, batch_size=4, sampler=sampler(), num_workers=0,
                                   collate_fn=collate))
        parent = {r.peer for r in http.requests()}
        assert parent, "the parent read nothing over HTTP"
        http.reset()
        for _epoch in range(3):
            loader = DataLoader(ds, batch_size=4, sampler=sampler(), num_workers=2,
                                multiprocessing_context="fork", collate_fn=collate)
            got = list(loader)
            assert len(got) == len(expected)
            for a, b in zip(got, expected, strict=True):
                assert a["key"] == b["key"] and torch.equal(a["image"], b["image"])
        children = {r.peer for r in http.requests()}
        assert children and not children & parent, "a forked worker used a parent connection"
        assert all(r.status in (200, 206) for r in http.requests())
        # The parent still reads right after its children used the network.
        again = list(DataLoader(ds, batch_size=4, sampler=sampler(), num_workers=0,
                                collate_fn=collate))
        assert all(torch.equal(a["image"], b["image"]) for a, b in zip(again, expected,
                                                                        strict=True))
