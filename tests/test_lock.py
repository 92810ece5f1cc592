"""The locked environment (issue 25): requirements/lock.txt stays true to pyproject.toml.

``make demo``, ``make test`` and ``make docs`` install with ``pip install -c
requirements/lock.txt``, so pip's resolver has one candidate per package. A
requirement added to pyproject.toml without ``make lock`` would be resolved
freely again (or, for torch, download a CUDA build): these tests fail first.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tools import lock, min_constraints

ROOT = Path(__file__).resolve().parents[1]


def _copy_repo_files(tmp_path: Path) -> Path:
    (tmp_path / "requirements").mkdir()
    for name in ("pyproject.toml", "requirements/lock.txt", "requirements/pins.in"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_lock_satisfies_every_requirement_of_pyproject() -> None:
    problems = lock.check(ROOT)
    assert not problems, "\n".join(problems)


def test_lock_pins_torch_to_the_cpu_build_on_this_machine() -> None:
    pins = lock.locked(ROOT)
    assert pins["torch"] == "2.13.0+cpu"
    # Every extra and the core are locked, not only the test extra.
    assert {"sphinx", "pydata-sphinx-theme", "moto", "botocore", "xarray"} <= set(pins)


def test_check_reports_an_unlocked_requirement_and_a_pin_out_of_range(tmp_path: Path) -> None:
    root = _copy_repo_files(tmp_path)
    text = (root / "pyproject.toml").read_text()
    text = text.replace('"ruff>=0.5",', '"ruff>=0.5",\n    "not-a-locked-package>=1",')
    text = text.replace('"xarray>=2025.8.0"', '"xarray>=2099.1"')
    (root / "pyproject.toml").write_text(text)
    problems = lock.check(root)
    assert len(problems) == 2, problems
    assert "not-a-locked-package>=1 ([test]) has no pin" in problems[0] + problems[1]
    assert any(p.startswith("xarray>=2099.1 (dependencies) is not met by the pin xarray==")
               for p in problems)
    # ... and the command line says so with a failing exit status.
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "lock.py"), "--check",
                          "--root", str(root)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 1 and "run `make lock`" in out.stderr


def test_check_ignores_requirements_for_other_platforms(tmp_path: Path) -> None:
    root = _copy_repo_files(tmp_path)
    text = (root / "pyproject.toml").read_text().replace(
        '"ruff>=0.5",', '"ruff>=0.5",\n    "pywin32>=300; sys_platform == \'win32\'",')
    (root / "pyproject.toml").write_text(text)
    assert lock.check(root) == []


def test_uv_gets_pip_find_links_and_indexes(monkeypatch) -> None:
    settings = {"find-links": ["/opt/wheels"], "extra-index-url": ["file:///a", "file:///b"],
                "constraint": ["/nonexistent/constraints.txt"]}
    monkeypatch.setattr(lock, "pip_settings", lambda: settings)
    monkeypatch.setattr(lock.shutil, "which", lambda *a, **k: "/bin/uv")
    command = lock.uv_command(ROOT)
    joined = " ".join(command)
    assert "--find-links /opt/wheels" in joined
    assert "--extra-index-url file:///a --extra-index-url file:///b" in joined
    assert "--index-strategy unsafe-best-match" in joined and "--all-extras" in joined
    assert "/nonexistent" not in joined  # a constraint file that does not exist is skipped


def test_pip_settings_reads_this_pip_configuration() -> None:
    # Whatever this machine configures, the parser returns lists of words for the keys.
    settings = lock.pip_settings()
    assert set(settings) <= {"find-links", "extra-index-url", "index-url", "constraint"}
    assert all(isinstance(v, list) and all(isinstance(w, str) for w in v)
               for v in settings.values())


def test_every_environment_of_the_makefile_installs_from_the_lock() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"(?m)^PIP_INSTALL := .*-c \$\(LOCK\)", makefile)
    assert re.search(r"(?m)^LOCK := requirements/lock\.txt$", makefile)
    installs = re.findall(r"(?m)^\t(.*pip install .*)$", makefile)
    for line in installs:
        # Only pip itself, uv for `make lock` and the floors of `make test-min` are not locked.
        if "$(PIP_INSTALL)" in line or "--upgrade pip" in line or "uv==" in line \
                or "$(VENV_MIN)/constraints.txt" in line:
            continue
        raise AssertionError(f"Makefile installs without the lock: {line.strip()}")
    assert not [line for line in installs if "--quiet" in line or " -q " in line]  # progress


def test_min_constraints_keep_the_machine_pin_of_torch(tmp_path: Path) -> None:
    root = _copy_repo_files(tmp_path)
    text = (root / "pyproject.toml").read_text().replace(
        '"ruff>=0.5",', '"ruff>=0.5",\n    "torch>=2.2",')
    (root / "pyproject.toml").write_text(text)
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "min_constraints.py"),
                          str(root / "pyproject.toml")], capture_output=True, text=True,
                         check=True).stdout
    lines = out.splitlines()
    assert "torch==2.13.0+cpu" in lines and "torch==2.2" not in lines
    assert "xarray==2025.8.0" in lines  # other floors are untouched
    assert min_constraints.machine_pins(root / "requirements" / "pins.in") == {
        "torch": "2.13.0+cpu"}


def test_readme_says_what_every_extra_enables() -> None:
    # The first screen shows `pip install "rumi-xarray[...]"` with one line per extra.
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- install:start -->")[1].split("<!-- install:end -->")[0]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    lines = {re.match(r"- `\[([\w-]+)\]`: \S", line).group(1) for line in block.splitlines()
             if re.match(r"- `\[([\w-]+)\]`: \S", line)}
    assert lines == set(extras), (sorted(set(extras) - lines), sorted(lines - set(extras)))
    assert 'pip install "rumi-xarray[' in block
