"""to_rumi: xarray objects in, Rumi files out.

Ground truth is always the numpy array that was written, compared with what
librumi's plain ``rumi.read`` returns from the file (bit for bit where the
write is lossless), plus ``rumi.info`` for labels and georeferencing.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import rumi
import xarray as xr

import rumi_xarray as rx
from rumi_xarray.conventions import georef
from rumi_xarray.native.frames import PATTERNS
from rumi_xarray.write.to_rumi import to_rumi, write_array
from tests.truth import read

EPSG = 32633
X0, Y0, RES = 500000.0, 6000000.0, 10.0


def dates(n: int, start: str = "2024-01-01") -> np.ndarray:
    return np.datetime64(start, "ns") + np.arange(n) * np.timedelta64(5, "D")


def cube(data: np.ndarray | da.Array, *, times: np.ndarray | None = None,
         bands: list[str] | None = None, epsg: int | None = EPSG, point: bool = False,
         res: float = RES) -> xr.DataArray:
    """A (time, band, y, x) DataArray with pixel-centre x/y and a spatial_ref."""
    t, b, h, w = data.shape
    coords: dict = {"time": dates(t) if times is None else times,
                    "band": bands or [f"B{i + 1}" for i in range(b)]}
    if epsg is not None:
        shift = 0.0 if point else 0.5
        coords["x"] = X0 + res * (np.arange(w) + shift)
        coords["y"] = Y0 - res * (np.arange(h) + shift)
        corner = (res, 0.0, X0 - (0.5 * res if point else 0.0), 0.0, -res,
                  Y0 + (0.5 * res if point else 0.0))
        coords["spatial_ref"] = georef.spatial_ref(epsg, corner)
    attrs = {"AREA_OR_POINT": "Point" if point else "Area"} if epsg is not None else {}
    return xr.DataArray(data, dims=("time", "band", "y", "x"), coords=coords,
                        name="band_data", attrs=attrs)


def same_bits(got: np.ndarray, expected: np.ndarray) -> bool:
    native = np.ascontiguousarray(expected.astype(expected.dtype.newbyteorder("=")))
    return (got.dtype == native.dtype and got.shape == native.shape
            and np.array_equal(np.ascontiguousarray(got).view(np.uint8), native.view(np.uint8)))


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    native = dt.newbyteorder("=")
    if dt.kind == "b":
        out = rng.random(shape) < 0.3
    elif dt.kind in "iu":
        info = np.iinfo(native)
        out = rng.integers(info.min, info.max, size=shape, dtype=native, endpoint=True)
    elif dt.kind == "f":
        out = rng.normal(0, 1e3, shape).astype(native)
        out.flat[:4] = [np.nan, np.inf, -0.0, -np.inf]
    else:
        out = (rng.normal(0, 1e3, shape) + 1j * rng.normal(0, 1e3, shape)).astype(native)
        out.flat[0] = complex(np.nan, -0.0)
    return out.astype(dt)


# --- round trips --------------------------------------------------------------------


DTYPES = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "float32", "float64", "complex64", "complex128",
          ">u2", ">i4", ">f4", ">f8", ">c8", ">c16"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_supported_dtype_round_trips_bit_for_bit(tmp_path: Path, dtype: str) -> None:
    data = sample(dtype, (2, 3, 37, 45))
    path = tmp_path / "x.rumi"
    header = to_rumi(cube(data), path, tile_size=16)
    got = read(path, header)
    assert same_bits(got, data)
    opened = rx.open_dataset(path, mask_and_scale=False)["band_data"].values
    assert same_bits(opened, data)
    assert same_bits(rx.open_dataset(path)["band_data"].values, data)  # xarray's default
    # mask_and_scale=True asked for: integers come back as rioxarray gives them,
    # float32 up to 16 bits, float64 above, the same numbers.
    decoded = rx.open_dataset(path, mask_and_scale=True)["band_data"].values
    kind = np.dtype(dtype).kind
    if kind in "iu":
        assert decoded.dtype == (np.float32 if np.dtype(dtype).itemsize <= 2 else np.float64)
        np.testing.assert_array_equal(decoded, data.astype(decoded.dtype))
    else:
        assert same_bits(decoded, data)


@pytest.mark.parametrize("frame", sorted(PATTERNS))
@pytest.mark.parametrize("tile", [7, 16, 64])
def test_frame_layouts_and_edge_tiles(tmp_path: Path, frame: str, tile: int) -> None:
    data = sample("int16", (3, 2, 29, 41), seed=tile)
    path = tmp_path / "x.rumi"
    header = to_rumi(cube(data), path, tile_size=tile, frame=frame)
    assert same_bits(read(path, header), data)
    meta = rumi.info(source=os.fspath(path))
    expected = {"plane": "h w", "plane-bt": "h w", "cell": "t b h w", "cell-hwb": "h w b t"}
    assert meta.frame_layout == expected[frame]
    assert meta.tile == (tile, tile)


def assert_same_dataset(back: xr.Dataset, source: xr.DataArray) -> None:
    """Values, band names, time, x/y and georeferencing all survive."""
    got = back["band_data"]
    np.testing.assert_array_equal(got.values, source.values.reshape(got.shape))
    texts = got["band_text"] if "band_text" in got.coords else got["band"]
    assert list(texts.values) == list(np.atleast_1d(source["band"].values))
    np.testing.assert_array_equal(got["time"].values, np.atleast_1d(source["time"].values))
    for dim in ("x", "y"):
        np.testing.assert_array_equal(got[dim].values, source[dim].values)
    src_ref, got_ref = source["spatial_ref"].attrs, back["spatial_ref"].attrs
    assert got_ref["epsg"] == src_ref["epsg"]
    assert got_ref["GeoTransform"] == src_ref["GeoTransform"]
    assert got.attrs["AREA_OR_POINT"] == source.attrs["AREA_OR_POINT"]


def test_open_of_written_file_equals_source(tmp_path: Path) -> None:
    source = cube(sample("uint16", (4, 3, 50, 70)),
                  bands=["B02, Blue, 490nm", "B03, Green, 560nm", "B04, Red, 665nm"])
    path = tmp_path / "x.rumi"
    to_rumi(source.to_dataset(), path, tile_size=32)
    back = rx.open_dataset(path)
    assert_same_dataset(back, source)
    meta = rumi.info(source=os.fspath(path))
    assert meta.crs == EPSG
    assert meta.transform == (RES, 0.0, X0, 0.0, -RES, Y0)
    assert meta.time_kind == "instant"
    # Written again from what was read: the same file content.
    again = tmp_path / "again.rumi"
    to_rumi(back, again, tile_size=32)
    assert_same_dataset(rx.open_dataset(again), source)


def test_pixel_is_point_records_the_centre_of_the_first_pixel(tmp_path: Path) -> None:
    source = cube(sample("float32", (1, 2, 20, 30)), point=True)
    path = tmp_path / "p.rumi"
    to_rumi(source, path, tile_size=8)
    meta = rumi.info(source=os.fspath(path))
    assert meta.pixel_is_point is True
    assert meta.transform == (RES, 0.0, X0, 0.0, -RES, Y0)  # x[0], y[0]: a pixel centre
    back = rx.open_dataset(path)
    np.testing.assert_array_equal(back["x"].values, source["x"].values)
    np.testing.assert_array_equal(back["y"].values, source["y"].values)
    assert back["band_data"].attrs["AREA_OR_POINT"] == "Point"
    assert back["spatial_ref"].attrs["GeoTransform"] == source["spatial_ref"].attrs["GeoTransform"]


def test_time_intervals_from_time_bnds(tmp_path: Path) -> None:
    source = cube(sample("uint8", (3, 1, 12, 10))).to_dataset()
    starts = source["time"].values
    bounds = np.stack([starts, starts + np.timedelta64(5, "D")], axis=1)
    source = source.assign_coords(time_bnds=(("time", "nv"), bounds))
    source["time"].attrs["bounds"] = "time_bnds"
    path = tmp_path / "i.rumi"
    to_rumi(source, path, tile_size=8)
    meta = rumi.info(source=os.fspath(path))
    assert meta.time_kind == "interval"
    back = rx.open_dataset(path)
    np.testing.assert_array_equal(back["time_bnds"].values, bounds)
    np.testing.assert_array_equal(back["time"].values, starts)
    np.testing.assert_array_equal(back["band_data"].values, source["band_data"].values)
    # A single interval step reads back as a scalar time with (nv,) bounds: it
    # writes again as the same interval.
    single = tmp_path / "single.rumi"
    to_rumi(source.isel(time=[1]), single, tile_size=8)
    again = tmp_path / "again.rumi"
    to_rumi(rx.open_dataset(single), again, tile_size=8)
    start, end = rumi.info(source=os.fspath(again)).time[0]
    assert (np.datetime64(start.isoformat()), np.datetime64(end.isoformat())) == (
        bounds[1, 0].astype("datetime64[D]"), bounds[1, 1].astype("datetime64[D]"))


def test_time_with_seconds_and_cf_units(tmp_path: Path) -> None:
    times = np.array(["2024-03-01T10:20:30", "2024-03-02T00:00:01"], dtype="datetime64[ns]")
    source = cube(sample("int32", (2, 1, 9, 9)), times=times)
    path = tmp_path / "t.rumi"
    to_rumi(source, path, tile_size=4)
    raw = rx.open_dataset(path, decode_times=False)  # numbers with CF units
    assert raw["time"].dtype.kind == "i"
    again = tmp_path / "again.rumi"
    to_rumi(raw, again, tile_size=4)
    np.testing.assert_array_equal(rx.open_dataset(again)["time"].values, times)


def test_without_crs_there_is_no_georeferencing(tmp_path: Path) -> None:
    data = sample("float64", (2, 2, 15, 17))
    plain = xr.DataArray(data, dims=("time", "band", "y", "x"), coords={"time": dates(2)})
    path = tmp_path / "plain.rumi"
    to_rumi(plain, path, tile_size=8)
    meta = rumi.info(source=os.fspath(path))
    assert meta.transform is None and meta.crs is None
    assert meta.bands == ["1", "2"]
    back = rx.open_dataset(path)
    assert back.band.values.tolist() == [1, 2]  # rioxarray's labels
    assert "x" not in back.coords and "spatial_ref" not in back.coords
    assert same_bits(back["band_data"].values, data)


def test_rotated_grid_round_trips_through_geotransform(tmp_path: Path) -> None:
    corner = (10.0, 2.0, X0, 1.5, -10.0, Y0)
    data = sample("uint16", (1, 1, 12, 14))
    rotated = xr.DataArray(data, dims=("time", "band", "y", "x"),
                           coords={"time": dates(1), "band": ["pan"],
                                   "spatial_ref": georef.spatial_ref(EPSG, corner)},
                           attrs={"AREA_OR_POINT": "Area"})
    path = tmp_path / "rot.rumi"
    to_rumi(rotated, path, tile_size=8)
    assert rumi.info(source=os.fspath(path)).transform == corner
    back = rx.open_dataset(path)
    assert "xc" in back.coords  # rotated grids read back with 2-D coordinates
    again = tmp_path / "again.rumi"
    to_rumi(back, again, tile_size=8)
    assert rumi.info(source=os.fspath(again)).transform == corner
    # Sliced after opening, the GeoTransform no longer describes the grid.
    with pytest.raises(ValueError, match="does not match the xc/yc"):
        to_rumi(back.isel(x=slice(3, None)), tmp_path / "sliced.rumi")
    assert not (tmp_path / "sliced.rumi").exists()


def test_sliced_axis_aligned_grid_follows_its_coordinates(tmp_path: Path) -> None:
    source = cube(sample("uint16", (1, 1, 30, 40)))
    path = tmp_path / "x.rumi"
    to_rumi(source.isel(x=slice(10, 30), y=slice(5, None)), path, tile_size=16)
    meta = rumi.info(source=os.fspath(path))
    assert meta.transform == (RES, 0.0, X0 + 10 * RES, 0.0, -RES, Y0 - 5 * RES)
    np.testing.assert_array_equal(read(path)[0, 0], source.values[0, 0, 5:, 10:30])


def test_dataset_of_band_variables(tmp_path: Path) -> None:
    source = cube(sample("int16", (2, 3, 20, 25)), bands=["red", "green", "blue"])
    path = tmp_path / "x.rumi"
    to_rumi(source, path, tile_size=16)
    by_band = rx.open_dataset(path, band_as_variable=True)
    assert list(by_band.data_vars) == ["red", "green", "blue"]
    again = tmp_path / "again.rumi"
    to_rumi(by_band, again, tile_size=16)
    assert rumi.info(source=os.fspath(again)).bands == ["red", "green", "blue"]
    assert_same_dataset(rx.open_dataset(again), source)
    # Plain variables of a user's Dataset, 2-D and 3-D, are bands too.
    mixed = xr.Dataset({"ndvi": source.isel(band=0, drop=True).astype("int16"),
                        "evi": source.isel(band=1, drop=True).astype("int16")})
    third = tmp_path / "third.rumi"
    to_rumi(mixed, third, tile_size=16)
    assert rumi.info(source=os.fspath(third)).bands == ["ndvi", "evi"]
    np.testing.assert_array_equal(read(third), source.values[:, :2])


def test_any_dimension_order_and_missing_dims(tmp_path: Path) -> None:
    source = cube(sample("float32", (3, 2, 11, 13)))
    path = tmp_path / "x.rumi"
    to_rumi(source.transpose("x", "band", "y", "time"), path, tile_size=8)
    np.testing.assert_array_equal(read(path), source.values)
    # 2-D: one band (named by the variable), one time step given as time=.
    flat = xr.DataArray(sample("uint8", (11, 13)), dims=("rows", "cols"), name="mask")
    two = tmp_path / "two.rumi"
    to_rumi(flat, two, time="2024-06-01", tile_size=8)
    meta = rumi.info(source=os.fspath(two))
    assert meta.bands == ["mask"] and meta.shape == (1, 11, 13)
    assert str(meta.time[0]) == "2024-06-01"
    np.testing.assert_array_equal(read(two)[0, 0], flat.values)
    # Non-string band labels become text.
    numbered = source.assign_coords(band=[1, 2])
    three = tmp_path / "three.rumi"
    to_rumi(numbered, three, tile_size=8)
    assert rumi.info(source=os.fspath(three)).bands == ["1", "2"]


def test_latitude_longitude_grid_with_crs_argument(tmp_path: Path) -> None:
    values = sample("float32", (2, 6, 8))
    lat = 40.05 + 0.1 * np.arange(6)  # ascending: south-up, positive y resolution
    lon = 10.05 + 0.1 * np.arange(8)
    grid = xr.Dataset({"t2m": (("time", "lat", "lon"), values)},
                      coords={"time": dates(2), "lat": lat, "lon": lon})
    path = tmp_path / "ll.rumi"
    to_rumi(grid, path, crs="EPSG:4326", tile_size=4)
    meta = rumi.info(source=os.fspath(path))
    assert meta.crs == 4326
    np.testing.assert_allclose(meta.transform, (0.1, 0, 10.0, 0, 0.1, 40.0))
    back = rx.open_dataset(path)
    np.testing.assert_allclose(back["y"].values, lat)
    np.testing.assert_allclose(back["x"].values, lon)
    assert same_bits(back["band_data"].values[:, 0], values)


def test_rioxarray_crs_and_accessor(tmp_path: Path) -> None:
    pytest.importorskip("rioxarray")
    source = cube(sample("uint16", (1, 2, 16, 16))).drop_vars("spatial_ref")
    with_crs = source.rio.write_crs("EPSG:3035")
    path = tmp_path / "r.rumi"
    with_crs.rumi.to_rumi(path, tile_size=8)
    back = rx.open_dataset(path)
    assert back.rio.crs.to_epsg() == 3035
    assert back.rio.transform() == with_crs.rio.transform()


# --- dask ---------------------------------------------------------------------------


def test_dask_input_is_compressed_chunk_by_chunk_exactly(tmp_path: Path) -> None:
    expected = sample("uint16", (2, 3, 70, 90), seed=3)
    calls: list[tuple[int, ...]] = []

    def block(block_info: dict | None = None) -> np.ndarray:
        loc = block_info[None]["array-location"]
        calls.append(tuple(start for start, _ in loc))
        return expected[tuple(slice(a, b) for a, b in loc)]

    chunks = ((1, 1), (2, 1), (33, 37), (40, 50))  # not aligned to the 16-pixel tiles
    lazy = da.map_blocks(block, dtype=np.uint16, chunks=chunks)
    path = tmp_path / "d.rumi"
    header = to_rumi(cube(lazy), path, tile_size=16, progress=False)
    assert same_bits(read(path, header), expected)
    # One batch here (the array is small): every source chunk is computed
    # exactly once, even those shared by frames straddling chunk boundaries.
    assert sorted(calls) == sorted(set(calls)) and len(calls) == 2 * 2 * 2 * 2


def test_progress_bar_on_request(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    data = da.from_array(sample("uint8", (1, 1, 40, 40)), chunks=20)
    to_rumi(cube(data), tmp_path / "p.rumi", tile_size=20, progress=True)
    assert "compressing" in capfd.readouterr().err
    to_rumi(cube(data), tmp_path / "q.rumi", tile_size=20)  # small: no bar by default
    assert "compressing" not in capfd.readouterr().err


class _TaskCount:
    """Counts the tasks dask's local schedulers run (a dask Callback)."""

    def __init__(self) -> None:
        from dask.callbacks import Callback

        self.tasks = 0
        counter = self

        class Count(Callback):
            def _pretask(self, key: object, dask: object, state: object) -> None:
                counter.tasks += 1

        self.callback = Count()


@pytest.mark.parametrize("source", ["numpy", "dask"])
def test_writing_many_small_frames_runs_a_bounded_number_of_tasks(
        tmp_path: Path, source: str) -> None:
    # The quadratic writer made one single-frame slice per frame; now the
    # number of dask tasks follows the blocks, not the frames: tile 4 here
    # makes 16x the frames of tile 16 and no more tasks (numpy input is
    # chunked in blocks of WRITE_BLOCK_PIXELS; dask input keeps its chunks).
    expected = sample("uint16", (2, 2, 128, 128), seed=11)
    data: np.ndarray | da.Array = expected
    if source == "dask":
        data = da.from_array(expected, chunks=(1, 1, 64, 64))
    tasks = {}
    for tile in (16, 4):
        count = _TaskCount()
        path = tmp_path / f"t{tile}.rumi"
        with count.callback:
            header = to_rumi(cube(data), path, tile_size=tile, progress=False)
        assert same_bits(read(path, header), expected)
        assert rumi.info(source=os.fspath(path)).frames == 2 * 2 * (128 // tile) ** 2
        tasks[tile] = count.tasks
    assert tasks[4] == tasks[16], tasks
    assert tasks[4] <= 3 * 2 * 2 * 4, tasks  # a few tasks per 64² block, never per frame


def test_progress_is_logged_when_bars_are_off(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    data = sample("uint8", (1, 2, 64, 64))
    with caplog.at_level("INFO", logger="rumi_xarray"):
        to_rumi(cube(data), tmp_path / "l.rumi", tile_size=8, progress=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "rumi_xarray"]
    assert lines[-1].startswith("compressing: 128/128 frames (100%)"), lines
    assert 5 <= len(lines) <= 12, lines  # about every 10 %, not every frame
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines]
    assert done == sorted(done)


MEMORY_SCRIPT = textwrap.dedent("""
    import json, os, resource, sys
    import numpy as np, dask.array as da, xarray as xr
    from rumi_xarray.write.to_rumi import to_rumi

    def block(block_info=None):
        # A smooth ramp plus one bit of noise: compressible, and never
        # materialised whole (each chunk is made when dask asks for it).
        (t0, _), (b0, _), (y0, y1), (x0, x1) = block_info[None]["array-location"]
        rng = np.random.default_rng([t0, b0, y0, x0])
        field = (np.arange(y0, y1, dtype=np.uint16) // 16)[:, None] + (
            np.arange(x0, x1, dtype=np.uint16) // 16)[None, :]
        field %= 64
        field += 1000
        field += rng.integers(0, 2, size=field.shape, dtype=np.uint16)
        return field[None, None]

    T, B, H, W = 4, 5, 3200, 3200
    step = (1024, 1024, 1024, 128)
    arr = da.map_blocks(block, dtype=np.uint16, chunks=((1,) * T, (1,) * B, step, step))
    times = np.datetime64("2024-01-01", "ns") + np.arange(T) * np.timedelta64(1, "D")
    obj = xr.DataArray(arr, dims=("time", "band", "y", "x"), coords={"time": times})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    to_rumi(obj, sys.argv[1], tile_size=512, progress=False)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"nbytes": arr.nbytes, "before": before * 1024, "after": after * 1024,
                      "file": os.path.getsize(sys.argv[1])}))
""")


def test_large_dask_write_has_bounded_peak_memory(tmp_path: Path) -> None:
    script = tmp_path / "write_big.py"
    script.write_text(MEMORY_SCRIPT)
    out = tmp_path / "big.rumi"
    run = subprocess.run([sys.executable, os.fspath(script), os.fspath(out)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    facts = json.loads(run.stdout.strip().splitlines()[-1])
    growth = facts["after"] - facts["before"]
    # About 400 MB written; the process holds the compressed frames (which
    # rumi.write lays out in one call) plus about one batch of source chunks.
    assert facts["nbytes"] > 400e6
    assert growth < 0.5 * facts["nbytes"], (growth, facts)
    assert growth < facts["file"] + 160 * 2**20, (growth, facts)
    # Spot-check one frame against the generator, through librumi.
    header = rumi.info(source=os.fspath(out)).header
    got = rumi.read(os.fspath(out), header, pattern="t b y x", time=[3], bands=[4],
                    window=(2048, 1024, 512, 512))
    rng = np.random.default_rng([3, 4, 2048, 1024])
    field = (np.arange(2048, 3072, dtype=np.uint16) // 16)[:, None] + (
        np.arange(1024, 2048, dtype=np.uint16) // 16)[None, :]
    field = field % 64 + 1000 + rng.integers(0, 2, size=field.shape, dtype=np.uint16)
    np.testing.assert_array_equal(got[0, 0], field[:512, :512])


# --- lossy --------------------------------------------------------------------------


def test_absolute_error_bound_across_frames_of_different_ranges(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    data = rng.normal(0, 1, (1, 2, 64, 64)).astype(np.float32)
    data[0, 1, :32] *= 1000  # frames of very different magnitudes and signs
    lossless, lossy = tmp_path / "a.rumi", tmp_path / "b.rumi"
    to_rumi(cube(data), lossless, tile_size=32)
    to_rumi(cube(data), lossy, tile_size=32, error=0.5)
    assert np.abs(read(lossy).astype(np.float64) - data).max() <= 0.5
    assert lossy.stat().st_size < lossless.stat().st_size


def test_relative_error_bound(tmp_path: Path) -> None:
    data = (np.random.default_rng(6).random((1, 1, 40, 40)) * 1000 + 1).astype(np.float32)
    path = tmp_path / "r.rumi"
    to_rumi(cube(data), path, tile_size=16, error="1%")
    got = read(path).astype(np.float64)
    assert np.max(np.abs(got - data) / np.abs(data)) <= 0.01


# --- what Rumi cannot store: clear errors, nothing left behind ----------------------


def bad_inputs() -> dict[str, tuple[object, dict, type[Exception], str]]:
    base = cube(sample("uint16", (3, 2, 8, 8)))
    times = base["time"].values
    plain = base.drop_vars("spatial_ref")
    return {
        "unparsable CRS": (base, {"crs": "EPSG:not-a-code"}, ValueError,
                           "cannot parse the CRS"),
        "duplicate time": (base.assign_coords(time=[times[0], times[0], times[2]]), {},
                           ValueError, "time repeats at step 1"),
        "backwards time": (base.assign_coords(time=times[::-1]), {},
                           ValueError, "goes backwards"),
        "NaT": (base.assign_coords(time=[times[0], np.datetime64("NaT"), times[2]]), {},
                ValueError, "NaT"),
        "fractional second": (base.assign_coords(time=times + np.timedelta64(250, "ms")), {},
                              ValueError, "fraction of a second"),
        "duplicate band": (base.assign_coords(band=["B1", "B1"]), {},
                           ValueError, "both named 'B1'"),
        "empty band": (base.assign_coords(band=["B1", ""]), {}, ValueError, "empty name"),
        "datetime64 samples": (base.astype("datetime64[s]"), {}, TypeError, "datetime64"),
        "timedelta64 samples": (base.astype("timedelta64[s]"), {}, TypeError, "timedelta64"),
        "object samples": (base.astype(object), {}, TypeError, "dtype object"),
        "string samples": (base.astype("U3"), {}, TypeError, "<U3"),
        "bytes samples": (base.astype("S3"), {}, TypeError, "|S3"),
        "long double samples": (base.astype(np.longdouble), {}, TypeError, "cannot store"),
        "transform without CRS": (plain, {}, ValueError, "but no CRS"),
        "CRS without transform": (
            base.drop_vars(["x", "y"]).assign_coords(spatial_ref=((), 0, {"epsg": EPSG})), {},
            ValueError, "but no transform"),
        "irregular x": (base.assign_coords(x=base["x"].values + np.array([0, 0, 0, 4, 0, 0, 0, 0])),
                        {}, ValueError, "not regularly spaced"),
        "extra dimension": (base.expand_dims(level=2), {}, ValueError,
                            "select or stack 'level' first"),
        "no time": (base.isel(time=0, drop=True), {}, ValueError, "no time coordinate"),
        "overlapping intervals": (base, {"time": [(times[0], times[1] + np.timedelta64(1, "D")),
                                                  (times[1], times[2]),
                                                  (times[2], times[2] + np.timedelta64(1, "D"))]},
                                  ValueError, "before interval 0 ends"),
        "wrong number of times": (base, {"time": ["2024-01-01"]}, ValueError,
                                  "1 entries for 3 time step"),
        "unknown frame": (base, {"frame": "diagonal"}, ValueError, "frame must be one of"),
        "tile size": (base, {"tile_size": 0}, ValueError, "tile_size must be"),
        "no such variable": (base.to_dataset(), {"variable": "nope"}, ValueError,
                             "no data variable 'nope'"),
    }


@pytest.mark.parametrize("name", sorted(bad_inputs()))
def test_bad_input_gives_a_clear_error_and_no_file(tmp_path: Path, name: str) -> None:
    obj, kwargs, error, message = bad_inputs()[name]
    target = tmp_path / "out.rumi"
    with pytest.raises(error, match=message) as info:
        to_rumi(obj, target, **kwargs)
    assert str(target) in str(info.value)
    assert os.listdir(tmp_path) == []


def test_failure_while_compressing_keeps_the_existing_file(tmp_path: Path) -> None:
    good = cube(sample("uint16", (1, 2, 32, 32)))
    target = tmp_path / "out.rumi"
    to_rumi(good, target, tile_size=16)
    before = target.read_bytes()

    def block(block_info: dict | None = None) -> np.ndarray:
        loc = block_info[None]["array-location"]
        if loc[1][0] == 1:
            raise OSError("sensor archive went away")
        return np.zeros([b - a for a, b in loc], dtype=np.uint16)

    failing = da.map_blocks(block, dtype=np.uint16, chunks=((1,), (1, 1), (16, 16), (16, 16)))
    with pytest.raises(OSError, match="sensor archive went away"):
        to_rumi(cube(failing), target, tile_size=16)
    assert sorted(os.listdir(tmp_path)) == ["out.rumi", "out.rumi.aux.json"]  # its digests
    assert target.read_bytes() == before


def test_failed_write_keeps_the_old_file_and_its_sidecar(tmp_path: Path) -> None:
    target = tmp_path / "out.rumi"
    write_array(target, np.zeros((1, 1, 8, 8), np.uint16), bands=["a"], time=["2024-01-01"],
                nodata=0, units="K")
    before = (target.read_bytes(), (tmp_path / "out.rumi.aux.json").read_text())

    def block(block_info: dict | None = None) -> np.ndarray:
        raise OSError("disk went away")

    failing = da.map_blocks(block, dtype=np.uint16, chunks=((1,), (1,), (8,), (8,)))
    with pytest.raises(OSError, match="disk went away"):
        write_array(target, failing, bands=["a"], time=["2024-01-01"], nodata=7)
    assert sorted(os.listdir(tmp_path)) == ["out.rumi", "out.rumi.aux.json"]
    assert (target.read_bytes(), (tmp_path / "out.rumi.aux.json").read_text()) == before


def test_band_variables_with_different_packing_are_stored_decoded(tmp_path: Path) -> None:
    base = cube(sample("int16", (1, 2, 6, 8)) // 4)
    red = base.isel(band=0, drop=True)
    nir = base.isel(band=1, drop=True)
    red.encoding = {"dtype": "int16", "scale_factor": 0.01, "_FillValue": -1}
    nir.encoding = {"dtype": "int16", "scale_factor": 0.02, "_FillValue": -1}
    decoded = xr.Dataset({"red": red.astype("float64") * 0.01, "nir": nir.astype("float64")})
    decoded["red"].encoding = red.encoding
    decoded["nir"].encoding = nir.encoding
    path = tmp_path / "mixed.rumi"
    with pytest.warns(UserWarning, match="different nodata, scale or offset"):
        to_rumi(decoded, path, tile_size=4)
    back = rx.open_dataset(path)["band_data"]
    np.testing.assert_array_equal(back.sel(band="red").values, decoded["red"].values)
    np.testing.assert_array_equal(back.sel(band="nir").values, decoded["nir"].values)
    # The same packing for every variable is kept: packed samples, one sidecar.
    same = xr.Dataset({"red": decoded["red"], "nir": decoded["nir"] * 0.01})
    same["nir"].encoding = dict(red.encoding)
    packed = tmp_path / "packed.rumi"
    to_rumi(same, packed, tile_size=4)
    assert read(packed).dtype == np.int16
    assert json.loads((tmp_path / "packed.rumi.aux.json").read_text())["scale_factor"] == 0.01


def test_destination_problems(tmp_path: Path) -> None:
    data = cube(sample("uint8", (1, 1, 4, 4)))
    with pytest.raises(FileNotFoundError, match="does not exist") as missing:
        to_rumi(data, tmp_path / "missing" / "x.rumi")
    assert missing.value.errno == errno.ENOENT
    with pytest.raises(OSError, match="is a directory") as directory:
        to_rumi(data, tmp_path)
    assert directory.value.errno == errno.EISDIR and directory.value.filename == str(tmp_path)
    with pytest.raises(ValueError, match="write locally"):
        to_rumi(data, "s3://bucket/x.rumi")
    assert os.listdir(tmp_path) == []


def test_written_file_permissions_follow_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "x.rumi"
    to_rumi(cube(sample("uint8", (1, 1, 4, 4))), path)
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_write_array_numpy_path_is_atomic_too(tmp_path: Path) -> None:
    data = sample("uint16", (2, 1, 10, 10))
    with pytest.raises(ValueError, match="goes backwards"):
        write_array(tmp_path / "x.rumi", data, bands=["a"], time=["2024-01-02", "2024-01-01"],
                    tile_size=4)
    assert os.listdir(tmp_path) == []
    header = write_array(tmp_path / "x.rumi", data, bands=["a"],
                         time=["2024-01-01", "2024-01-02"], tile_size=4)
    assert same_bits(read(tmp_path / "x.rumi", header), data)


def _lying(kind: str) -> da.Array:
    """A dask array whose computed blocks contradict what it declares."""
    zeros = da.zeros((1, 1, 256, 256), chunks=(1, 1, 128, 128), dtype="u1")
    if kind == "dtype":  # declared uint8, computes float32
        return zeros.map_blocks(lambda b: b.astype("f4"), dtype="u1")
    # declared 128 x 128 blocks, the last one computes 128 x 64
    return zeros.map_blocks(lambda b, block_info=None: b[..., :64]
                            if block_info[0]["chunk-location"] == (0, 0, 1, 1) else b,
                            dtype="u1")


@pytest.mark.parametrize(("kind", "said"), [
    ("dtype", r"computed dtype float32, declared uint8"),
    ("shape", r"block \(0, 0, 1, 1\) at \(time, band, y, x\) 0:1, 0:1, 128:256, 128:256: "
              r"computed shape \(1, 1, 128, 64\), declared \(1, 1, 128, 128\)")])
@pytest.mark.parametrize("tile", [128, 64])
def test_computed_block_must_match_declared_dtype_and_shape(tmp_path: Path, kind: str,
                                                            said: str, tile: int) -> None:
    # Such blocks used to be compressed and written "successfully", then failed on read.
    path = tmp_path / "l.rumi"
    data = cube(_lying(kind), bands=["a"])
    with pytest.raises(rx.RumiWriteValueError, match=said) as caught:
        to_rumi(data, path, tile_size=tile)
    assert str(caught.value).startswith(f"{path}: dask block")
    assert caught.value.filename == str(path)
    assert os.listdir(tmp_path) == []  # no file, no temporary, no sidecar
    # An existing file at the destination is left as it was.
    good = cube(da.ones((1, 1, 256, 256), chunks=(1, 1, 128, 128), dtype="u1"), bands=["a"])
    to_rumi(good, path, tile_size=tile)
    before = path.read_bytes()
    with pytest.raises(rx.RumiWriteValueError, match=said):
        to_rumi(data, path, tile_size=tile)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["l.rumi", "l.rumi.aux.json"]


def test_big_endian_blocks_of_a_native_declared_array_are_accepted(tmp_path: Path) -> None:
    # Byte order aside: frames are stored native, so only the kind and width must match.
    values = sample("uint16", (1, 1, 32, 32))
    data = da.from_array(values, chunks=(1, 1, 16, 16)).map_blocks(
        lambda b: b.astype(">u2"), dtype="<u2")
    to_rumi(cube(data, bands=["a"]), tmp_path / "x.rumi", tile_size=16)
    assert same_bits(read(tmp_path / "x.rumi"), values)
