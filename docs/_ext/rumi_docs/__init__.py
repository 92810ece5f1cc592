"""Sphinx extension generating the pages of the rumi_xarray site that follow the code.

At ``builder-inited`` (before Sphinx reads any page) it writes:

- ``api/``: one page per name of ``rumi_xarray.__all__`` (new public names appear
  without editing anything), the ``.rumi`` accessor, the error hierarchy, public
  submodules and the command line (from its argparse parser) (:mod:`rumi_docs.api`);
- ``examples/``: the notebooks, executed (reusing ``make test``'s executed
  copies when current), and a gallery of thumbnails (:mod:`rumi_docs.gallery`);
- ``benchmarks/generated/``: a page per benchmark with plots drawn from the
  results files (:mod:`rumi_docs.benchmarks`);
- ``guide/readme/``: README sections that the guide includes, and a page for each
  README section no guide page claims yet (:mod:`rumi_docs.readme`).

Every generated folder is listed in ``.gitignore`` and rewritten on each build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

from rumi_docs import api, benchmarks, gallery, readme

LOG = logging.getLogger(__name__)


def _generate(app: Sphinx) -> None:
    docs = Path(app.srcdir)
    root = docs.parent
    for step, write in (("API reference", api.write), ("README sections", readme.write),
                        ("benchmark pages", benchmarks.write), ("notebooks", gallery.write)):
        LOG.info("rumi_docs: generating the %s", step)
        write(root, docs)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the generators with Sphinx."""
    app.connect("builder-inited", _generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
