"""--apply acting on run-time findings (validate/runfixes.py): a setting the run saw, whose value
comes from the YAML config the run read, is written there (comments and order kept), validated
by the A/B like any fix and committed with its note; static fixes the run disproved are not tried.
Fake runs (each run's speed read from the mirror's config), so this is fast; the real end-to-end
run is tests/validate/test_runtime_apply_e2e.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("scipy")
pytest.importorskip("git")
pytest.importorskip("ruamel.yaml")

from gpuperf_rewrite.lint.api import load_settings  # noqa: E402
from gpuperf_rewrite.validate.apply import ApplyOptions, run_apply  # noqa: E402
from gpuperf_rewrite.validate.judge.abtest import ABConfig  # noqa: E402
from tests.helpers.abfakes import FakeRunner, git_repo  # noqa: E402
from tests.validate.observed_docs import PROJECT, config_project_observed  # noqa: E402

CFG = ABConfig(runs=5, max_runs=5, min_runs=5, steps=5, warmup=1, bootstrap_resamples=200)


class ConfigRunner(FakeRunner):
    """1.5x faster when the mirror's config gives the loader workers; records what a CPU run of
    the config project observes (with the mirror's paths, as the shim would)."""

    def __init__(self, observed=config_project_observed, **kw) -> None:
        super().__init__(**kw)
        self.observed = observed

    def __call__(self, request):
        doc = super().__call__(request)
        root = Path(request.script).parent
        if "num_workers" in (root / "config.yaml").read_text():
            doc["samples_per_s"] *= 1.5
            doc["steps_per_s"] *= 1.5
        doc["observed"] = self.observed(root)
        return doc


def _project(tmp_path):
    files = {p.name: p.read_text() for p in PROJECT.iterdir() if p.is_file() and p.suffix in (".py", ".yaml")}
    return git_repo(tmp_path, files)


def _apply(tmp_path, monkeypatch, runner, **options):
    monkeypatch.chdir(tmp_path)
    out: list[str] = []
    rc = run_apply("train.py", settings=load_settings(isolated=True), config=CFG, runner=runner,
                   options=ApplyOptions(**options), echo=lambda m="", **k: out.append(str(m)))
    return rc, "\n".join(out)


def test_loader_workers_written_into_the_config_validated_and_committed(tmp_path, monkeypatch):
    repo = _project(tmp_path)
    before = (tmp_path / "config.yaml").read_text()
    rc, out = _apply(tmp_path, monkeypatch, ConfigRunner())
    assert rc == 0, out
    after = (tmp_path / "config.yaml").read_text()
    assert "num_workers:" in after and "num_workers" not in before
    # Round trip: every line of the original is still there, in order, comments included.
    old = before.splitlines()
    assert [line for line in after.splitlines() if line in old] == old
    assert "# slow storage" in after
    assert after.index("num_workers") > after.index("drop_last")  # appended to its own mapping
    assert repo.head.commit.message.startswith("gpuperf: GP201 in config.yaml (")  # where the change is
    assert set(repo.head.commit.stats.files) == {"config.yaml"}
    (note,) = [json.loads(line) for line in repo.git.notes("--ref", "gpuperf", "show", "HEAD").splitlines()]
    assert note["ab"]["verdict"] == "faster"
    assert {"path": "config.yaml", "rules": ["GP201"]} in note["files"]
    assert "config.yaml: 3 fix(es) from the run (GP201 x1, GP202 x1, GP305 x1)" in out
    assert "needs a GPU to validate (not tried on cpu): GP104, GP202, GP301, GP302, GP303, GP304, GP305" in out
    assert "train.py" in out and (tmp_path / "train.py").read_text() == (PROJECT / "train.py").read_text()


def test_json_report_names_run_time_findings_and_the_config(tmp_path, monkeypatch):
    _project(tmp_path)
    rc, out = _apply(tmp_path, monkeypatch, ConfigRunner(), json_out=True, no_commit=True)
    assert rc == 0, out
    report = json.loads(out[out.index("{\n"):])
    run_time = report["run_time"]
    assert run_time["config_files"] == ["config.yaml"]
    codes = {(f["code"], f["path"]) for f in run_time["findings"]}
    assert {("GP201", "data.py"), ("GP305", "optim.py"), ("GP303", "train.py")} <= codes
    gp201 = next(f for f in run_time["findings"] if f["code"] == "GP201")
    assert gp201["config"] == {"file": "config.yaml", "key": "loader.num_workers", "present": False, "value": None}
    assert "GP201" in report["rules_applied"]


def test_nothing_written_when_the_workers_do_not_help(tmp_path, monkeypatch):
    _project(tmp_path)

    class Flat(ConfigRunner):
        def __call__(self, request):
            doc = FakeRunner.__call__(self, request)
            doc["observed"] = config_project_observed(Path(request.script).parent)
            return doc

    before = (tmp_path / "config.yaml").read_bytes()
    rc, out = _apply(tmp_path, monkeypatch, Flat())
    assert rc == 1, out
    assert (tmp_path / "config.yaml").read_bytes() == before


def test_a_static_fix_the_run_disproved_is_not_tried(tmp_path, monkeypatch):
    """The loader's keywords are literal here (static GP201), but the run's loader was built
    elsewhere: the static line never ran, so GP201 is ruled out there, with the reason."""
    _project(tmp_path)
    data = tmp_path / "data.py"
    data.write_text(data.read_text() + "\n\ndef eval_loader(ds):\n    return DataLoader(ds, batch_size=64)\n")
    repo = git_repo(tmp_path, {"data.py": data.read_text()})

    def observed(root):
        doc = config_project_observed(root, good=True)
        return doc

    rc, out = _apply(tmp_path, monkeypatch, ConfigRunner(observed=observed), json_out=True, no_commit=True)
    report = json.loads(out[out.index("{\n"):])
    assert "GP201" in report["run_time"]["ruled_out"]
    assert "GP201" not in report["rules_tried"]
    assert repo.head.commit.message == "initial"


def test_config_edit_keeps_comments_and_order(tmp_path):
    from gpuperf_rewrite.validate.run.configsource import edit_yaml

    text = b"# top\na: 1  # one\nloader:\n    batch_size: 16   # per step\n    drop_last: true\nz: 'q'\n"
    out = edit_yaml(text, ("loader",), "num_workers", 4).decode()
    assert out == ("# top\na: 1  # one\nloader:\n    batch_size: 16   # per step\n    drop_last: true\n"
                   "    num_workers: 4\nz: 'q'\n")
    assert edit_yaml(out.encode(), ("loader",), "num_workers", 2).decode().count("num_workers: 2") == 1


def test_json_config_edit_keeps_order_and_layout_or_refuses():
    from gpuperf_rewrite.validate.run.configsource import ConfigEditError, edit_json

    text = b'{\n    "seed": 0,\n    "loader": {\n        "batch_size": 16\n    },\n    "z": [1, 2]\n}\n'
    with pytest.raises(ConfigEditError, match="layout"):  # the inline list would be reformatted
        edit_json(text, ("loader",), "num_workers", 2)
    text = b'{\n  "seed": 0,\n  "loader": {\n    "batch_size": 16\n  },\n  "z": 1\n}\n'
    out = edit_json(text, ("loader",), "num_workers", 2).decode()
    assert out == '{\n  "seed": 0,\n  "loader": {\n    "batch_size": 16,\n    "num_workers": 2\n  },\n  "z": 1\n}\n'
