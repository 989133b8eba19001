"""Issue 35's "Done when" for `profile`, for real on a CPU: on the config-driven project, GP201
and GP202 at the DataLoader line, GP305 at the optimizer line, GP303 and GP304 at the model line,
in the lint's format (CUDA-gain rules as the lint reports them for a script that may run on
CUDA); with config_good.yaml none of GP201/GP202/GP203/GP305. Real runs of the shim, whose
``observed`` document the findings come from."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import profile as profile_cli  # noqa: E402
from tests.validate.observed_docs import PROJECT, line_of  # noqa: E402

pytestmark = [pytest.mark.slow]


@pytest.fixture
def cpu_only(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def _profile(tmp_path, *args):
    out = tmp_path / "doc.json"
    res = CliRunner().invoke(profile_cli.profile, [str(PROJECT / "train.py"), "--steps", "3", "--warmup", "1",
                                                  "--json", str(out), *args])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["observed"]["loaders"], "the shim recorded no DataLoader"
    return res.output, doc


def _at(output: str) -> set[tuple[str, int, str]]:
    return {(m[1], int(m[2]), m[3]) for m in re.finditer(r"(\w+\.py):(\d+):\d+: (GP\d+) .*\(seen at run time\)", output)}


def test_config_project_findings_at_the_lines_that_built_each_object(tmp_path, cpu_only):
    output, doc = _profile(tmp_path)
    seen = _at(output)
    loader = line_of(PROJECT / "data.py", "DataLoader(ds,")
    opt = line_of(PROJECT / "optim.py", "cls(params")
    model = line_of(PROJECT / "train.py", "model = build(cfg")
    assert {("data.py", loader, "GP201"), ("data.py", loader, "GP202"), ("optim.py", opt, "GP305")} <= seen, output
    # GP303: at the model's build line (where the user adds model.compile()), as GP304
    assert re.search(rf"train\.py:{model}:\d+: GP303 .*\(static, confirmed at run time\)", output), output
    # GP304: the lint sees the convolutions through the registry too: one finding, confirmed by the run.
    assert re.search(rf"train\.py:{model}:\d+: GP304 .*\(static, confirmed at run time\)", output), output
    assert "`loader.num_workers` missing in" in output and "config.yaml" in output
    gp201 = next(f for f in doc["findings"] if f["code"] == "GP201")
    assert gp201["observed"]["num_workers"] == 0 and gp201["config"]["key"] == "loader.num_workers"
    codes = [(f["code"], f["path"], f["line"], f["column"]) for f in doc["findings"]]
    assert len(codes) == len(set(codes))  # once each


def test_good_config_has_no_loader_or_optimizer_finding(tmp_path, cpu_only):
    output, doc = _profile(tmp_path, "--", "--config", str(PROJECT / "config_good.yaml"))
    assert not {"GP201", "GP202", "GP203", "GP305"} & {f["code"] for f in doc["findings"]}, output
