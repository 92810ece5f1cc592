"""Ground truth the tests compare with: the file as librumi's plain ``rumi.read`` returns it.

Every test module that checks values reads the same file through ``rumi.read``
here, never through rumi_xarray, so an error in the package cannot hide in its
own expected output. The sidecar helpers read the ``.aux.json`` file itself,
as any other program (``jq``, another language) would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import rumi

#: Every file read whole, in the order rumi_xarray's ``band_data`` has.
PATTERN = "t b y x"


def read(path: str | os.PathLike[str], header: bytes | None = None, **selection: Any
         ) -> np.ndarray:
    """Return the file as plain librumi reads it, ``(time, band, y, x)``.

    Parameters
    ----------
    path : str or path-like
        A local path or a URL librumi reads.
    header : bytes, optional
        The file's header (what a catalog holds); read from the file when omitted.
    **selection
        ``rumi.read``'s own ``time=``, ``bands=`` and ``window=``; the whole file without.
    """
    source = os.fspath(path)
    if header is None:
        header = rumi.info(source=source).header
    return rumi.read(source, header, pattern=PATTERN, **selection)


def stored_dtype(path: str | os.PathLike[str]) -> np.dtype:
    """Return the dtype of the samples the file stores (librumi's own word)."""
    return np.dtype(rumi.info(source=os.fspath(path)).dtype.name)


def strict_json(text: str) -> Any:
    """Parse JSON as jq and other languages do: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not valid JSON")

    return json.loads(text, parse_constant=refuse)


def sidecar(path: str | os.PathLike[str]) -> dict:
    """The sidecar's content, with its "nan"/"inf"/"-inf" numbers as floats.

    Its digests (of the file's labels and of its own content, which every sidecar
    ``to_rumi`` writes holds; tests/test_integrity.py checks what they protect) are left
    out.
    """
    content = strict_json(Path(f"{os.fspath(path)}.aux.json").read_text())
    assert content.pop("digest").startswith("sha256:")
    assert content.pop("labels_digest").startswith("sha256:")
    return {k: float(v) if k in ("nodata", "scale_factor", "add_offset")
            and isinstance(v, str) else v for k, v in content.items()}
