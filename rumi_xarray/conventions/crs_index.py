"""A CRS-aware xarray index on ``spatial_ref``: xarray itself refuses to mix CRSs.

``xr.open_mfdataset(files, engine="rumi")``, ``xr.concat``, ``xr.merge``,
``xr.combine_by_coords`` and arithmetic all align their inputs first, and
alignment compares every index the inputs share. x/y coordinates are plain
numbers: two files in different CRSs whose grids overlap numerically would be
outer-joined (or, on identical numbers, silently merged) and labelled with the
first file's CRS. The scalar ``spatial_ref`` coordinate therefore carries a
:class:`RumiCRSIndex` (the idea of xproj's ``CRSIndex``): alignment asks it
whether two inputs are equal, and when their CRSs differ it is asked to join
them, which it refuses with :class:`~rumi_xarray.errors.RumiCRSMismatchError`
pointing to ``rx.open_stac`` for reprojection.

The index sits on the scalar coordinate, not on x/y: x/y keep xarray's
``PandasIndex``, so Rumi data still align exactly with rioxarray's or any
other array's coordinates (an index type on x/y of our own would make xarray
refuse to align them with other libraries' arrays). Data without the index
(from another reader, or after ``rio.write_crs``) align as before.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import xarray as xr
from xarray import Index

from rumi_xarray.errors import RumiCRSMismatchError

__all__ = ["RumiCRSIndex", "attach"]


@functools.lru_cache(maxsize=64)
def _same_crs(a: str, b: str) -> bool:
    """Return whether two WKT strings describe the same CRS (pyproj's equality)."""
    from pyproj import CRS

    try:
        return bool(CRS.from_wkt(a) == CRS.from_wkt(b))
    except Exception:  # unparsable text: only identical text is the same CRS
        return False


def _label(attrs: Mapping[Hashable, Any], wkt: str) -> str:
    """Return a short name of the CRS for messages: EPSG code, else its WKT name."""
    epsg = attrs.get("epsg")
    if epsg is not None:
        return f"EPSG:{int(epsg)}"
    named = re.match(r'\s*\w+\[\s*"([^"]*)"', wkt)
    return named.group(1) if named else wkt[:60]


class RumiCRSIndex(Index):
    """The CRS of a scalar grid-mapping coordinate, compared when xarray aligns.

    Parameters
    ----------
    variable : xarray.Variable
        The scalar ``spatial_ref`` variable (``crs_wkt`` or ``spatial_ref``
        attribute).
    name : str
        Its coordinate name.
    source : str, optional
        The file it describes, for messages.
    """

    def __init__(self, variable: xr.Variable, name: Hashable, source: str | None = None
                 ) -> None:
        attrs = variable.attrs
        self.wkt = str(attrs.get("crs_wkt") or attrs.get("spatial_ref") or "")
        self.label = _label(attrs, self.wkt)
        self.name = name
        self.source = source
        self._variable = variable

    @classmethod
    def from_variables(cls, variables: Mapping[Any, xr.Variable], *,
                       options: Mapping[str, Any]) -> RumiCRSIndex:
        """Build the index of one scalar grid-mapping coordinate (``set_xindex``)."""
        if len(variables) != 1:
            raise RumiCRSMismatchError("a RumiCRSIndex is built from one scalar coordinate")
        ((name, variable),) = variables.items()
        if variable.ndim != 0:
            raise RumiCRSMismatchError(
                f"a RumiCRSIndex needs a scalar coordinate, {name!r} has dims {variable.dims}")
        return cls(variable, name, options.get("source"))

    def create_variables(self, variables: Mapping[Any, xr.Variable] | None = None
                         ) -> dict[Hashable, xr.Variable]:
        """Return the coordinate variable (kept by the index, so it survives joins)."""
        if variables:
            return dict(variables)
        return {self.name: self._variable.copy(deep=False)}

    def same_crs(self, other: RumiCRSIndex) -> bool:
        """Return whether ``other`` describes the same CRS."""
        return self.wkt == other.wkt or _same_crs(self.wkt, other.wkt)

    def equals(self, other: Index, *, exclude: frozenset[Hashable] | None = None) -> bool:
        """Return whether ``other`` is a CRS index of the same CRS."""
        return isinstance(other, RumiCRSIndex) and self.same_crs(other)

    def join(self, other: Index, how: str = "inner") -> RumiCRSIndex:
        """Refuse to join different CRSs: xarray calls this only when they differ."""
        if isinstance(other, RumiCRSIndex) and self.same_crs(other):
            return self
        raise mismatch(self, other)

    @classmethod
    def concat(cls, indexes: Sequence[RumiCRSIndex], dim: Hashable,
               positions: Iterable[Iterable[int]] | None = None) -> RumiCRSIndex:
        """Keep one scalar CRS when ``xr.concat(..., coords="all")`` concatenates it.

        xarray then recreates the coordinate from the first input's scalar
        variable: the CRS stays a scalar instead of growing the concatenated
        dimension. Different CRSs are refused.
        """
        first = indexes[0]
        for other in indexes[1:]:
            if not first.same_crs(other):
                raise mismatch(first, other)
        return first

    def reindex_like(self, other: Index, **kwargs: Any) -> dict[Hashable, Any]:
        """Return no indexer: the index has no dimension to reindex."""
        if not (isinstance(other, RumiCRSIndex) and self.same_crs(other)):
            raise mismatch(self, other)
        return {}

    def to_pandas_index(self) -> pd.Index:
        """Return the coordinate's one value (``Dataset.indexes`` needs a pandas index)."""
        return pd.Index([self._variable.values.item()], name=self.name)

    def _repr_inline_(self, max_width: int) -> str:
        return f"{type(self).__name__} ({self.label})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label})"


def _crs_argument(index: RumiCRSIndex) -> str:
    """Return a ``crs=`` argument pyproj accepts for the CRS: its authority code when it has one.

    A CRS with no code (a custom WKT, named e.g. ``unknown``) cannot be passed by
    name, so the argument is left for the user: ``crs=<target CRS>``.
    """
    if index.label.startswith("EPSG:"):
        return f"crs={index.label!r}"
    from pyproj import CRS

    try:
        authority = CRS.from_wkt(index.wkt).to_authority()
    except Exception:  # unparsable WKT: no code to suggest
        authority = None
    if authority:
        return f"crs={':'.join(authority)!r}"
    return "crs=<target CRS>"


def mismatch(a: RumiCRSIndex, b: Any) -> RumiCRSMismatchError:
    """Return the error for aligning or combining data in two CRSs.

    Parameters
    ----------
    a, b : RumiCRSIndex

    Returns
    -------
    RumiCRSMismatchError
    """
    def named(index: Any) -> str:
        label = getattr(index, "label", repr(index))
        source = getattr(index, "source", None)
        return f"{source} ({label})" if source else label

    err = RumiCRSMismatchError(
        f"cannot align or combine data in different CRSs: {named(a)} and {named(b)}; xarray "
        f"would join their x/y coordinates as if they were one grid and label the result "
        f"with one CRS. Reproject them onto one grid instead, e.g. "
        f"rx.open_stac(rx.to_stac(files), {_crs_argument(a)}, resolution=...) (or "
        f".odc.reproject/.rio.reproject each one before combining)")
    err.source = a.source
    return err


def attach(ds: xr.Dataset, name: str, source: str | None) -> xr.Dataset:
    """Return ``ds`` with a :class:`RumiCRSIndex` on its scalar ``name`` coordinate.

    Parameters
    ----------
    ds : xarray.Dataset
    name : str
        The grid-mapping coordinate (``spatial_ref``); nothing happens when
        it is absent (no georeferencing, or dropped) or not a coordinate.
    source : str, optional
        The file, named in mismatch errors.

    Returns
    -------
    xarray.Dataset
    """
    if name not in ds.coords or ds.variables[name].ndim != 0 or name in ds.xindexes:
        return ds
    return ds.set_xindex(name, RumiCRSIndex, source=source)
