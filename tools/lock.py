"""Write, or check, the locked environment ``requirements/lock.txt`` (issue 25).

``make lock`` runs this with ``--write``: ``uv pip compile`` resolves
``pyproject.toml`` (the core dependencies and every optional extra, so an extra
added later is locked without editing anything here) together with
``requirements/pins.in`` into one exact version per package, for CPython 3.11 on
x86_64 Linux. ``make demo``, ``make test``, ``make docs`` and so ``.ci/run``
install with ``pip install -c requirements/lock.txt``: every package then has
one candidate and pip's resolver has nothing to search (it backtracked across
the aiobotocore/botocore/boto3/moto pins for minutes without it). The
library's own requirements stay ranges; ``make test-min`` proves their floors.

uv does not read pip's configuration, and this kind of machine keeps wheels
that are not on PyPI (the CPU build of torch) in folders and file indexes
named there. ``--write`` therefore hands pip's ``find-links``,
``extra-index-url``, ``index-url`` and ``constraint`` settings to uv, and uses
uv's ``unsafe-best-match`` index strategy, which picks versions as pip does
(the best across every index). The lock is installed with pip, which reads the
same configuration.

``--check`` (run by ``tests/test_lock.py``) fails when the lock is stale: a
requirement of ``pyproject.toml`` or ``pins.in`` that applies on that platform
has no pin, or a pin outside its range. Then run ``make lock``.

Usage: ``python tools/lock.py --write | --check [--root DIR]``.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = Path("requirements/lock.txt")
PINS = Path("requirements/pins.in")
#: The interpreter and platform the lock is for: this kind of machine and CI.
PYTHON_VERSION = "3.11"
PYTHON_PLATFORM = "x86_64-manylinux_2_28"
#: Marker environment of that target, to tell which requirements apply there.
TARGET = {"python_version": PYTHON_VERSION, "python_full_version": f"{PYTHON_VERSION}.7",
          "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
          "platform_machine": "x86_64", "implementation_name": "cpython",
          "platform_python_implementation": "CPython"}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def pip_settings() -> dict[str, list[str]]:
    """Return pip's effective ``find-links``, index and ``constraint`` settings.

    Read from ``pip config list`` (files and ``PIP_*`` variables, the later
    scopes winning as in pip), split on whitespace as pip splits them.
    """
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], check=True,
                         capture_output=True, text=True).stdout
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        name = key.rpartition(".")[2]
        if name in ("find-links", "extra-index-url", "index-url", "constraint"):
            found[name] = shlex.split(value.strip().strip("'\""))
    return found


def uv_command(root: Path) -> list[str]:
    """Return the ``uv pip compile`` command that writes the lock under ``root``."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is not installed: run `make lock` (it installs uv in .venv-lock)")
    command = [uv, "pip", "compile", "pyproject.toml", str(PINS), "--all-extras",
               "--python-version", PYTHON_VERSION, "--python-platform", PYTHON_PLATFORM,
               "--index-strategy", "unsafe-best-match", "--custom-compile-command", "make lock",
               "--output-file", str(LOCK)]
    settings = pip_settings()
    for url in settings.get("index-url", []):
        command += ["--index-url", url]
    for url in settings.get("extra-index-url", []):
        command += ["--extra-index-url", url]
    for folder in settings.get("find-links", []):
        command += ["--find-links", folder]
    for path in settings.get("constraint", []):
        if (root / path).is_file() or Path(path).is_file():
            command += ["--constraint", path]
    return command


def write(root: Path) -> None:
    """Resolve the lock with uv and write it, printing what runs."""
    command = uv_command(root)
    print("==> resolving pyproject.toml (every extra) and requirements/pins.in with uv:",
          flush=True)
    print("    " + shlex.join(command), flush=True)
    subprocess.run(command, check=True, cwd=root)
    problems = check(root)
    if problems:
        raise SystemExit("the new lock does not satisfy pyproject.toml:\n" + "\n".join(problems))
    pins = locked(root)
    print(f"==> {LOCK}: {len(pins)} packages pinned, torch {pins.get('torch', 'not locked')}",
          flush=True)


def locked(root: Path) -> dict[str, str]:
    """Return ``{canonical name: version}`` of the lock file."""
    pins = {}
    for line in (root / LOCK).read_text().splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def requirements(root: Path) -> list[tuple[str, Requirement]]:
    """Return every requirement the lock must satisfy, with where it was declared.

    The core dependencies, every optional extra (references to our own extras
    such as ``rumi-xarray[geo]`` are expanded by the extras themselves) and
    ``requirements/pins.in``.
    """
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    own = canonicalize_name(project["name"])
    found = [("dependencies", Requirement(t)) for t in project.get("dependencies", [])]
    for extra, texts in project.get("optional-dependencies", {}).items():
        found += [(f"[{extra}]", Requirement(t)) for t in texts]
    for line in (root / PINS).read_text().splitlines():
        if line.split("#")[0].strip():
            found.append((str(PINS), Requirement(line.split("#")[0].strip())))
    return [(where, r) for where, r in found if canonicalize_name(r.name) != own]


def check(root: Path) -> list[str]:
    """Return what makes the lock stale (empty when it satisfies every requirement)."""
    if not (root / LOCK).is_file():
        return [f"{LOCK} is missing: run `make lock`"]
    pins = locked(root)
    problems = []
    for where, req in requirements(root):
        if req.marker is not None and not req.marker.evaluate({**TARGET, "extra": ""}):
            continue  # does not apply on the lock's platform
        name = canonicalize_name(req.name)
        if name not in pins:
            problems.append(f"{req} ({where}) has no pin in {LOCK}: run `make lock`")
        elif not req.specifier.contains(Version(pins[name]), prereleases=True):
            problems.append(f"{req} ({where}) is not met by the pin {name}=={pins[name]}: "
                            "run `make lock`")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Run ``--write`` or ``--check``; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="resolve and write the lock")
    mode.add_argument("--check", action="store_true", help="fail when the lock is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    args = parser.parse_args(argv)
    if args.write:
        write(args.root)
        return 0
    problems = check(args.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
