"""One set of real documents for every report test (built once per worker: both modules share
the xdist group "report", so they run on one worker and build them once)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def docs(tmp_path_factory) -> dict:
    pytest.importorskip("matplotlib")
    pytest.importorskip("scipy")
    pytest.importorskip("git")
    from tests.helpers import reportdocs

    tmp = tmp_path_factory.mktemp("docs")
    for sub in ("ab", "apply", "reg"):
        (tmp / sub).mkdir()
    baseline, regress, rows = reportdocs.regress_docs(tmp / "reg")
    return {"ab": reportdocs.ab_doc(tmp / "ab"), "apply": reportdocs.apply_doc(tmp / "apply"),
            "baseline": baseline, "regress": regress, "history": rows, "profile": reportdocs.profile_doc(),
            "proof": reportdocs.proof_doc()}
