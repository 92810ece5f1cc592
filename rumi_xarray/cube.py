"""A cube: one or more scenes of the same grid, stacked along time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rumi_xarray.engine import Scene
from rumi_xarray.grid import Grid


@dataclass(frozen=True)
class Cube:
    """Scenes stacked along time, all sharing one frame grid.

    A single file is a cube of one scene. Cube time step ``i`` is local step
    ``steps[i][1]`` of scene ``steps[i][0]``.

    Parameters
    ----------
    scenes : tuple of Scene
    grid : Grid
        The grid every scene shares.
    steps : tuple of (int, int)
        ``(scene index, local time index)`` per cube time step.
    """

    scenes: tuple[Scene, ...]
    grid: Grid
    steps: tuple[tuple[int, int], ...]

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
