"""Write pip constraints pinning every dependency of rumi-xarray to its declared floor.

``make test-min`` installs the package with ``-c`` this file, so the suite runs
against the oldest versions ``pyproject.toml`` claims to support: a floor the
code does not really work with fails there instead of on a user's machine.

Every requirement of ``[project] dependencies`` and of the optional extras
that ``--extra`` (default ``test``) pulls in, directly or through
``rumi-xarray[...]``, is pinned to ``==`` its ``>=`` floor. When one package
is listed twice (``zarr>=3`` and ``zarr>=3.1``) the higher floor is the real
one. A requirement without a ``>=`` floor is left to pip. A package that
``requirements/pins.in`` pins (torch: only its CPU build lies on this kind of
machine, any other version downloads a multi-GB CUDA build) keeps that pin
instead of its floor.

Usage: ``python tools/min_constraints.py [pyproject.toml] [--extra NAME]``.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

# name, optional [extras], the rest (specifiers, then an optional ; marker)
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*([^;]*)")
_FLOOR = re.compile(r">=\s*([0-9][0-9A-Za-z.+!-]*)")


def normalize(name: str) -> str:
    """Return the PEP 503 normalized form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _version_key(version: str) -> tuple[int, ...]:
    # Release numbers only: floors in pyproject are plain releases.
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0]))


def floors(pyproject: dict, extra: str) -> dict[str, str]:
    """Return ``{normalized name: floor}`` for the core dependencies and ``extra``.

    Parameters
    ----------
    pyproject : dict
        Parsed ``pyproject.toml``.
    extra : str
        Optional-dependency group to include, with the groups it names.

    Returns
    -------
    dict of str to str
    """
    project = pyproject["project"]
    own = normalize(project["name"])
    optional = project.get("optional-dependencies", {})
    requirements = list(project.get("dependencies", []))
    pending, seen = [extra], set()
    while pending:
        group = pending.pop()
        if group in seen:
            continue
        if group not in optional:
            raise SystemExit(f"pyproject.toml has no optional-dependencies group {group!r}")
        seen.add(group)
        for text in optional[group]:
            match = _REQUIREMENT.match(text)
            if match and normalize(match.group(1)) == own:
                pending.extend(e.strip() for e in (match.group(2) or "").split(",") if e.strip())
            else:
                requirements.append(text)
    found: dict[str, str] = {}
    for text in requirements:
        match = _REQUIREMENT.match(text)
        if not match:
            raise SystemExit(f"cannot parse requirement {text!r}")
        floor = _FLOOR.search(match.group(3))
        if floor is None:
            continue
        name, version = normalize(match.group(1)), floor.group(1)
        if name not in found or _version_key(version) > _version_key(found[name]):
            found[name] = version
    return found


def machine_pins(path: Path) -> dict[str, str]:
    """Return ``{normalized name: "==version"}`` of the pins file (``name==version`` lines)."""
    pins = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            name, sep, version = line.split("#")[0].strip().partition("==")
            if sep:
                pins[normalize(name)] = version
    return pins


def main(argv: list[str] | None = None) -> int:
    """Print the constraints for the given pyproject.toml."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject", nargs="?", default="pyproject.toml", type=Path)
    parser.add_argument("--extra", default="test")
    args = parser.parse_args(argv)
    with args.pyproject.open("rb") as f:
        data = tomllib.load(f)
    print(f"# Declared floors of {args.pyproject} (core + extra {args.extra!r}), "
          f"written by tools/min_constraints.py")
    pins = machine_pins(args.pyproject.parent / "requirements" / "pins.in")
    for name, version in sorted(floors(data, args.extra).items()):
        if name in pins:
            print(f"# {name}: its floor is {version}, requirements/pins.in pins the build this "
                  "machine has")
            version = pins[name]
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
