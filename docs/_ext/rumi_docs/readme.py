"""README sections in the guide: the ones a page includes, and pages for new ones.

The README keeps its first screen, a short tour and links; the guide pages are
the long form. Sections other branches add to the README are not lost: a
section whose title matches a guide page's pattern (``CLAIMS``) is written to
``guide/readme/_<page>.md`` for that page to include (empty when there is none),
and any other section the README does not keep (``KEPT``) becomes a guide page
of its own, listed by ``guide/readme/_toc.md``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

#: README sections that are the README's own (its tour and links), not guide pages.
KEPT = {"What it is", "Documentation"}
#: Guide page (the include's name) -> pattern of the README section titles it includes.
CLAIMS = {"ml-chips": re.compile(r"chip|torch|machine learning|models?\b", re.IGNORECASE)}
_SECTION = re.compile(r"(?m)^## (.+?)\s*$")
#: A Markdown link or image to a relative path (not a URL, not an anchor).
_RELATIVE_LINK = re.compile(r"(!?)\[([^\]]*)\]\((?![a-z][a-z0-9+.-]*:|#)([^)\s]+)\)")


def sections(readme: str) -> list[tuple[str, str]]:
    """Return ``(title, body)`` of every ``##`` section of the README, in order."""
    found = list(_SECTION.finditer(readme))
    return [(m.group(1), readme[m.end():found[i + 1].start() if i + 1 < len(found) else None])
            for i, m in enumerate(found)]


def slug(title: str) -> str:
    """Return a file name for a section title."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"


def portable(body: str) -> str:
    """Return a README body whose relative links (README-relative paths) are plain text.

    Paths such as ``benchmarks/results/x.md`` resolve from the README, not from a
    docs page: a link would be a broken reference, so it becomes the text and the
    path in code.
    """
    return _RELATIVE_LINK.sub(lambda m: f"{m.group(2)} (`{m.group(3)}`)", body)


def write(root: Path, docs: Path) -> None:
    """Write ``guide/readme/`` from the README under ``root``."""
    out = docs / "guide" / "readme"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    claimed: dict[str, list[str]] = {page: [] for page in CLAIMS}
    pages = []
    for title, body in sections((root / "README.md").read_text()):
        if title in KEPT:
            continue
        page = next((p for p, pattern in CLAIMS.items() if pattern.search(title)), None)
        if page is not None:
            claimed[page].append(f"## {title}\n{portable(body)}")
            continue
        name = f"readme-{slug(title)}"
        (out / f"{name}.md").write_text(
            f"# {title}\n\n*This section of the README has no guide page of its own yet.*\n"
            f"{portable(body)}")
        pages.append(name)
    for page, parts in claimed.items():
        (out / f"_{page}.md").write_text("\n".join(parts))
    toc = ("```{toctree}\n:maxdepth: 1\n\n" + "\n".join(f"readme/{p}" for p in pages)
           + "\n```\n") if pages else ""
    (out / "_toc.md").write_text(toc)
