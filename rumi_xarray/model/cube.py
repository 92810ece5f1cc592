"""Scenes and cubes: what to read, described without reading anything.

A :class:`Scene` is one Rumi source and the header that indexes its frames; a
:class:`Cube` is one or more scenes of the same frame grid stacked along time
(a single file is a cube of one scene). Both hold only picklable descriptions
(paths, URLs, header bytes), so they travel inside dask graphs and to workers.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from rumi_xarray.model.grid import Grid
from rumi_xarray.sources.redact import redact


@dataclass(frozen=True)
class Scene:
    """One Rumi source and the header that indexes it.

    Parameters
    ----------
    source : str, bytes or range source
        Local path, URL librumi's transport resolves, the file content, or a
        source read through fsspec byte ranges (anything with a ``name``).
    header : bytes
        The external header (``rumi.info(...).header``).
    catalog_row : int or str, optional
        Catalog row the scene came from, named in error messages (a table on
        disk names it as ``"<row> of <file>"``).
    stamp : tuple of int, optional
        ``(size, mtime_ns, inode)`` of a local file when it was opened, so
        that reading it after a rewrite raises instead of decoding new bytes
        with the old header.
    overview : tuple of int, optional
        ``(level, factor)`` when the source is an overview level of a file
        (``overview_level=``), said by ``explain()``.
    grid : Grid, optional
        The scene's own frame grid (from its header), for cubes whose scenes
        differ in time steps or frame layout (:attr:`Cube.ragged`); None
        when it is the cube's.
    """

    source: Any = field(repr=False)
    header: bytes = field(repr=False)
    catalog_row: int | str | None = None
    stamp: tuple[int, int, int] | None = field(default=None, repr=False)
    overview: tuple[int, int] | None = None
    grid: Grid | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        """Return a printable, credential-free name for messages and reprs."""
        return source_name(self.source)

    def describe(self) -> str:
        """Return the name, with the catalog row when there is one."""
        if self.catalog_row is None:
            return self.name
        return f"{self.name} (catalog row {self.catalog_row})"

    def __repr__(self) -> str:
        return f"Scene({self.describe()})"


def source_name(source: Any) -> str:
    """Return a printable, credential-free name of a source.

    Parameters
    ----------
    source : str, bytes or range source

    Returns
    -------
    str
    """
    if isinstance(source, str):
        return redact(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return f"<{len(source)} bytes in memory>"
    return str(getattr(source, "name", type(source).__name__))


@dataclass(frozen=True)
class Cube:
    """Scenes stacked along time, all sharing one pixel grid.

    Cube time step ``i`` is local step ``steps[i][1]`` of scene
    ``steps[i][0]``.

    Parameters
    ----------
    scenes : sequence of Scene
        A tuple, or a sequence that looks scenes up when they are used (a
        catalog table on disk, ``rumi_xarray.catalogs.index``).
    grid : Grid
        The grid every scene shares (the first scene's, when ``ragged``).
    steps : sequence of (int, int)
        ``(scene index, local time index)`` per cube time step: a tuple,
        :class:`UniformSteps` when every scene has the same steps, or
        :class:`RaggedSteps`.
    ragged : bool, default False
        Scenes may differ in their number of time steps and in their frame
        layout (series files of periods holding different numbers of dates);
        they share size, tiles, bands and dtype. Each scene's own grid is
        :meth:`scene_grid`, and a native call only ever reads scenes of one
        layout (``read_many`` needs them to share it).
    """

    scenes: Sequence[Scene]
    grid: Grid
    steps: Sequence[tuple[int, int]]
    ragged: bool = False

    @classmethod
    def single(cls, scene: Scene, grid: Grid) -> Cube:
        """Return the cube of one file.

        Parameters
        ----------
        scene : Scene
        grid : Grid

        Returns
        -------
        Cube
        """
        return cls((scene,), grid, tuple((0, t) for t in range(grid.time_count)))

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """Return ``(time, band, y, x)``."""
        g = self.grid
        return (len(self.steps), g.bands, g.height, g.width)

    @property
    def name(self) -> str:
        """Return a printable name for messages."""
        if len(self.scenes) == 1:
            return self.scenes[0].describe()
        return f"{len(self.scenes)} scenes ({self.scenes[0].describe()}, ...)"

    def scene_grid(self, scene: int) -> Grid:
        """Return the frame grid of one scene: its time steps and frame layout.

        Parameters
        ----------
        scene : int

        Returns
        -------
        Grid
            :attr:`grid` unless the cube is ragged.
        """
        if not self.ragged:
            return self.grid
        own = self.scenes[scene].grid
        return self.grid if own is None else own

    def layout(self, scene: int) -> tuple[Any, ...] | None:
        """Return what scenes read by one native call must share with this one.

        Parameters
        ----------
        scene : int

        Returns
        -------
        tuple or None
            The scene's :attr:`Grid.layout_key`; None when every scene of the
            cube shares one (not ragged), so that callers need not look
            scenes up.
        """
        return self.scene_grid(scene).layout_key if self.ragged else None

    def segments(self, times: np.ndarray) -> list[tuple[int, list[int], list[int]]]:
        """Split cube time steps by scene.

        Parameters
        ----------
        times : array of int
            Cube time indices, in output order.

        Returns
        -------
        list of (scene index, local times, output positions)
            In order of first appearance.
        """
        out: dict[int, tuple[list[int], list[int]]] = {}
        for pos, t in enumerate(times.tolist()):
            scene, local = self.steps[t]
            entry = out.setdefault(scene, ([], []))
            entry[0].append(local)
            entry[1].append(pos)
        return [(s, loc, pos) for s, (loc, pos) in out.items()]


class _Steps(Sequence[tuple[int, int]]):
    """``(scene, step)`` pairs computed from an index: the indexing both kinds share."""

    @abstractmethod
    def _step(self, i: int) -> tuple[int, int]:
        """Return the pair at ``i``, with ``0 <= i < len(self)``."""

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[int, int]]: ...

    def __getitem__(self, i: int | slice) -> tuple[int, int] | Sequence[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._step(i)


class UniformSteps(_Steps):
    """The time steps of scenes that all hold ``per_scene`` steps, computed, not stored.

    Equal to ``tuple((s, t) for s in range(scenes) for t in range(per_scene))``
    but a few bytes whatever the number of scenes, so a cube of a million
    scenes pickles small.

    Parameters
    ----------
    scenes : int
    per_scene : int
    """

    def __init__(self, scenes: int, per_scene: int) -> None:
        self.scenes = int(scenes)
        self.per_scene = int(per_scene)

    def __len__(self) -> int:
        return self.scenes * self.per_scene

    def _step(self, i: int) -> tuple[int, int]:
        return divmod(i, self.per_scene)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for s in range(self.scenes):
            for t in range(self.per_scene):
                yield (s, t)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        i = np.arange(len(self), dtype=np.int64)
        out = np.stack([i // self.per_scene, i % self.per_scene], axis=1)
        return out if dtype is None else out.astype(dtype)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UniformSteps):
            return (self.scenes, self.per_scene) == (other.scenes, other.per_scene)
        return isinstance(other, Sequence) and list(self) == list(other)

    def __hash__(self) -> int:
        return hash(("uniform-steps", self.scenes, self.per_scene))

    def __repr__(self) -> str:
        return f"UniformSteps({self.scenes} scenes x {self.per_scene})"


class RaggedSteps(_Steps):
    """The time steps of scenes holding different numbers of steps.

    Equal to ``tuple((s, t) for s, n in enumerate(counts) for t in range(n))``;
    stored as the cumulative counts (one integer per scene), looked up by
    bisection.

    Parameters
    ----------
    counts : sequence of int
        Time steps of each scene, each at least 1.

    Examples
    --------
    >>> steps = RaggedSteps([3, 5, 1])
    >>> len(steps), steps[3], steps[8], steps.counts.tolist()
    (9, (1, 0), (2, 0), [3, 5, 1])
    """

    def __init__(self, counts: Sequence[int] | np.ndarray) -> None:
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        if counts.size and int(counts.min()) < 1:
            raise ValueError("every scene holds at least one time step")
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    @property
    def counts(self) -> np.ndarray:
        """Return the time steps of each scene."""
        return np.diff(self.starts)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _step(self, i: int) -> tuple[int, int]:
        scene = int(np.searchsorted(self.starts, i, side="right")) - 1
        return scene, i - int(self.starts[scene])

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for s, n in enumerate(self.counts.tolist()):
            for t in range(n):
                yield (s, t)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        i = np.arange(len(self), dtype=np.int64)
        scene = np.searchsorted(self.starts, i, side="right") - 1
        out = np.stack([scene, i - self.starts[scene]], axis=1)
        return out if dtype is None else out.astype(dtype)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RaggedSteps):
            return bool(np.array_equal(self.starts, other.starts))
        return isinstance(other, Sequence) and list(self) == list(other)

    def __hash__(self) -> int:
        return hash(("ragged-steps", self.starts.tobytes()))

    def __repr__(self) -> str:
        return f"RaggedSteps({len(self.starts) - 1} scenes, {len(self)} steps)"
