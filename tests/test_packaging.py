"""The release files: the wheel's metadata, the README's install lines, the changelog.

``make dist`` builds the sdist and the wheel with ``python -m build`` and checks them
with ``twine check``; here the wheel is built once from a copy of the tree (no build
isolation, so nothing is downloaded) and its metadata read back as pip reads it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "rumi_xarray", tree / "rumi_xarray",
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-cache-dir", "-q", "-w", str(out), str(tree)], check=True)
    (found,) = out.glob("rumi_xarray-*.whl")
    return found


def _metadata(wheel: Path) -> tuple[object, list[str]]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(zf.read(meta).decode()), names


def test_wheel_names_its_licence_urls_and_extras(wheel: Path) -> None:
    meta, names = _metadata(wheel)
    assert meta["Name"] == "rumi-xarray" and meta["Version"] == PYPROJECT["version"]
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License-File"] == "LICENSE"
    licence = next(n for n in names if n.endswith("dist-info/licenses/LICENSE"))
    with zipfile.ZipFile(wheel) as zf:
        assert b"Apache License" in zf.read(licence) and b"Version 2.0" in zf.read(licence)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert set(urls) >= {"Repository", "Documentation", "Changelog"}
    assert all(u.startswith("https://") for u in urls.values()), urls
    assert urls["Changelog"].startswith(urls["Repository"])
    assert set(meta.get_all("Provides-Extra")) == set(PYPROJECT["optional-dependencies"])
    assert "rumi_xarray/py.typed" in names
    with zipfile.ZipFile(wheel) as zf:
        points = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "rumi = rumi_xarray.backend.entrypoint:RumiBackendEntrypoint" in points
    assert "rumi-xarray = rumi_xarray.cli.main:main" in points


def _install_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- install:start -->")[1].split("<!-- install:end -->")[0]
    return [line.split("#")[0].strip() for line in block.splitlines()
            if line.startswith("pip install ")]


def test_readme_install_lines_name_this_project_and_its_extras() -> None:
    lines = _install_lines()
    assert 'pip install ".[geo,stac]"' in lines  # from the clone's root, as tested on a venv
    extras = set(PYPROJECT["optional-dependencies"])
    repository = PYPROJECT["urls"]["Repository"]
    for line in lines:
        target = line.removeprefix("pip install ").strip().strip('"')
        if target.startswith("."):  # the clone's root, with or without extras
            given = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", target)
            assert given, line
            assert set(filter(None, (given.group(1) or "").split(","))) <= extras, line
            continue
        requirement = Requirement(target)  # the repository URL form
        assert requirement.name == PYPROJECT["name"] and requirement.extras <= extras, line
        assert requirement.url == f"git+{repository}", (requirement.url, repository)
    readme = (ROOT / "README.md").read_text()
    assert f"git clone {repository}" in readme


def test_changelog_speaks_to_users() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog") and f"## {PYPROJECT['version']}" in text
    # No tracker numbers or commit hashes: users have neither.
    assert not re.search(r"#\d+|\bissue\s*\d+|\b[0-9a-f]{7,40}\b", text, re.IGNORECASE), (
        re.findall(r"#\d+|\bissue\s*\d+|\b[0-9a-f]{7,40}\b", text, re.IGNORECASE))
