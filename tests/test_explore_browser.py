"""The explorer notebook in a real browser: Voila serves it, headless Chromium drives it.

``voila notebooks/explore.ipynb`` runs the gallery notebook in a kernel of this
venv on 127.0.0.1; playwright drives Debian's Chromium (``/usr/bin/chromium``;
playwright downloads no browser here) through what a person does: the explorer
appears, the **Whole image** button, the date slider moved with the keyboard,
a click on the map. Each step is checked on the page itself: the explorer
writes the facts of what it shows into ``data-`` attributes (the date, the
map's level and stride, the clicked pixel, the number of points plotted), and
the images change. Skipped, saying why, where Chromium, playwright or Voila
is missing.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import RangeHTTPServer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "explore.ipynb"
#: Where a screenshot of the page after the click is kept for a reviewer.
SCREENSHOT = ROOT / "build" / "browser" / "explore.png"
#: Seconds Voila may take to run the notebook and show its last output: about 20 on two idle
#: cores, several times that on a loaded machine (the budget of tests/test_notebooks.py).
NOTEBOOK_TIMEOUT = 240
#: Seconds one interaction (a read and a redraw in the kernel) may take to show.
STEP_TIMEOUT = 30
#: The notebook's series: dates, and bands of its first explorer's composite.
N_DATES, N_LINES = 12, 3


def chromium() -> str | None:
    """Return Debian's Chromium, or None."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(chromium() is None,
                       reason="no Chromium at /usr/bin/chromium: apt-get install -y chromium"),
]
playwright = pytest.importorskip("playwright.sync_api",
                                 reason="playwright is not installed (the test extra)")
pytest.importorskip("voila", reason="voila is not installed (the test extra)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def files_server(tmp_path: Path) -> Iterator[RangeHTTPServer]:
    """Serve the notebook's working folder over HTTP (range requests), before it is written."""
    (tmp_path / "work").mkdir()
    with RangeHTTPServer(tmp_path / "work") as server:
        yield server


@pytest.fixture
def voila(tmp_path: Path, files_server: RangeHTTPServer) -> Iterator[str]:
    """Serve the explorer notebook with Voila on 127.0.0.1; yield its URL.

    The notebook also explores its series file as a URL, from ``files_server``.
    """
    port = free_port()
    log = (tmp_path / "voila.log").open("w")
    env = {**os.environ, "RUMI_NOTEBOOK_DIR": str(tmp_path / "work"), "MPLBACKEND": "Agg",
           "RUMI_EXPLORE_URL": files_server.url("series.rumi")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "voila", str(NOTEBOOK), "--no-browser", f"--port={port}",
         "--Voila.ip=127.0.0.1", "--show_tracebacks=True"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("voila did not start:\n"
                                         + (tmp_path / "voila.log").read_text()) from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()  # Voila shuts its kernel down on SIGTERM
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def attrs(locator) -> dict[str, str]:
    """Return the ``data-`` attributes of the element a locator finds."""
    return locator.evaluate("e => Object.assign({}, e.dataset)")


def wait_for_data(page, cls: str, condition: str, timeout: float = STEP_TIMEOUT,
                  nth: int = 0) -> None:
    """Wait until the ``nth`` explorer's element of class ``cls`` meets a JS ``condition``.

    The element is looked up afresh each time: an HTML widget replaces its content
    when its value changes, so a handle on the old element would never change.
    ``condition`` is an expression of ``d``, the element's ``dataset``.
    """
    page.wait_for_function(
        f"() => {{ const x = document.querySelectorAll('.rumi-explore')[{nth}];"
        f" const e = x && x.querySelector('.{cls}');"
        f" if (!e) return false; const d = e.dataset; return {condition}; }}",
        timeout=timeout * 1000)


def click_map(page, nth: int, across: float, down: float) -> tuple[int, int]:
    """Click the ``nth`` explorer's map in the middle of a sample; return the pixel under it."""
    explorer = page.locator(".rumi-explore").nth(nth)
    image = explorer.locator("img.rumi-explore-map")
    shown = attrs(explorer.locator(".rumi-explore-map-info"))
    box = image.bounding_box()
    assert box is not None
    height, width, step = (int(shown[k]) for k in ("height", "width", "step"))
    i, j = math.floor(down * height), math.floor(across * width)
    image.click(position={"x": (j + 0.5) * box["width"] / width,
                          "y": (i + 0.5) * box["height"] / height})
    row, col = int(shown["row0"]) + i * step, int(shown["col0"]) + j * step
    try:
        wait_for_data(page, "rumi-explore-series-info",
                      f"d.row === '{row}' && d.col === '{col}'", nth=nth)
    except playwright.TimeoutError:
        info = attrs(explorer.locator(".rumi-explore-series-info"))
        raise AssertionError(f"a click on explorer {nth} did not select pixel "
                             f"{(row, col)}: {info}") from None
    return row, col


def test_slider_and_click_in_voila_plot_the_pixels_series(voila: str, tmp_path: Path,
                                                         files_server: RangeHTTPServer) -> None:
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            # Voila streams the page while the notebook runs: wait for its outputs, not "load".
            page.goto(voila, wait_until="commit", timeout=NOTEBOOK_TIMEOUT * 1000)
            # The notebook has run when its last explorer (the URL's) is shown.
            try:
                page.wait_for_selector(".rumi-explore >> nth=2",
                                       timeout=NOTEBOOK_TIMEOUT * 1000)
            except playwright.TimeoutError:
                raise AssertionError(f"the notebook did not finish in Voila:\n"
                                     f"{page.inner_text('body')[-3000:]}") from None
            explorer = page.locator(".rumi-explore").first
            map_info = explorer.locator(".rumi-explore-map-info")
            series_info = explorer.locator(".rumi-explore-series-info")
            image = explorer.locator("img.rumi-explore-map")

            # The whole image: 512 x 512 pixels shown as 256 x 256 samples (max_pixels=256).
            explorer.get_by_role("button", name="Whole image").click()
            wait_for_data(page, "rumi-explore-map-info", "d.height === '256' && d.step === '2'")

            # The date slider, moved one date on with the keyboard: the map shows that date.
            before = attrs(map_info)
            old_map = image.get_attribute("src")
            handle = explorer.locator(".rumi-explore-time .noUi-handle")
            handle.focus()
            handle.press("ArrowRight")
            t = int(before["t"]) + 1
            wait_for_data(page, "rumi-explore-map-info", f"d.t === '{t}'")
            shown = attrs(map_info)
            readout = explorer.locator(".rumi-explore-time .widget-readout").inner_text()
            assert shown["date"] == readout.strip() != before["date"]
            page.wait_for_function(
                "old => document.querySelector('.rumi-explore img.rumi-explore-map')"
                ".getAttribute('src') !== old", arg=old_map, timeout=STEP_TIMEOUT * 1000)

            # A click on the map, about 30 % across and 60 % down, in the middle of a
            # sample: the pixel under it is selected.
            row, col = click_map(page, 0, 0.3, 0.6)
            series = attrs(series_info)
            # One point per date for each band of the composite, from one read (none when
            # the tile cache held the cell already).
            assert (int(series["points"]), int(series["lines"])) == (N_DATES, N_LINES)
            assert int(series["calls"]) <= 1
            plot = explorer.locator("img.rumi-explore-series")
            assert plot.evaluate("e => e.naturalWidth") > 300
            text = series_info.inner_text()
            assert f"Pixel row {row}, column {col}" in text and f"{N_DATES} points" in text
            # The catalog's explorer (one file per date) and the URL's: a click plots the
            # pixel's NIR at every date. The URL's map came over HTTP when the notebook ran;
            # its click does too, unless the tile cache holds that cell already (no call).
            assert files_server.requests("series.rumi"), "the URL was never read over HTTP"
            for nth in (1, 2):
                files_server.reset()
                click_map(page, nth, 0.7, 0.25)
                info = attrs(page.locator(".rumi-explore").nth(nth)
                             .locator(".rumi-explore-series-info"))
                assert (int(info["points"]), int(info["lines"])) == (N_DATES, 1), info
                assert int(info["calls"]) <= 1
                over_http = files_server.requests("series.rumi")
                if nth == 1:
                    assert not over_http, "the catalog's click read the series file's URL"
                else:
                    assert over_http or int(info["calls"]) == 0, info
            assert not errors, errors
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=False)
        finally:
            browser.close()
