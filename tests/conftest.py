from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus import CASES, Case


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, bytes, object, Case]]:
    """Every corpus case written once per session: name -> (path, header, array, case)."""
    folder = tmp_path_factory.mktemp("corpus")
    out = {}
    for case in CASES:
        path, header, data = case.write(folder)
        out[case.name] = (path, header, data, case)
    return out


@pytest.fixture(params=[c.name for c in CASES])
def case(request: pytest.FixtureRequest, corpus: dict) -> tuple[Path, bytes, object, Case]:
    return corpus[request.param]
