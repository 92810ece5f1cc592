"""Check the built documentation site as a reader would get it (issue 24).

``make docs`` runs this after Sphinx. It fails when:

- a notebook page shows fewer figures than its executed notebook has image
  outputs, or an image it shows is missing or empty;
- the gallery (``examples/index.html``) or the home page lacks a notebook's thumbnail;
- a benchmark page shows no figure, or one whose file is missing;
- a name of ``rumi_xarray.__all__`` has no documented object (an anchor
  ``rumi_xarray.<name>``) in the API reference.

With ``--screenshots DIR`` it also renders the home page and every notebook page
in headless Chromium (Debian's ``chromium``) to PNGs in DIR and fails when a
page's screenshot shows no figure: no band of 200 rows with at least 10 % strongly
coloured pixels (text, code and the theme stay under about 2 % in every band; a
figure fills its bands with colour). Without Chromium on the machine that
check says it is skipped, unless ``--require-chromium``.

Usage: ``python tools/check_docs.py [--screenshots DIR] [--require-chromium] HTML_DIR``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Rows per band, and the share of strongly coloured pixels in one band that only a
#: figure reaches (measured: text pages 1-2 % at most, figure bands 25-40 %).
BAND_ROWS = 200
MIN_FIGURE_BAND = 0.10


class _Page(HTMLParser):
    """The images and element ids of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "img" and found.get("src"):
            self.images.append(str(found["src"]))
        if found.get("id"):
            self.ids.add(str(found["id"]))


def parse(path: Path) -> _Page:
    """Return the images and ids of the HTML page at ``path``."""
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _missing_images(html: Path, page: _Page) -> list[str]:
    problems = []
    for src in page.images:
        if src.startswith("data:"):
            continue
        target = (html.parent / src.split("#")[0].split("?")[0]).resolve()
        if not target.is_file() or target.stat().st_size == 0:
            problems.append(f"{html.name}: image {src} is missing or empty")
    return problems


def _content_images(page: _Page) -> list[str]:
    # The theme's own images (logos) live under _static/.
    return [s for s in page.images if "_static/" not in s]


def check_site(site: Path, notebooks_dir: Path = ROOT / "notebooks") -> list[str]:
    """Return what is wrong with the built site in ``site`` (empty when nothing is)."""
    import nbformat

    problems = []
    if not (site / "index.html").is_file():
        return [f"{site} holds no index.html: was the site built?"]
    home, gallery = parse(site / "index.html"), site / "examples" / "index.html"
    gallery_page = parse(gallery) if gallery.is_file() else _Page()
    if not gallery.is_file():
        problems.append("examples/index.html (the gallery) is missing")
    for source in sorted(notebooks_dir.glob("*.ipynb")):
        html = site / "examples" / f"{source.stem}.html"
        # Sphinx keeps the notebook it rendered, executed, as the page's source.
        executed = site / "_sources" / "examples" / f"{source.stem}.ipynb.txt"
        if not html.is_file():
            problems.append(f"{source.name} has no page examples/{html.name}")
            continue
        outputs = 0
        if executed.is_file():
            nb = nbformat.read(executed, as_version=4)
            outputs = sum("image/png" in o.get("data", {}) for c in nb.cells
                          if c.cell_type == "code" for o in c.get("outputs", []))
        else:
            problems.append(f"{source.name}: the site has no executed copy ({executed.name})")
        page = parse(html)
        shown = _content_images(page)
        if outputs == 0 or len(shown) < outputs:
            problems.append(f"examples/{html.name} shows {len(shown)} images, its executed "
                            f"notebook has {outputs} figures")
        problems += _missing_images(html, page)
        # Sphinx copies thumbnails/<name>.png to _images/<name>.png.
        thumb = f"/{source.stem}.png"
        if not any(s.endswith(thumb) for s in gallery_page.images):
            problems.append(f"the gallery has no thumbnail of {source.name}")
        if not any(s.endswith(thumb) for s in home.images):
            problems.append(f"the home page has no thumbnail of {source.name}")
    problems += _missing_images(site / "index.html", home)
    if gallery.is_file():
        problems += _missing_images(gallery, gallery_page)

    bench = sorted((site / "benchmarks" / "generated").glob("*.html"))
    if not bench:
        problems.append("no benchmark page was generated")
    for html in bench:
        page = parse(html)
        if not _content_images(page):
            problems.append(f"benchmarks/generated/{html.name} shows no plot")
        problems += _missing_images(html, page)

    import rumi_xarray

    documented: set[str] = set()
    for html in (site / "api").rglob("*.html"):
        documented |= parse(html).ids
    for name in rumi_xarray.__all__:
        if f"rumi_xarray.{name}" not in documented:
            problems.append(f"rumi_xarray.{name} is not documented in the API reference")
    return problems


def figure_bands(png: Path) -> tuple[int, float]:
    """Return how many bands of the image look like a figure, and the most colourful share.

    A band is ``BAND_ROWS`` rows; colourful pixels are saturated and not dark.
    """
    import numpy as np
    from PIL import Image

    hsv = np.asarray(Image.open(png).convert("RGB").convert("HSV"), dtype=np.float32)
    colourful = (hsv[..., 1] > 80) & (hsv[..., 2] > 60)
    rows = colourful.shape[0] // BAND_ROWS * BAND_ROWS
    shares = colourful[:rows].reshape(-1, BAND_ROWS, colourful.shape[1]).mean(axis=(1, 2))
    return int((shares >= MIN_FIGURE_BAND).sum()), float(shares.max())


def chromium() -> str | None:
    """Return the Chromium executable on this machine, if any."""
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)


def screenshot(browser: str, page: Path, png: Path, height: int) -> None:
    """Render ``page`` in headless Chromium to ``png`` (1280 pixels wide)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                        f"--screenshot={png}", f"--window-size=1280,{height}",
                        page.resolve().as_uri()], check=True, capture_output=True,
                       timeout=120)


def check_screenshots(site: Path, out: Path, browser: str) -> list[str]:
    """Render the home page and every notebook page; return pages without a figure."""
    out.mkdir(parents=True, exist_ok=True)
    pages = [(site / "index.html", 2000)]
    pages += [(p, 8000) for p in sorted((site / "examples").glob("*.html"))
              if p.name != "index.html"]
    problems = []
    for page, height in pages:
        png = out / f"{page.relative_to(site).as_posix().replace('/', '-')}.png"
        screenshot(browser, page, png, height)
        bands, top = figure_bands(png)
        print(f"  {png}: {bands} bands of figures (most colourful band {top:.0%})", flush=True)
        if bands == 0:
            problems.append(f"{page.relative_to(site)} rendered without a visible figure "
                            f"(most colourful band {top:.1%}, {png})")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Check the site; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built HTML folder")
    parser.add_argument("--screenshots", type=Path, help="render pages to PNGs here")
    parser.add_argument("--require-chromium", action="store_true",
                        help="fail instead of skipping the screenshots without Chromium")
    args = parser.parse_args(argv)
    problems = check_site(args.site)
    if args.screenshots is not None:
        browser = chromium()
        if browser is not None:
            print(f"==> screenshots with {browser} into {args.screenshots}", flush=True)
            problems += check_screenshots(args.site, args.screenshots, browser)
        elif args.require_chromium:
            problems.append("no chromium on this machine (apt-get install chromium)")
        else:
            print("==> SKIPPED the screenshot check: no chromium on this machine")
    for problem in problems:
        print(f"FAILED {problem}", file=sys.stderr)
    if not problems:
        print(f"==> {args.site}: every notebook figure, thumbnail, benchmark plot and public "
              "name is on the built pages")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
