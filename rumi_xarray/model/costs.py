"""What a read costs, planned without I/O: the report ``explain()`` returns."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rumi_xarray.formatting import human_size


@dataclass(frozen=True)
class Explanation:
    """What reading an object would cost, planned by librumi without I/O.

    Attributes
    ----------
    calls : int
        Native read calls (one per chunk of a dask array, one per access of a
        lazily indexed one, each one plan and one transport submission).
    items : int
        Windows across those calls.
    frames : int
        Frames the calls decode.
    compressed_bytes : int
        Bytes fetched from storage (sum of planned ranges).
    decoded_bytes : int
        Bytes the calls return.
    ranges : int
        Byte ranges planned (the transport coalesces neighbours into fewer
        requests).
    tables : tuple of str
        For cubes over catalog tables on disk: what opening read from each
        table, what it left there, and that tasks read their own rows.
    overviews : tuple of str
        The overview levels read instead of full resolution
        (``overview_level=``, or a resolution a catalog picked), with how many
        files each; empty when every read is at full resolution.

    Examples
    --------
    >>> ds = xr.open_dataset("scene.rumi", engine="rumi")
    >>> cost = ds.band_data.isel(time=0).rumi.explain()
    >>> cost.calls, cost.frames
    (1, 16)
    >>> print(cost)
    1 native read call(s), 1 window(s), 16 frame(s): ... -> 128.0 KiB decoded
    """

    calls: int
    items: int
    frames: int
    compressed_bytes: int
    decoded_bytes: int
    ranges: int
    tables: tuple[str, ...] = ()
    overviews: tuple[str, ...] = ()

    @staticmethod
    def total(parts: Sequence[Explanation]) -> Explanation:
        """Return the cost of doing every part (a batch read in several pieces).

        Parameters
        ----------
        parts : sequence of Explanation

        Returns
        -------
        Explanation
        """
        return Explanation(
            calls=sum(p.calls for p in parts), items=sum(p.items for p in parts),
            frames=sum(p.frames for p in parts),
            compressed_bytes=sum(p.compressed_bytes for p in parts),
            decoded_bytes=sum(p.decoded_bytes for p in parts),
            ranges=sum(p.ranges for p in parts),
            tables=tuple(dict.fromkeys(t for p in parts for t in p.tables)),
            overviews=tuple(dict.fromkeys(o for p in parts for o in p.overviews)))

    def __str__(self) -> str:
        text = (f"{self.calls} native read call(s), {self.items} window(s), {self.frames} "
                f"frame(s): {human_size(self.compressed_bytes)} compressed in {self.ranges} "
                f"range(s) -> {human_size(self.decoded_bytes)} decoded")
        return "\n".join((text, *self.overviews, *self.tables))

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # IPython and Jupyter show the sentence ``print`` shows, not the dataclass fields
        # (``repr`` keeps those, for debugging).
        printer.text(str(self))

    def _repr_html_(self) -> str:
        # Notebooks render HTML first: the same sentence, preformatted so line breaks stay.
        return f"<pre>{html.escape(str(self))}</pre>"


def overview_lines(cubes: Iterable[Any]) -> tuple[str, ...]:
    """Return what ``explain()`` says of the overview levels these cubes read.

    One line per level: its factor, how many files, the first of them. A
    cube over a catalog table on disk is judged by its first scene (every
    scene of such a cube is read at one level), without reading its rows.

    Parameters
    ----------
    cubes : iterable of Cube

    Returns
    -------
    tuple of str
        Empty when everything is read at full resolution.
    """
    levels: dict[tuple[int, int], tuple[int, str]] = {}
    for cube in cubes:
        scenes = cube.scenes
        known = scenes if isinstance(scenes, (tuple, list)) else scenes[:1]
        for scene in known:
            if scene.overview is None:
                continue
            count, first = levels.get(scene.overview, (0, scene.name))
            extra = 1 if isinstance(scenes, (tuple, list)) else len(scenes)
            levels[scene.overview] = (count + extra, min(first, scene.name))
    return tuple(f"reads overview level {level} (factor {factor}) of {count} file(s), not "
                 f"full resolution: {first}{', ...' if count > 1 else ''}"
                 for (level, factor), (count, first) in sorted(levels.items()))
