"""Deterministic synthetic Sentinel-2-like scenes for demos, notebooks and benchmarks.

:func:`scene_series` builds a small but realistic time series: four bands of
surface reflectance (scaled by 10 000, ``uint16``), on a UTM grid of 10 m
pixels, over land-cover patches (water, forest, crop parcels, urban) whose
NDVI follows distinct seasonal curves, with sensor noise and two cloudy
dates. The same arguments always give the same values, so tests, notebooks
and benchmarks can regenerate their inputs instead of shipping them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from rumi_xarray.conventions import georef

#: Band key -> Rumi band text (name, description, centre wavelength).
BANDS = {
    "blue": "B02, Blue, 490nm",
    "green": "B03, Green, 560nm",
    "red": "B04, Red, 665nm",
    "nir": "B08, NIR, 842nm",
}

#: Land-cover classes; the class code is the index.
LAND_COVER = ("water", "forest", "crop", "urban")

EPSG = 32633
PIXEL_SIZE = 10.0
#: Upper-left corner of the grid (UTM zone 33N, a Sentinel-2 tile origin).
ORIGIN = (399960.0, 5900040.0)
#: Reflectance scale of the stored integers (Sentinel-2 L2A convention).
SCALE = 10000
#: CF ``scale_factor`` of the stored integers: reflectance = count x SCALE_FACTOR.
SCALE_FACTOR = 1 / SCALE
#: Reflectance of cloud tops per band (clouds are bright and white).
CLOUD = {"blue": 0.46, "green": 0.45, "red": 0.44, "nir": 0.47}
#: Surface reflectance of the visible bands per land-cover class.
_VISIBLE = {
    "water": {"blue": 0.060, "green": 0.050, "red": 0.030},
    "forest": {"blue": 0.030, "green": 0.055, "red": 0.060},
    "crop": {"blue": 0.050, "green": 0.080, "red": 0.090},
    "urban": {"blue": 0.120, "green": 0.130, "red": 0.150},
}


def dates(n: int, year: int = 2024) -> np.ndarray:
    """Return ``n`` acquisition times spread evenly over a year, at 10:00 UTC.

    Parameters
    ----------
    n : int
        Number of dates, at least 1.
    year : int, default 2024

    Returns
    -------
    numpy.ndarray
        ``datetime64[ns]``, strictly increasing.
    """
    if n < 1:
        raise ValueError(f"need at least one date, got {n}")
    start = np.datetime64(f"{year}-01-01T10:00:00", "s")
    length = int((np.datetime64(f"{year + 1}-01-01") - np.datetime64(f"{year}-01-01"))
                 .astype("timedelta64[D]").astype(int))
    # Centre each date in its share of the year, on whole days.
    days = ((np.arange(n) + 0.5) * length / n).astype(np.int64)
    return (start + days.astype("timedelta64[D]")).astype("datetime64[ns]")


def cloudy_steps(n: int) -> tuple[int, ...]:
    """Return the time steps covered by clouds: two for series of 4 dates or more.

    Parameters
    ----------
    n : int
        Number of dates.

    Returns
    -------
    tuple of int
    """
    if n < 4:
        return ()
    return (int(n * 0.3), int(n * 0.7))


def _smooth_field(rng: np.random.Generator, size: int, scale: float) -> np.ndarray:
    """Return a standardised random field with features about ``scale`` pixels wide."""
    noise = rng.standard_normal((size, size))
    ky = np.fft.fftfreq(size)[:, None]
    kx = np.fft.rfftfreq(size)[None, :]
    spectrum = np.fft.rfft2(noise) * np.exp(-0.5 * (ky**2 + kx**2) * (2 * np.pi * scale) ** 2)
    field = np.fft.irfft2(spectrum, s=(size, size))
    return (field - field.mean()) / (field.std() or 1.0)


def land_cover(size: int = 512, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Return a land-cover map and each pixel's crop calendar shift.

    Water bodies and urban areas are smooth blobs; the rest is a grid of
    rectangular parcels, each forest or crop, and each crop parcel peaks on
    its own date.

    Parameters
    ----------
    size : int, default 512
        Height and width in pixels.
    seed : int, default 0

    Returns
    -------
    classes : numpy.ndarray
        ``uint8 (size, size)``: indices into :data:`LAND_COVER`.
    shift : numpy.ndarray
        ``float32 (size, size)``: days added to the crop season's peak.
    """
    rng = np.random.default_rng([seed, 1])
    water = _smooth_field(rng, size, size / 14)
    urban = _smooth_field(rng, size, size / 20)
    wood = _smooth_field(rng, size, size / 8)
    parcel_h, parcel_w = max(4, size // 12), max(4, size // 9)
    rows = np.arange(size) // parcel_h
    cols = np.arange(size) // parcel_w
    n_rows, n_cols = int(rows[-1]) + 1, int(cols[-1]) + 1
    forest_parcel = rng.random((n_rows, n_cols)) < 0.35
    shift_parcel = rng.uniform(-25, 25, (n_rows, n_cols)).astype(np.float32)
    classes = np.where(forest_parcel[rows[:, None], cols[None, :]], 1, 2).astype(np.uint8)
    classes[wood > 1.0] = 1
    classes[urban > np.quantile(urban, 0.88)] = 3
    classes[water < np.quantile(water, 0.12)] = 0
    return classes, shift_parcel[rows[:, None], cols[None, :]]


def ndvi_profile(cover: str, day_of_year: np.ndarray | float) -> np.ndarray:
    """Return the seasonal NDVI of a land-cover class on given days of the year.

    Parameters
    ----------
    cover : {"water", "forest", "crop", "urban"}
    day_of_year : array-like
        Days since 1 January (fractions allowed).

    Returns
    -------
    numpy.ndarray
    """
    doy = np.asarray(day_of_year, dtype=np.float64)

    def bump(peak: float, width: float) -> np.ndarray:
        return np.exp(-0.5 * ((doy - peak) / width) ** 2)

    if cover == "water":
        return -0.25 + 0.04 * bump(200, 60)
    if cover == "forest":
        return 0.50 + 0.32 * bump(190, 65)
    if cover == "crop":
        return 0.18 + 0.65 * bump(170, 38)
    if cover == "urban":
        return 0.10 + 0.05 * bump(190, 70)
    raise ValueError(f"unknown land cover {cover!r}; expected one of {LAND_COVER}")


def _surface(classes: np.ndarray, shift: np.ndarray, doy: float, brightness: np.ndarray,
             rng: np.random.Generator, bands: Sequence[str]) -> np.ndarray:
    """Return clear-sky reflectance ``(band, y, x)`` on one day."""
    ndvi = np.empty(classes.shape, dtype=np.float64)
    visible = {b: np.empty(classes.shape, dtype=np.float64) for b in ("blue", "green", "red")}
    for code, cover in enumerate(LAND_COVER):
        where = classes == code
        days = doy - shift[where] if cover == "crop" else np.full(int(where.sum()), doy)
        ndvi[where] = ndvi_profile(cover, days)
        for band, value in _VISIBLE[cover].items():
            visible[band][where] = value
    ndvi += rng.normal(0.0, 0.03, classes.shape)
    np.clip(ndvi, -0.6, 0.92, out=ndvi)
    # Green vegetation absorbs red light; NIR follows from NDVI's definition.
    land = classes != 0
    visible["red"][land] = np.maximum(visible["red"][land] - 0.05 * ndvi[land], 0.015)
    nir = visible["red"] * (1 + ndvi) / (1 - ndvi)
    values = {**visible, "nir": nir}
    out = np.stack([values[b] * brightness for b in bands])
    out += rng.normal(0.0, 0.004, out.shape)
    return out


def _clouds(rng: np.random.Generator, size: int, cover: float = 0.45) -> np.ndarray:
    """Return cloud opacity in [0, 1] covering about ``cover`` of the scene."""
    field = _smooth_field(rng, size, size / 16)
    threshold = np.quantile(field, 1 - cover)
    return np.clip((field - threshold) / 0.6, 0.0, 1.0)


def scene_series(n_dates: int = 24, size: int = 512, bands: Sequence[str] = tuple(BANDS),
                 seed: int = 0, year: int = 2024) -> xr.Dataset:
    """Return a deterministic synthetic time series of Sentinel-2-like scenes.

    Parameters
    ----------
    n_dates : int, default 24
        Dates spread evenly over ``year`` (see :func:`dates`); series of four
        dates or more have two cloudy ones (:func:`cloudy_steps`).
    size : int, default 512
        Height and width in pixels (10 m each).
    bands : sequence of str, default all of :data:`BANDS`
        Band keys, in order.
    seed : int, default 0
    year : int, default 2024

    Returns
    -------
    xarray.Dataset
        ``band_data (time, band, y, x) uint16``: reflectance x 10 000, CF-packed
        (``scale_factor`` 1e-4, ``units`` "1": files written from it decode to
        reflectance), band coordinate = Rumi band texts; ``land_cover (y, x) uint8`` with CF
        ``flag_values``/``flag_meanings``; pixel-centre ``x``/``y``, a
        ``spatial_ref`` grid mapping (EPSG:32633) and a ``cloud_cover (time)``
        coordinate (fraction of the scene under clouds).
    """
    unknown = [b for b in bands if b not in BANDS]
    if unknown:
        raise ValueError(f"unknown bands {unknown}; choose from {list(BANDS)}")
    times = dates(n_dates, year)
    classes, shift = land_cover(size, seed)
    rng = np.random.default_rng([seed, 2])
    brightness = 1.0 + 0.08 * _smooth_field(rng, size, size / 30)
    cloudy = set(cloudy_steps(n_dates))
    cloud_values = np.array([CLOUD[b] for b in bands])[:, None, None]
    data = np.empty((n_dates, len(bands), size, size), dtype=np.uint16)
    cover = np.zeros(n_dates)
    for i, when in enumerate(times):
        step_rng = np.random.default_rng([seed, 3, i])
        doy = float((when - np.datetime64(f"{year}-01-01")) / np.timedelta64(1, "D"))
        reflectance = _surface(classes, shift, doy, brightness, step_rng, bands)
        if i in cloudy:
            opacity = _clouds(step_rng, size)
            reflectance = (1 - opacity) * reflectance + opacity * cloud_values
            cover[i] = float((opacity > 0.5).mean())
        data[i] = np.clip(np.rint(reflectance * SCALE), 1, SCALE).astype(np.uint16)
    return _dataset(data, classes, times, cover, bands, size, seed)


def _dataset(data: np.ndarray, classes: np.ndarray, times: np.ndarray, cover: np.ndarray,
             bands: Sequence[str], size: int, seed: int) -> xr.Dataset:
    x0, y0 = ORIGIN
    corner = (PIXEL_SIZE, 0.0, x0, 0.0, -PIXEL_SIZE, y0)
    x = x0 + PIXEL_SIZE * (np.arange(size) + 0.5)
    y = y0 - PIXEL_SIZE * (np.arange(size) + 0.5)
    reflectance = xr.Variable(
        ("time", "band", "y", "x"), data,
        # CF packing, as Sentinel-2 L2A stores it: reflectance = count x 1e-4. to_rumi
        # keeps the scale in the sidecar, so opening a written file (mask_and_scale=True,
        # xarray's default) gives reflectance, while this in-memory Dataset holds counts.
        {"long_name": "surface reflectance", "units": "1", "scale_factor": SCALE_FACTOR,
         "AREA_OR_POINT": "Area"}, encoding={"grid_mapping": georef.GRID_MAPPING})
    cover_map = xr.Variable(
        ("y", "x"), classes,
        {"long_name": "land cover", "flag_values": np.arange(len(LAND_COVER), dtype=np.uint8),
         "flag_meanings": " ".join(LAND_COVER), "AREA_OR_POINT": "Area"},
        encoding={"grid_mapping": georef.GRID_MAPPING})
    return xr.Dataset(
        {"band_data": reflectance, "land_cover": cover_map},
        coords={
            "time": ("time", times, {"standard_name": "time"}),
            "band": ("band", np.array([BANDS[b] for b in bands], dtype=object)),
            "y": ("y", y, {"standard_name": "projection_y_coordinate", "units": "m"}),
            "x": ("x", x, {"standard_name": "projection_x_coordinate", "units": "m"}),
            georef.GRID_MAPPING: georef.spatial_ref(EPSG, corner),
            "cloud_cover": ("time", cover, {"long_name": "fraction of the scene under clouds"}),
        },
        attrs={"title": "synthetic Sentinel-2-like time series (rumi_xarray.synthetic)",
               "seed": seed})
