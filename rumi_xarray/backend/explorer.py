"""The explorer widget of ``.rumi.explore()``: a map, a time slider, a pixel's series.

Imported only by ``.rumi.explore()``, after the ``explore`` extra was checked:
it imports ipywidgets, ipyevents and matplotlib, which ``import rumi_xarray``
never does.

Why plain ipywidgets with images drawn in the kernel (and not ipympl, bqplot
or panel): the map is a PNG of the samples read, one image pixel per sample,
shown by an ``ipywidgets.Image``; the series is a matplotlib figure drawn
with the Agg renderer into another. Nothing but ipywidgets' own image view
and ipyevents' mouse events runs in the browser, so the explorer renders the
same in JupyterLab, Notebook 7, VS Code and Voila, with no matplotlib
front-end extension to keep in step with the kernel (ipympl's), and a saved
notebook keeps the last images in its widget state. A click maps to a pixel
exactly: ipyevents reports where the click fell in the image, and the image
holds one sample per pixel. The price is that the map is redrawn in the
kernel on each change (a few milliseconds for a 1024-pixel map, small next
to the read). Every element a test or a user needs to find carries a CSS
class (``rumi-explore-map``, ``rumi-explore-series``...) and its facts as
``data-`` attributes, so a browser test reads them from the page.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Callable, Sequence
from typing import Any

import ipyevents
import ipywidgets as widgets
import matplotlib
import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rumi_xarray.backend.explore import (
    ExploreSource,
    Reading,
    explore_source,
    nearest_time,
    read_map,
    read_series,
)
from rumi_xarray.errors import argument_error
from rumi_xarray.model.views import MAX_PIXELS, MapGrid, View, plan_map, stretch_limits, to_unit

#: Colours of the three lines of an RGB composite's series.
RGB_COLOURS = ("tab:red", "tab:green", "tab:blue")
#: Zoom factor of one zoom step (a button press or a turn of the mouse wheel).
ZOOM_STEP = 2.0
#: CSS the explorer's images need: samples drawn as squares, a crosshair on the map (no
#: border or padding: a click's position in the image's box is its position in the map).
STYLE = ("<style>img.rumi-explore-map{image-rendering:pixelated;cursor:crosshair;"
         "border:0;padding:0}</style>")


def date_labels(values: np.ndarray) -> list[str]:
    """Return a short, unique label per time value (days when all are whole days).

    Parameters
    ----------
    values : numpy.ndarray
        ``datetime64`` (or any objects, shown with ``str``).

    Returns
    -------
    list of str
        Repeated dates get `` (2)``, `` (3)``... so that every label picks one step.
    """
    if np.issubdtype(values.dtype, np.datetime64):
        whole_days = bool(np.all(values.astype("datetime64[D]") == values))
        text = (np.datetime_as_string(values, unit="D") if whole_days
                else np.datetime_as_string(values, unit="m"))
        labels = [str(v).replace("T", " ") for v in text]
    else:
        labels = [str(v) for v in values]
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def _png(rgba: np.ndarray) -> bytes:
    # 8-bit RGBA saved by Pillow (matplotlib's own dependency) at zlib level 1: the map is
    # redrawn on every date, band or zoom change, and matplotlib's imsave at its default
    # level took longer than the map's read (about 450 ms for a 1024-pixel map).
    from PIL import Image

    counts = (np.clip(np.nan_to_num(rgba), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(counts).save(buf, format="png", compress_level=1)
    return buf.getvalue()


def _figure_png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class Explorer(widgets.VBox):
    """An interactive time-series explorer: one date's map, a time slider, a pixel's series.

    Made by ``ds.rumi.explore()``, which documents the arguments. Displayed
    like any widget; every action of the user is also a method, so code (and
    tests) can drive it.

    Attributes
    ----------
    source : ExploreSource
        What is read.
    view : View
        The full-resolution window shown (zoom).
    grid : MapGrid
        The samples the map shows: level, window and stride of :attr:`view`.
    map_values : numpy.ndarray
        ``(band, y, x)`` decoded samples of the map shown.
    limits : numpy.ndarray
        ``(band, 2)`` stretch of the map (kept while the date changes, so
        dates compare; made again when the bands or the view change).
    pixel : tuple of int or None
        Full-resolution ``(row, col)`` of the pixel whose series is shown.
    series : xarray.DataArray or None
        ``(time, band)``: the series plotted, one point per date and band.
    readings : list of Reading
        Every read made, in order (map and series).
    """

    def __init__(self, source: ExploreSource, bands: tuple[int, ...], t: int, *,
                 max_pixels: int = MAX_PIXELS, cmap: str = "viridis",
                 percentiles: tuple[float, float] = (2.0, 98.0), size: int = 512) -> None:
        self.source = source
        self.max_pixels = int(max_pixels)
        self.cmap = matplotlib.colormaps[cmap].with_extremes(bad=(0.0, 0.0, 0.0, 0.0))
        self.percentiles = (float(percentiles[0]), float(percentiles[1]))
        self.size = int(size)
        self.bounds = View(source.row0, source.col0, source.height, source.width)
        self.view = self.bounds
        self.pixel: tuple[int, int] | None = None
        self.series: xr.DataArray | None = None
        self.readings: list[Reading] = []
        self.map_reading: Reading | None = None
        self.series_reading: Reading | None = None
        self.map_values = np.empty((0, 0, 0))
        self.limits = np.empty((0, 2))
        self.grid: MapGrid
        self.labels = date_labels(source.time_values)

        self.time_slider = widgets.SelectionSlider(
            options=[(label, i) for i, label in enumerate(self.labels)], value=int(t),
            description="Date", continuous_update=False,
            layout=widgets.Layout(width=f"{max(self.size, 320)}px"))
        self.time_slider.add_class("rumi-explore-time")
        self.band_choice = widgets.Dropdown(options=self._band_options(bands), value=bands,
                                            description="Bands")
        self.band_choice.add_class("rumi-explore-bands")
        self.zoom_in_button = widgets.Button(description="Zoom in", icon="search-plus")
        self.zoom_out_button = widgets.Button(description="Zoom out", icon="search-minus")
        self.reset_button = widgets.Button(description="Whole image", icon="expand")
        self.map_image = widgets.Image(format="png")
        self.map_image.add_class("rumi-explore-map")
        self.map_info = widgets.HTML()
        self.series_image = widgets.Image(format="png")
        self.series_image.add_class("rumi-explore-series")
        self.series_info = widgets.HTML(
            '<div class="rumi-explore-series-info" data-points="0">Click a pixel of the map '
            "to plot its series: every date, read in one planned read.</div>")
        self.error = widgets.HTML()
        self.error.add_class("rumi-explore-error")
        self.clicks = ipyevents.Event(source=self.map_image, watched_events=["click"])
        # The wheel fires a burst of events per turn: one zoom per burst.
        self.wheel = ipyevents.Event(source=self.map_image, watched_events=["wheel"],
                                     wait=250, throttle_or_debounce="debounce")

        self.time_slider.observe(self._shown(lambda _: self._draw_map(restretch=False)),
                                 names="value")
        self.band_choice.observe(self._shown(lambda _: self._bands_changed()), names="value")
        self.zoom_in_button.on_click(self._shown(lambda _: self.zoom(1 / ZOOM_STEP)))
        self.zoom_out_button.on_click(self._shown(lambda _: self.zoom(ZOOM_STEP)))
        self.reset_button.on_click(self._shown(lambda _: self.reset_view()))
        self.clicks.on_dom_event(self._shown(self.handle_event))
        self.wheel.on_dom_event(self._shown(self.handle_event))

        title = widgets.HTML(f"{STYLE}<b>{html.escape(source.name)}</b>: "
                             f"{len(self.labels)} dates, {len(source.bands)} bands, "
                             f"{source.height} x {source.width} pixels")
        controls = widgets.HBox([self.time_slider, self.band_choice])
        zoom = widgets.HBox([self.zoom_in_button, self.zoom_out_button, self.reset_button])
        panels = widgets.HBox([widgets.VBox([self.map_image, self.map_info]),
                               widgets.VBox([self.series_image, self.series_info])])
        super().__init__([title, controls, zoom, panels, self.error])
        self.add_class("rumi-explore")
        self._draw_map(restretch=True)

    # --- what the user does ----------------------------------------------------------

    @property
    def t(self) -> int:
        """Return the position of the date shown along the explored ``time``."""
        return int(self.time_slider.value)

    @property
    def bands(self) -> tuple[int, ...]:
        """Return the positions of the bands shown (one, or three for RGB)."""
        return tuple(self.band_choice.value)

    def show_date(self, t: int) -> None:
        """Show date ``t`` (a position along ``time``), as moving the slider does.

        Parameters
        ----------
        t : int
        """
        self.time_slider.value = int(t)

    def show_bands(self, bands: tuple[int, ...]) -> None:
        """Show these band positions (one, or three for RGB), as the band menu does.

        Parameters
        ----------
        bands : tuple of int
        """
        if bands not in [v for _, v in self.band_choice.options]:
            self.band_choice.options = self._band_options(bands)
        self.band_choice.value = tuple(bands)

    def click(self, i: int, j: int) -> tuple[int, int]:
        """Select the pixel under map sample ``(i, j)`` (row, column of the map shown).

        Parameters
        ----------
        i, j : int

        Returns
        -------
        tuple of int
            The full-resolution ``(row, col)`` selected.
        """
        row, col = self.grid.full_pixel(i, j)
        self.select_pixel(row, col)
        return row, col

    def select_pixel(self, row: int, col: int) -> None:
        """Read and plot the series of full-resolution pixel ``(row, col)``: one planned read.

        Parameters
        ----------
        row, col : int
            In the cube's full-resolution image.
        """
        b = self.bounds
        if not (b.row <= row < b.row + b.height and b.col <= col < b.col + b.width):
            raise IndexError(f"pixel ({row}, {col}) is outside the explored window {b}")
        values, reading = read_series(self.source, row, col, self.bands)
        self._record(reading)
        self.series_reading = reading
        self.pixel = (int(row), int(col))
        names = [self.source.band_names[k] for k in self.bands]
        self.series = xr.DataArray(values, dims=("time", "band"),
                                   coords={"time": self.source.time_values, "band": names},
                                   name="band_data")
        self._draw_series()

    def zoom(self, scale: float, centre: tuple[int, int] | None = None) -> None:
        """Zoom by ``scale`` (< 1 in, > 1 out) around a full-resolution pixel.

        Parameters
        ----------
        scale : float
        centre : (int, int), optional
            The pixel that becomes the centre; the selected pixel, else the
            centre of the view.
        """
        if centre is None:
            v = self.view
            centre = self.pixel or (v.row + v.height // 2, v.col + v.width // 2)
        self.view = self.view.zoom(scale, centre[0], centre[1], self.bounds)
        self._draw_map(restretch=True)

    def reset_view(self) -> None:
        """Show the whole explored image again."""
        self.view = self.bounds
        self._draw_map(restretch=True)

    def handle_event(self, event: dict[str, Any]) -> None:
        """Handle a mouse event on the map, as ipyevents reports it.

        A click selects the pixel under it; the wheel zooms around it (up:
        in, down: out).

        Parameters
        ----------
        event : dict
            ipyevents' event: ``type``/``event``, ``relativeX``/``relativeY``
            and ``boundingRectWidth``/``boundingRectHeight`` (or
            ``dataX``/``dataY``), ``deltaY`` for the wheel.
        """
        kind = event.get("event") or event.get("type")
        i, j = self._map_position(event)
        if kind == "click":
            self.click(i, j)
        elif kind == "wheel":
            delta = float(event.get("deltaY") or 0.0)
            if delta:
                self.zoom(1 / ZOOM_STEP if delta < 0 else ZOOM_STEP, self.grid.full_pixel(i, j))

    def figure(self) -> Figure:
        """Return a static matplotlib figure of what the explorer shows: map and series.

        For a report or a notebook that is read without a kernel. The map is
        the one shown (same samples and stretch); the series, when a pixel is
        selected, is marked on it.

        Returns
        -------
        matplotlib.figure.Figure
        """
        fig = Figure(figsize=(11, 4.4), layout="constrained")
        ax_map, ax_series = fig.subplots(1, 2, width_ratios=(1, 1.4))
        ax_map.imshow(self._map_rgba(), interpolation="nearest")
        ax_map.set(title=self._map_title(), xticks=[], yticks=[])
        if self.pixel is not None:
            g = self.grid
            i = (self.pixel[0] // g.factor - g.row) / g.step
            j = (self.pixel[1] // g.factor - g.col) / g.step
            ax_map.plot([j], [i], marker="+", color="white", markersize=14, mew=2.5)
            ax_map.plot([j], [i], marker="+", color="black", markersize=12, mew=1.2)
        self._plot_series(ax_series)
        return fig

    # --- drawing -----------------------------------------------------------------------

    def _band_options(self, chosen: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
        src = self.source
        options: list[tuple[str, tuple[int, ...]]] = []
        for combo in (chosen, src.default_bands()):
            if len(combo) == 3 and (self._band_label(combo), combo) not in options:
                options.append((self._band_label(combo), combo))
        options += [(self._band_label((b,)), (b,)) for b in range(len(src.bands))]
        return options

    def _band_label(self, bands: Sequence[int]) -> str:
        src = self.source
        if len(bands) == 3:
            return "RGB: " + ", ".join(src.band_names[b] for b in bands)
        b = bands[0]
        common = src.common_names[b]
        return f"{src.band_names[b]} ({common})" if common else src.band_names[b]

    def _plan(self) -> MapGrid:
        src = self.source
        return plan_map(self.view, src.full_shape, src.factors,
                        src.level_shape if src.factors else None, self.max_pixels)

    def _bands_changed(self) -> None:
        self._draw_map(restretch=True)
        if self.pixel is not None:
            self.select_pixel(*self.pixel)

    def _draw_map(self, restretch: bool) -> None:
        planned = self._plan()
        values, reading = read_map(self.source, planned, self.t, self.bands)
        # The grid read: a date whose file lacks the level was read at full resolution,
        # and a click on it maps to the very sample shown.
        self.grid = self.source.readable_grid(planned, self.t)
        self._record(reading)
        self.map_reading = reading
        self.map_values = values
        if restretch or self.limits.shape[0] != values.shape[0]:
            self.limits = stretch_limits(values, self.percentiles)
        self.map_image.value = _png(self._map_rgba())
        g = self.grid
        scale = self.size / max(g.height, g.width)
        # Set on the image's own layout (a new Layout would be one more widget each time).
        self.map_image.layout.width = f"{round(g.width * scale)}px"
        self.map_image.layout.height = f"{round(g.height * scale)}px"
        level = "full resolution" if g.level is None else f"overview {g.level} (1:{g.factor})"
        stride = "" if g.step == 1 else f", every {_ordinal(g.step)} pixel"
        v = self.view
        attrs = {"date": self.labels[self.t], "t": self.t,
                 "level": "full" if g.level is None else g.level, "factor": g.factor,
                 "step": g.step, "row0": g.row, "col0": g.col, "height": g.height,
                 "width": g.width, "calls": reading.calls}
        text = (f"<b>{html.escape(self.labels[self.t])}</b>, "
                f"{html.escape(self._band_label(self.bands))}: view of {v.height} x {v.width} "
                f"pixels shown as {g.height} x {g.width} from the {level}{stride}.<br>"
                f"Map read: {html.escape(str(reading))}")
        self.map_info.value = _tagged("rumi-explore-map-info", attrs, text)
        if self.series is not None:
            self._draw_series()  # the date marker moves with the slider

    def _map_rgba(self) -> np.ndarray:
        unit = to_unit(self.map_values, self.limits)
        if unit.shape[0] == 1:
            return np.asarray(self.cmap(np.ma.masked_invalid(unit[0])))
        rgb = np.moveaxis(unit, 0, -1)
        alpha = np.all(np.isfinite(rgb), axis=-1, keepdims=True).astype(np.float64)
        return np.concatenate([np.nan_to_num(rgb), alpha], axis=-1)

    def _map_title(self) -> str:
        g = self.grid
        level = "full res." if g.level is None else f"overview 1:{g.factor}"
        return (f"{self.labels[self.t]}, {self._band_label(self.bands)}\n"
                f"{g.height} x {g.width} samples, {level}, step {g.step}")

    def _draw_series(self) -> None:
        assert self.series is not None and self.pixel is not None
        reading = self.series_reading
        assert reading is not None
        # Fixed margins (room for 5-digit ticks, a label and dates at 30 degrees), not
        # the constrained layout: laying the figure out again took half a click's time.
        fig = Figure(figsize=(6.4, 3.8))
        fig.subplots_adjust(left=0.13, right=0.98, bottom=0.2, top=0.91)
        self._plot_series(fig.add_subplot())
        self.series_image.value = _figure_png(fig)
        n_dates, n_bands = self.series.shape
        row, col = self.pixel
        attrs = {"points": n_dates, "lines": n_bands, "row": row, "col": col,
                 "calls": reading.calls, "frames": reading.planned.frames,
                 "bytes": reading.planned.compressed_bytes}
        text = (f"Pixel row {row}, column {col}{html.escape(self._place())}: "
                f"{n_dates} points (one per date) x {n_bands} band(s).<br>"
                f"Series read: {html.escape(str(reading))}")
        self.series_info.value = _tagged("rumi-explore-series-info", attrs, text)

    def _place(self) -> str:
        """Return `` (x=..., y=...)`` of the selected pixel's centre, when known."""
        src, pixel = self.source, self.pixel
        if pixel is None or src.x is None or src.y is None:
            return ""
        return (f" (x={src.x[pixel[1] - src.col0]:.10g}, "
                f"y={src.y[pixel[0] - src.row0]:.10g})")

    def _plot_series(self, ax: Any) -> None:
        if self.series is None or self.pixel is None:
            ax.text(0.5, 0.5, "No pixel selected", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set(xticks=[], yticks=[])
            return
        times = self.source.time_values
        x = times if np.issubdtype(times.dtype, np.datetime64) else np.arange(times.size)
        colours = RGB_COLOURS if self.series.shape[1] == 3 else (None,)
        for k, name in enumerate(self.series["band"].values):
            ax.plot(x, self.series.values[:, k], marker="o", markersize=4, linewidth=1.2,
                    color=colours[k % len(colours)], label=str(name))
        ax.axvline(x[self.t], color="0.4", linestyle="--", linewidth=1)
        row, col = self.pixel
        ax.set(title=f"Pixel row {row}, column {col}{self._place()}",
               xlabel="date", ylabel=self.source.label)
        if self.series.shape[1] > 1:
            ax.legend(loc="best", fontsize="small")
        ax.grid(alpha=0.3)
        if x is times:
            for label in ax.get_xticklabels():
                label.set_rotation(30)
                label.set_horizontalalignment("right")

    def _map_position(self, event: dict[str, Any]) -> tuple[int, int]:
        """Return the map sample under a mouse event."""
        g = self.grid
        width = float(event.get("boundingRectWidth") or 0.0)
        height = float(event.get("boundingRectHeight") or 0.0)
        if width > 0 and height > 0 and "relativeX" in event:
            # Where the click fell in the image as shown, whatever its CSS size.
            return (math.floor(float(event["relativeY"]) * g.height / height),
                    math.floor(float(event["relativeX"]) * g.width / width))
        return int(event.get("dataY", 0)), int(event.get("dataX", 0))

    def _record(self, reading: Reading) -> None:
        self.readings.append(reading)

    def _shown(self, handler: Callable[[Any], None]) -> Callable[[Any], None]:
        """Wrap a front-end callback: its error is shown in the widget, then raised."""

        def run(arg: Any) -> None:
            self.error.value = ""
            try:
                handler(arg)
            except Exception as exc:
                self.error.value = (f'<pre style="color:#b00">{html.escape(type(exc).__name__)}'
                                    f": {html.escape(str(exc))}</pre>")
                raise

        return run


def _tagged(cls: str, attrs: dict[str, Any], text: str) -> str:
    data = " ".join(f'data-{k}="{html.escape(str(v))}"' for k, v in attrs.items())
    return f'<div class="{cls}" {data}>{text}</div>'


def explore(obj: xr.Dataset | xr.DataArray, *, band: Any = None, time: Any = None,
            max_pixels: int = 1024, cmap: str = "viridis",
            percentiles: tuple[float, float] = (2.0, 98.0), size: int = 512) -> Explorer:
    """Return the explorer widget of ``obj`` (``.rumi.explore()`` documents the arguments).

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray
    band, time, max_pixels, cmap, percentiles, size
        See ``.rumi.explore()``.

    Returns
    -------
    Explorer

    Raises
    ------
    RumiArgumentError
        An argument cannot be used (an unknown band, a time outside the
        dates, a ``max_pixels`` below 1).
    """
    source = explore_source(obj)
    if int(max_pixels) < 1:
        raise argument_error(f"{source.name}: max_pixels must be at least 1, got "
                             f"{max_pixels!r}", "max_pixels", source.name)
    if not len(source.times) or not source.bands:
        raise argument_error(f"{source.name}: nothing to explore (no date or no band "
                             f"selected)", "obj", source.name)
    bands = source.default_bands() if band is None else source.band_positions(band)
    t = 0 if time is None else nearest_time(source, time)
    return Explorer(source, bands, t, max_pixels=int(max_pixels), cmap=cmap,
                    percentiles=percentiles, size=size)
