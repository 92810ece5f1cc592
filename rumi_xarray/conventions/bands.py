"""Bands: Rumi's band texts <-> xarray's ``band`` coordinate and its companions.

A Rumi file names every band with a free text, often several fields such as
``"B04, Red, 665nm"``. Read side, following stackstac and odc-stac: ``band``
holds a short unique name (the first field when those are unique, else the
whole text) so that ``sel(band="B04")`` works; fields are separated by commas
outside brackets, so ``"land cover (0 water, 1 forest)"`` is a single field,
its own short name. The whole text stays in
``band_text``, and ``common_name`` (STAC's electro-optical names: ``red``,
``nir``...) and ``center_wavelength`` (micrometres) are parsed from it when the
text carries them. Write side: the text of each band comes from
``band_text`` when present (so a round trip keeps the full text), else from
the ``band`` coordinate, GDAL band descriptions or the variable name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

#: STAC electro-optical extension common band names.
COMMON_NAMES = ("coastal", "blue", "green", "red", "yellow", "pan", "rededge", "rededge071",
                "rededge075", "rededge078", "nir", "nir08", "nir09", "cirrus", "swir16",
                "swir22", "lwir", "lwir11", "lwir12")
_WAVELENGTH = re.compile(r"(\d+(?:\.\d+)?)\s*(nm|um|µm|μm)\b", re.IGNORECASE)


@dataclass(frozen=True)
class BandCoords:
    """The values of ``band`` and its companion coordinates, parsed from band texts.

    One entry per band: ``names`` label ``band`` (and name the variables of
    ``band_as_variable=True``), ``texts`` ``band_text``, ``common_names``
    ``common_name`` and ``wavelengths`` ``center_wavelength`` (:meth:`coords`).

    Attributes
    ----------
    names : tuple of str
        Short unique names.
    texts : tuple of str
        The texts as stored.
    common_names : tuple of str
        STAC common name, ``""`` where the text names none.
    wavelengths : tuple of float
        Centre wavelength in micrometres, NaN where the text gives none.
    """

    names: tuple[str, ...]
    texts: tuple[str, ...]
    common_names: tuple[str, ...]
    wavelengths: tuple[float, ...]

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> BandCoords:
        """Parse band texts.

        Parameters
        ----------
        texts : sequence of str

        Returns
        -------
        BandCoords
        """
        texts = tuple(str(t) for t in texts)
        fields = [top_level_fields(t) for t in texts]
        first = [f[0] for f in fields]
        unique = len(set(first)) == len(first) and all(first)
        names = tuple(first) if unique else texts
        numbers = band_numbers(texts)
        if numbers is not None:
            # Variables of unnamed bands are named as rioxarray's band_as_variable names them.
            names = tuple(f"band_{n}" for n in numbers)
        return cls(names=names, texts=texts,
                   common_names=tuple(_common_name(f) for f in fields),
                   wavelengths=tuple(_wavelength(t) for t in texts))

    def coords(self) -> dict[Hashable, xr.Variable]:
        """Return ``band`` and its companion coordinates along ``band``.

        Returns
        -------
        dict of xarray.Variable
            ``band`` always; ``band_text`` when it differs from ``band``;
            ``common_name`` and ``center_wavelength`` when any band has one.
        """
        numbers = band_numbers(self.texts)
        if numbers is not None:
            # Unnamed bands: rioxarray's integer labels, so .sel(band=1) works alike.
            return {"band": xr.Variable("band", np.array(numbers, dtype=np.int64))}
        out: dict[Hashable, xr.Variable] = {
            "band": xr.Variable("band", np.array(self.names, dtype=str))}
        if self.names != self.texts:
            out["band_text"] = xr.Variable("band", np.array(self.texts, dtype=str),
                                           {"long_name": "band text as stored"})
        if any(self.common_names):
            out["common_name"] = xr.Variable("band", np.array(self.common_names, dtype=str),
                                             {"long_name": "STAC common band name"})
        if any(not math.isnan(w) for w in self.wavelengths):
            out["center_wavelength"] = xr.Variable(
                "band", np.array(self.wavelengths, dtype=np.float64),
                {"long_name": "centre wavelength", "units": "um"})
        return out


def band_numbers(texts: Sequence[str]) -> list[int] | None:
    """Return the band numbers of unnamed bands, or None when the bands have names.

    Bands without names are stored as their numbers, ``"1"``, ``"2"``...
    (rioxarray's labels, or a selection of them): texts that are all
    canonical positive decimal integers read back as integers.

    Parameters
    ----------
    texts : sequence of str

    Returns
    -------
    list of int or None
    """
    if not texts or not all(t.isascii() and t.isdigit() and t[0] != "0" for t in texts):
        return None
    return [int(t) for t in texts]


#: Texts that describe the variable ``band_data`` rather than a band: its CF
#: ``long_name`` and its name, which ``rio.to_raster`` writes as the description of
#: every band (from ``long_name``, else the variable name).
#: ``long_name`` of ``band_data`` (CF asks one of every variable) when its bands have
#: no one text of their own.
BAND_DATA_LONG_NAME = "band data"
VARIABLE_DESCRIPTIONS = (BAND_DATA_LONG_NAME, "band_data")

#: Brackets whose commas belong to the text inside them, not to the field list.
_OPENING = {"(": ")", "[": "]", "{": "}"}


def top_level_fields(text: str) -> list[str]:
    """Split a band text into its comma-separated fields, stripped.

    Commas inside brackets do not split: ``"land cover (0 water, 1 forest)"``
    is one field, ``"B04, Red, 665nm"`` three. An unbalanced closing bracket
    is ordinary text; an unclosed opening one keeps the rest in its field.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of str
        At least one field (``[""]`` for an empty text).
    """
    fields: list[str] = []
    closers: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char in _OPENING:
            closers.append(_OPENING[char])
        elif closers and char == closers[-1]:
            closers.pop()
        elif char == "," and not closers:
            fields.append(text[start:i].strip())
            start = i + 1
    fields.append(text[start:].strip())
    return fields


def short_name(text: str) -> str:
    """Return the first top-level field of a band text (``"B04"`` of ``"B04, Red, 665nm"``).

    Parameters
    ----------
    text : str

    Returns
    -------
    str
    """
    return top_level_fields(text)[0]


def _common_name(fields: Sequence[str]) -> str:
    for field in fields:
        word = field.strip().lower().replace(" ", "")
        if word in COMMON_NAMES:
            return word
    return ""


def _wavelength(text: str) -> float:
    match = _WAVELENGTH.search(text)
    if match is None:
        return math.nan
    value = float(match.group(1))
    return value / 1000.0 if match.group(2).lower() == "nm" else value


# --- write side -----------------------------------------------------------------


def band_texts(da: xr.DataArray, where: str) -> list[str]:
    """Return the text to store for each band of ``da`` (dims include ``band``).

    In order of preference: the ``band_text`` coordinate (what rumi_xarray
    opened), the ``band`` coordinate when it holds names, GDAL band
    descriptions (rioxarray's ``long_name``) for numbered bands, the variable
    name for a single band, else the band numbers ``"1"``, ``"2"``... (which
    read back as rioxarray's integer labels).

    Parameters
    ----------
    da : xarray.DataArray
    where : str
        Named in errors.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        Empty, NUL-holding or repeated names.
    """
    n = da.sizes["band"]
    texts: list[str] | None = None
    if "band_text" in da.coords and da["band_text"].dims == ("band",):
        texts = [_text(v) for v in da["band_text"].values.tolist()]
    elif "band" in da.coords and da["band"].ndim <= 1:
        values = np.atleast_1d(da["band"].values).tolist()
        numbered = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                       for v in values)
        described = descriptions(da) if numbered else None
        texts = described or [_text(v) for v in values]
    elif n == 1 and isinstance(da.name, str) and da.name and da.name != "band_data":
        texts = [da.name]
    if texts is None:
        texts = [str(i + 1) for i in range(n)]
    check_band_texts(texts, where)
    return texts


def descriptions(da: xr.DataArray) -> list[str] | None:
    """Return GDAL band descriptions of a rioxarray array, or None without any.

    rioxarray puts one description per band in ``long_name`` (one text when
    every band has the same). Bands without one get their number; a
    description used by several bands gets `` (<n>)`` appended so names stay
    unique. The descriptions ``rio.to_raster`` writes on every band of our
    ``band_data`` (its ``long_name``, or its name) describe the variable,
    not its bands: they label nothing (see :data:`VARIABLE_DESCRIPTIONS`).

    Parameters
    ----------
    da : xarray.DataArray

    Returns
    -------
    list of str or None
    """
    n = da.sizes.get("band", 1)
    described: Any = da.attrs.get("long_name")
    if isinstance(described, str) and described.strip() in VARIABLE_DESCRIPTIONS:
        return None
    if isinstance(described, str):
        # rioxarray gives one text when every band has the same description.
        described = [described] * n
    if not isinstance(described, (list, tuple)) or len(described) != n:
        return None
    if not any(d is not None and str(d).strip() for d in described):
        return None
    names = [str(d).strip() if d is not None and str(d).strip() else str(i + 1)
             for i, d in enumerate(described)]
    repeated = {name for name in names if names.count(name) > 1}
    return [f"{name} ({i + 1})" if name in repeated else name for i, name in enumerate(names)]


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def check_band_texts(texts: Sequence[str], where: str) -> None:
    """Raise ``ValueError`` for band texts Rumi cannot store.

    Parameters
    ----------
    texts : sequence of str
    where : str
    """
    for i, name in enumerate(texts):
        if not name:
            raise ValueError(f"{where}: band {i} has an empty name; Rumi names every band")
        if "\x00" in name:
            raise ValueError(f"{where}: band {i} name {name!r} contains a NUL character")
    pair = first_repeat(texts)
    if pair is not None:
        raise ValueError(f"{where}: bands {pair[0]} and {pair[1]} are both named "
                         f"{texts[pair[1]]!r}; Rumi band names are unique "
                         f"(assign_coords(band=[...]) to rename)")


def first_repeat(names: Sequence[str]) -> tuple[int, int] | None:
    """Return the positions of the first name that comes again, or None when all differ.

    Band texts and STAC item ids must be unique; both errors name the two
    positions.

    Parameters
    ----------
    names : sequence of str

    Returns
    -------
    tuple of int or None
        ``(first, again)``: where the name first came and where it came again.
    """
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            return seen[name], i
        seen[name] = i
    return None
