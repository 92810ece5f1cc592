"""``.rumi.explore()``: the map and the series it shows equal ``rumi.read``, one read a click.

The widget is built on small files and driven as a user drives it (the slider,
the band menu, clicks as ipyevents reports them, zoom), without a browser;
``tests/test_explore_browser.py`` does the same in headless Chromium. Every
value shown is checked against ``rumi.read`` of the same file (decoded with
the sidecar's scale, as xarray decodes it), and every click is counted: one
native read call (``rx.stats()``), and over HTTP the requests the loopback
server saw.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.demo import synthetic
from rumi_xarray.model.views import View, choose_level, plan_map, stretch_limits, to_unit
from tests.servers import RangeHTTPServer

pytest.importorskip("ipyevents", reason="the explore extra is not installed")

#: The demo series' stored counts are reflectance x 10 000 (the sidecar's scale).
SCALE = np.float32(synthetic.SCALE_FACTOR)
N_DATES = 6
#: 160 rows (two and a half 64-pixel tiles: clipped edge cells) by 256 columns.
HEIGHT, WIDTH = 160, 256
RGB = [2, 1, 0]  # red, green, blue in the demo's band order (blue, green, red, nir)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A series file, one file per date (a catalog) and the stored counts (~1 s)."""
    root = tmp_path_factory.mktemp("explore")
    scene = synthetic.scene_series(n_dates=N_DATES, size=WIDTH).isel(y=slice(0, HEIGHT))
    series = root / "series.rumi"
    header = rx.to_rumi(scene, series, tile_size=64)
    dates = []
    for t in range(N_DATES):
        path = root / "scenes" / f"date{t}.rumi"
        path.parent.mkdir(exist_ok=True)
        dates.append((path, rx.to_rumi(scene.isel(time=[t]), path, tile_size=64)))
    counts = rumi.read(str(series), header, pattern="t b y x")
    return {"root": root, "series": series, "header": header, "dates": dates,
            "counts": counts}


def truth(files, t=None, bands=None, window=None) -> np.ndarray:
    """``rumi.read`` of the series file, decoded as xarray decodes it: ``(t, b, y, x)``."""
    header = files["header"]
    kwargs = {"pattern": "t b y x"}
    if t is not None:
        kwargs["time"] = [t]
    if bands is not None:
        kwargs["bands"] = list(bands)
    if window is not None:
        kwargs["window"] = window
    return rumi.read(str(files["series"]), header, **kwargs).astype(np.float32) * SCALE


def calls_during(action) -> int:
    before = rx.stats()["calls"]
    action()
    return rx.stats()["calls"] - before


def assert_series_is_the_pixel(ex, files, row, col, bands):
    expected = truth(files, bands=bands, window=(row, col, 1, 1))[:, :, 0, 0]
    assert ex.pixel == (row, col)
    assert ex.series.shape == (N_DATES, len(bands))
    np.testing.assert_array_equal(ex.series.values, expected)
    # What is plotted: one line per band, one point per date, the values read.
    lines = ex.figure().axes[1].lines[:len(bands)]
    assert [len(line.get_ydata()) for line in lines] == [N_DATES] * len(bands)
    for k, line in enumerate(lines):
        np.testing.assert_array_equal(np.asarray(line.get_ydata()), expected[:, k])
    info = ex.series_info.value
    assert f'data-points="{N_DATES}"' in info and f'data-row="{row}"' in info


# --- the widget on one file -------------------------------------------------------------


def test_map_equals_rumi_read_at_each_date_and_stride(files):
    ds = xr.open_dataset(files["series"], engine="rumi")
    ex = ds.rumi.explore(max_pixels=100)  # 256 columns: every 3rd pixel
    g = ex.grid
    assert (g.level, g.factor, g.step, g.height, g.width) == (None, 1, 3, 54, 86)
    assert ex.bands == tuple(RGB)  # red, green, blue by common name
    limits = ex.limits.copy()
    for t in (0, 4, 2):
        ex.show_date(t)  # what moving the slider does
        expected = truth(files, t=t, bands=RGB)[0][:, ::3, ::3]
        np.testing.assert_array_equal(ex.map_values, expected)
        assert f'data-date="{ex.labels[t]}"' in ex.map_info.value
    # The stretch stays while the date changes (dates compare); the map is a PNG of it.
    np.testing.assert_array_equal(ex.limits, limits)
    assert bytes(ex.map_image.value).startswith(b"\x89PNG")


def test_zoom_reads_the_view_at_the_finest_level_that_fits(files):
    ds = xr.open_dataset(files["series"], engine="rumi")
    ex = ds.rumi.explore(band="nir", max_pixels=100)
    ex.show_date(3)
    ex.zoom(0.5, centre=(80, 200))  # a 80 x 128 view: every 2nd pixel
    assert ex.view == View(40, 128, 80, 128)
    assert (ex.grid.step, ex.grid.row, ex.grid.col) == (2, 40, 128)
    np.testing.assert_array_equal(
        ex.map_values, truth(files, t=3, bands=[3], window=(40, 128, 80, 128))[0][:, ::2, ::2])
    ex.zoom(0.5)  # 40 x 64 fits: full resolution, the window only
    assert ex.grid.step == 1
    v = ex.view
    np.testing.assert_array_equal(
        ex.map_values, truth(files, t=3, bands=[3], window=(v.row, v.col, v.height, v.width))[0])
    # The frames read are those of the view: one 64-pixel cell of one band and date.
    assert ex.map_reading.planned.frames <= 2
    ex.reset_view()
    assert ex.view == View(0, 0, HEIGHT, WIDTH) and ex.grid.step == 3


def test_click_plots_every_date_from_one_planned_read(files):
    ds = xr.open_dataset(files["series"], engine="rumi")
    ex = ds.rumi.explore(max_pixels=100)
    ex.show_date(2)
    selected: list[tuple[int, int]] = []
    calls = calls_during(lambda: selected.append(ex.click(17, 40)))
    row, col = selected[0]
    assert (row, col) == (17 * 3, 40 * 3)  # the sample shown is that pixel
    assert calls == 1 and ex.series_reading.calls == 1
    assert ex.series_reading.planned.calls == 1 and ex.series_reading.planned.items == 1
    assert_series_is_the_pixel(ex, files, row, col, RGB)
    # The pixel's value on the map is its series' value at the date shown.
    np.testing.assert_array_equal(ex.map_values[:, 17, 40], ex.series.values[2])
    assert bytes(ex.series_image.value).startswith(b"\x89PNG")


def test_a_click_event_selects_the_pixel_under_it(files):
    ds = xr.open_dataset(files["series"], engine="rumi")
    ex = ds.rumi.explore(max_pixels=100, size=430)  # 86 samples wide shown 430 px wide
    # ipyevents' click: where it fell in the image as shown (5 CSS pixels a sample).
    event = {"event": "click", "relativeX": 212, "relativeY": 33,
             "boundingRectWidth": 430.0, "boundingRectHeight": 270.0}
    ex.handle_event(event)
    assert ex.pixel == (6 * 3, 42 * 3)
    assert_series_is_the_pixel(ex, files, 18, 126, RGB)
    # The wheel turned up over the same sample: zoom in twice around its pixel.
    ex.handle_event({**event, "event": "wheel", "deltaY": -100.0})
    assert ex.view == View(0, 126 - 64, 80, 128)


def test_band_menu_switches_between_composite_and_single_band(files):
    ds = xr.open_dataset(files["series"], engine="rumi")
    ex = ds.rumi.explore(band=("B08", "red", "green"), time="2024-07-20")
    assert ex.t == 3  # the nearest date, 2024-08-01
    ex.select_pixel(100, 7)
    assert_series_is_the_pixel(ex, files, 100, 7, [3, 2, 1])
    calls = calls_during(lambda: ex.show_bands((0,)))  # blue alone: map, then the series again
    assert calls == 2
    assert_series_is_the_pixel(ex, files, 100, 7, [0])
    np.testing.assert_array_equal(ex.map_values, truth(files, t=3, bands=[0])[0])
    labels = [label for label, _ in ex.band_choice.options]
    assert labels[:2] == ["RGB: B08, B04, B03", "RGB: B04, B03, B02"] and "B02 (blue)" in labels


def test_dask_backed_and_selected_datasets_are_read_through_the_lazy_path(files):
    chunked = xr.open_dataset(files["series"], engine="rumi", chunks={})
    ex = chunked.rumi.explore(band="red")
    assert calls_during(lambda: ex.select_pixel(150, 250)) == 1  # not a dask chunk per date
    assert_series_is_the_pixel(ex, files, 150, 250, [2])
    with pytest.raises(rx.RumiUnsupportedError, match="explorer maps and series are read "
                                                      "from the cube as opened"):
        chunked.isel(time=[1, 3, 5]).rumi.explore()
    ds = xr.open_dataset(files["series"], engine="rumi")
    ex = ds.isel(time=[1, 3, 5]).rumi.explore(band="red")
    assert calls_during(lambda: ex.select_pixel(150, 250)) == 0  # the tile cache has them now
    rx.clear_cache()
    assert calls_during(lambda: ex.select_pixel(150, 250)) == 1
    expected = truth(files, bands=[2], window=(150, 250, 1, 1))[[1, 3, 5], 0, 0, 0]
    np.testing.assert_array_equal(ex.series.values[:, 0], expected)
    assert ex.labels == [str(d)[:16].replace("T", " ") for d in synthetic.dates(6)[[1, 3, 5]]]
    # A y/x window of the image: the explorer keeps to it.
    sub = xr.open_dataset(files["series"], engine="rumi").isel(y=slice(32, 96), x=slice(64, 200))
    ex = sub.rumi.explore(band="nir")
    assert ex.view == View(32, 64, 64, 136)
    np.testing.assert_array_equal(ex.map_values,
                                  truth(files, t=0, bands=[3], window=(32, 64, 64, 136))[0])
    with pytest.raises(IndexError, match="outside the explored window"):
        ex.select_pixel(0, 0)


@pytest.mark.parametrize("mask_and_scale", [None, True, False])
def test_values_are_decoded_as_the_variable_explored(tmp_path, mask_and_scale):
    # Nodata 0 on some dates of the pixel, scale and offset: what the explorer shows is
    # what indexing the variable gives, NaN, dtype and all, whichever decoding it was opened
    # with (the stored counts with mask_and_scale=False).
    counts = np.random.default_rng(3).integers(1, 1000, (5, 2, 40, 70)).astype(np.uint16)
    counts[[0, 3], :, 11, 22] = 0
    path = tmp_path / "nodata.rumi"
    rx.write_array(path, counts, bands=["B1", "B2"], time=[f"2024-0{m}-01" for m in range(1, 6)],
                   tile_size=32, nodata=0, scale_factor=0.5, add_offset=-3.0)
    ds = xr.open_dataset(path, engine="rumi", mask_and_scale=mask_and_scale)
    ex = ds.rumi.explore(band="B2")
    ex.select_pixel(11, 22)
    want = ds.band_data.isel(band=[1], y=11, x=22).values
    assert ex.series.dtype == want.dtype
    np.testing.assert_array_equal(ex.series.values, want)
    assert np.isnan(ex.series.values[0, 0]) == (mask_and_scale is not False)
    np.testing.assert_array_equal(ex.map_values, ds.band_data.isel(time=0, band=[1]).values)
    if mask_and_scale is False:
        np.testing.assert_array_equal(ex.series.values[:, 0], counts[:, 1, 11, 22])


# --- many scenes, remote files ----------------------------------------------------------


def test_catalog_cube_series_is_one_read_many_across_its_files(files):
    table = rx.catalog([str(p) for p, _ in files["dates"]])
    cube = rx.open_catalog(table)
    ex = cube.rumi.explore(band="nir")
    ex.show_date(5)
    path, header = files["dates"][5]
    np.testing.assert_array_equal(
        ex.map_values, rumi.read(str(path), header, bands=[3], pattern="t b y x")[0]
        .astype(np.float32) * SCALE)
    calls = calls_during(lambda: ex.select_pixel(99, 201))
    assert calls == 1 and ex.series_reading.planned.items == N_DATES  # one window per file
    for t, (path, header) in enumerate(files["dates"]):
        pixel = rumi.read(str(path), header, bands=[3], window=(99, 201, 1, 1),
                          pattern="t b y x")
        assert ex.series.values[t, 0] == pixel[0, 0, 0, 0].astype(np.float32) * SCALE
    assert_series_is_the_pixel(ex, files, 99, 201, [3])


def test_remote_file_click_is_one_read_in_few_requests(files, tmp_path):
    for suffix in ("", ".aux.json"):
        shutil.copy(str(files["series"]) + suffix, tmp_path / f"series.rumi{suffix}")
    with RangeHTTPServer(tmp_path) as server:
        ds = xr.open_dataset(server.url("series.rumi"), engine="rumi")
        ex = ds.rumi.explore(max_pixels=128)
        np.testing.assert_array_equal(ex.map_values, truth(files, t=0, bands=RGB)[0][:, ::2, ::2])
        server.reset()
        calls = calls_during(lambda: ex.select_pixel(77, 190))
        requests = server.requests("series.rumi")
        assert calls == 1
        # Karu coalesces the frames' byte ranges: never more requests than planned ranges.
        assert 1 <= len(requests) <= ex.series_reading.planned.ranges
        assert sum(r.bytes_sent for r in requests) >= ex.series_reading.planned.compressed_bytes
        assert_series_is_the_pixel(ex, files, 77, 190, RGB)


# --- overviews ----------------------------------------------------------------------------


def test_the_files_overviews_serve_the_map_at_every_zoom(tmp_path):
    scene = synthetic.scene_series(n_dates=4, size=512)
    path = tmp_path / "overviews.rumi"
    rx.to_rumi(scene, path, tile_size=64, overviews=[2, 4], progress=False)
    ds = xr.open_dataset(path, engine="rumi")
    ex = ds.rumi.explore(band="nir", max_pixels=128)

    def level(k):
        return xr.open_dataset(path, engine="rumi", overview_level=k).band_data

    # The whole 512-pixel image from the 1:4 overview: 128 samples a side, no stride.
    assert (ex.grid.level, ex.grid.factor, ex.grid.step, ex.grid.height) == (1, 4, 1, 128)
    np.testing.assert_array_equal(ex.map_values, level(1).isel(time=0, band=[3]).values)
    assert ex.map_reading.planned.frames == 4  # the level's four 64-pixel tiles, one band
    # A click on a 1:4 sample: the centre of its 4 x 4 block, its series at full resolution.
    assert calls_during(lambda: ex.click(10, 20)) == 1
    assert ex.pixel == (41, 81)
    np.testing.assert_array_equal(ex.series.values[:, 0],
                                  ds.band_data.isel(band=3, y=41, x=81).values)
    ex.zoom(0.5)  # a 256-pixel view: the 1:2 overview fits
    v = ex.view
    assert (ex.grid.level, ex.grid.factor, ex.grid.step) == (0, 2, 1)
    np.testing.assert_array_equal(
        ex.map_values, level(0).isel(time=0, band=[3], y=slice(v.row // 2, (v.row + v.height) // 2),
                                     x=slice(v.col // 2, (v.col + v.width) // 2)).values)
    ex.zoom(0.5)  # 128 pixels: the full resolution, the view's cells only
    assert (ex.grid.level, ex.grid.step) == (None, 1)


def test_a_file_without_overviews_is_shown_strided_from_full_resolution(files):
    # No overview levels beside the file: every 4th pixel of the full resolution.
    assert rx.overview_factors(files["series"]) == []
    ex = xr.open_dataset(files["series"], engine="rumi").rumi.explore(max_pixels=64)
    assert ex.grid.level is None and ex.grid.step == 4


def test_a_catalog_cube_maps_each_date_from_its_files_overview(tmp_path):
    # Three dates, one file each: the first written with levels 1:2 and 1:4, the second
    # with 1:4 alone (its level 0), the third without (an archive ingested before
    # overviews were asked for).
    scene = synthetic.scene_series(n_dates=3, size=512)
    paths, headers = [], []
    for t, overviews in enumerate(([2, 4], [4], None)):
        path = tmp_path / f"date{t}.rumi"
        headers.append(rx.to_rumi(scene.isel(time=[t]), path, tile_size=64,
                                  overviews=overviews, progress=False))
        paths.append(path)
    cube = rx.open_catalog(rx.catalog([str(p) for p in paths]))
    ex = cube.rumi.explore(band="nir", max_pixels=128)
    for t, own_level in ((0, 1), (1, 0)):
        ex.show_date(t)
        level = xr.open_dataset(paths[t], engine="rumi", overview_level=own_level).band_data
        # The whole 512-pixel image from that date's own 1:4 level: 128 samples a side.
        assert (ex.grid.level, ex.grid.factor, ex.grid.step, ex.grid.height) == (1, 4, 1, 128)
        np.testing.assert_array_equal(ex.map_values, level.isel(time=0, band=[3]).values)
        assert ex.map_reading.planned.frames == 4 and ex.map_reading.note == ""
    # The third date's file has no levels: every 4th pixel of its full resolution, said.
    ex.show_date(2)
    stored = rumi.read(str(paths[2]), headers[2], bands=[3], pattern="t b y x")[0]
    np.testing.assert_array_equal(ex.map_values, stored[:, ::4, ::4].astype(np.float32) * SCALE)
    assert (ex.grid.level, ex.grid.step, ex.grid.height) == (None, 4, 128)
    assert "date2.rumi has no overview 1:4" in ex.map_reading.note
    assert "date2.rumi has no overview 1:4" in ex.map_info.value
    # A click on the third date's map is the very sample shown; the series spans all files.
    assert calls_during(lambda: ex.click(10, 20)) == 1
    assert ex.pixel == (40, 80)
    np.testing.assert_array_equal(ex.series.values[:, 0],
                                  cube.band_data.isel(band=3, y=40, x=80).values)
    # The same catalog of URLs: the first date's map from its level file over HTTP.
    with RangeHTTPServer(tmp_path) as server:
        remote = rx.open_catalog(rx.catalog([server.url(p.name) for p in paths]))
        server.reset()
        far = remote.rumi.explore(band="nir", max_pixels=128)
        level = xr.open_dataset(paths[0], engine="rumi", overview_level=1).band_data
        np.testing.assert_array_equal(far.map_values, level.isel(time=0, band=[3]).values)
        assert far.grid.level == 1
        # Full-resolution frames were never fetched for the map: only the sidecars and the
        # level file (whose name ends in .ovr4).
        assert not server.requests("date0.rumi")


# --- arguments and the extra ------------------------------------------------------------


def test_missing_widgets_raise_a_typed_error_naming_the_extra(files, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipyevents", None)  # import ipyevents now fails
    ds = xr.open_dataset(files["series"], engine="rumi")
    with pytest.raises(rx.RumiMissingDependencyError, match=r"rumi-xarray\[explore\]") as info:
        ds.rumi.explore()
    assert isinstance(info.value, ImportError)
    assert info.value.extra == "explore" and info.value.missing == ("ipyevents",)


def test_bad_arguments_raise_typed_errors_naming_the_file(files):
    ds = xr.open_dataset(files["series"], engine="rumi")
    with pytest.raises(rx.RumiArgumentError, match=r"series\.rumi: no band 'swir'") as info:
        ds.rumi.explore(band="swir")
    assert info.value.keyword == "band"
    with pytest.raises(rx.RumiArgumentError, match="one band or three"):
        ds.rumi.explore(band=("red", "green"))
    with pytest.raises(rx.RumiArgumentError, match="is not a date"):
        ds.rumi.explore(time="yesterday-ish")
    with pytest.raises(rx.RumiArgumentError, match="not the number 3"):
        ds.rumi.explore(time=3)
    assert ds.rumi.explore(time=ds.time[3].values).t == 3
    with pytest.raises(rx.RumiArgumentError, match="max_pixels"):
        ds.rumi.explore(max_pixels=0)
    with pytest.raises(rx.RumiUnsupportedError, match="not one"):
        ds.isel(x=[0, 5, 9]).rumi.explore()
    with pytest.raises(rx.RumiUnsupportedError, match="not backed"):
        xr.Dataset({"band_data": (("time", "band", "y", "x"), np.zeros((1, 1, 2, 2)))}
                   ).rumi.explore()


def test_importing_rumi_xarray_imports_no_widget_library():
    code = ("import sys, rumi_xarray, xarray as xr; "
            "print(sorted(m for m in ('ipywidgets', 'ipyevents', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# --- the pure parts -----------------------------------------------------------------------


def test_choose_level_takes_the_finest_level_that_fits():
    assert choose_level(1000, 1000, [2, 4]) is None
    assert choose_level(4000, 1000, [2, 4, 8]) == 1  # 2000 > 1024 >= 1000
    assert choose_level(40000, 1000, [2, 4, 8]) == 2  # none fits: the coarsest
    assert choose_level(40000, 1000, []) is None


def test_plan_map_covers_the_view_and_maps_clicks_back():
    grid = plan_map(View(100, 40, 300, 900), (1000, 1000), [2, 4], max_pixels=256)
    assert (grid.level, grid.factor, grid.step) == (1, 4, 1)
    assert (grid.row, grid.col, grid.height, grid.width) == (25, 10, 75, 225)
    assert grid.full_pixel(0, 0) == (101, 41)  # the centre of the 4 x 4 block
    assert grid.full_pixel(10**6, -3) == (397, 41)  # clipped to the map
    edge = plan_map(View(0, 0, 1001, 1001), (1001, 1001), [2], max_pixels=600)
    assert (edge.height, edge.full_pixel(500, 500)) == (501, (1000, 1000))  # a 1-pixel block
    strided = plan_map(View(0, 0, 1000, 500), (1000, 1000), [], max_pixels=300)
    assert (strided.step, strided.height, strided.width) == (4, 250, 125)
    assert strided.rows == slice(0, 1000, 4) and strided.full_pixel(3, 2) == (12, 8)


def test_zoom_keeps_inside_the_image_and_stops_at_a_minimum():
    view = View(0, 0, 400, 200)
    assert view.zoom(0.5, 390, 10, (400, 200)) == View(200, 0, 200, 100)
    assert view.zoom(2.0, 0, 0, (400, 200)) == view
    tiny = view
    for _ in range(10):
        tiny = tiny.zoom(0.5, 200, 100, (400, 200))
    assert tiny.long_side == 16 and tiny.height == 16 and tiny.width == 8


def test_stretch_ignores_nodata_and_maps_to_unit_range():
    values = np.array([[[np.nan, 0.0, 1.0, 2.0, 3.0, 4.0]], [[5.0] * 6]])
    limits = stretch_limits(values, (0, 100))
    np.testing.assert_array_equal(limits, [[0.0, 4.0], [5.0, 6.0]])
    unit = to_unit(values, limits)
    assert np.isnan(unit[0, 0, 0]) and unit[0, 0, 3] == 0.5 and unit[1].max() == 0.0
