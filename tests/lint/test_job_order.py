"""The order a run checks its files in (issue 34): the user's modules before the files importing
them, so that an importer reads a module's facts off the analysis of its own check instead of
parsing it again; results still reported in the order of the files; installed code untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuperf_rewrite.lint import job_order, parallel, project_facts, project_index
from gpuperf_rewrite.lint.prefilter import FileResult, RuleSet

STEP = ("import torch\nfrom models import Net\nfrom data import loader\n\n\ndef train(opt):\n"
        "    model = Net()\n    for x, y in loader():\n        loss = model(x).sum()\n        loss.backward()\n"
        "        opt.step()\n")
PROJECT = {
    "pyproject.toml": "",
    "main.py": STEP,  # sorts before the modules it imports
    "data.py": "import torch\nfrom utils import seed\n\n\ndef loader():\n    seed()\n    return []\n",
    "models.py": "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x @ x\n",
    "utils.py": "import random\n\n\ndef seed():\n    random.seed(0)\n",
}


def _tree(root: Path, files: dict[str, str]) -> list[Path]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return sorted(p for p in root.rglob("*.py"))


@pytest.fixture(autouse=True)
def fresh_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(project_index, "_NODES", {})
    monkeypatch.setattr(project_facts, "_FACTS_MEMO", {})
    monkeypatch.setattr(project_facts, "_CONTEXTS", {})
    monkeypatch.setattr(project_facts, "_PARSED", {})
    monkeypatch.setattr(project_facts, "COMPUTED", {})


def test_modules_come_before_their_importers(tmp_path: Path) -> None:
    files = _tree(tmp_path, PROJECT)
    names = [p.name for p in files]
    plan = job_order.plan([str(p) for p in files], None)
    order = [names[i] for i in plan.order]
    assert sorted(order) == sorted(names)  # every file once
    assert order.index("utils.py") < order.index("data.py") < order.index("main.py")
    assert order.index("models.py") < order.index("main.py")
    assert {names[i] for i in plan.imported} == {"data.py", "models.py", "utils.py"}
    assert plan.level[names.index("main.py")] > plan.level[names.index("data.py")] > plan.level[names.index("utils.py")]


def test_an_import_cycle_keeps_every_file(tmp_path: Path) -> None:
    files = _tree(tmp_path, {"pyproject.toml": "", "a.py": "import b\n", "b.py": "import a\n", "c.py": "import a\n"})
    plan = job_order.plan([str(p) for p in files], None)
    assert sorted(plan.order) == [0, 1, 2]
    assert plan.order.index(2) == 2  # c.py imports the cycle: after both of its members


def test_installed_code_keeps_its_order(tmp_path: Path) -> None:
    site = tmp_path / "lib/python3.11/site-packages/pkg"
    files = _tree(site, {"a.py": "from pkg import b\n", "b.py": "import torch\n"})
    plan = job_order.plan([str(p) for p in files], None)
    assert plan.order == [0, 1] and not plan.imported


def test_results_come_in_file_order_and_each_file_once(tmp_path: Path) -> None:
    files = _tree(tmp_path, PROJECT)
    seen: list[str] = []

    def check(job: parallel.Job) -> FileResult:
        seen.append(Path(job.fs_path).name)
        return FileResult(job.path, [])

    jobs = [parallel.Job(p.name, str(p), RuleSet(("GP101",)), "none", False) for p in files]
    out = [r.path for r in parallel.run_jobs(jobs, 1, check=check)]
    assert out == [p.name for p in files]
    assert sorted(seen) == sorted(out)
    assert seen.index("models.py") < seen.index("main.py")


def test_an_importer_reads_the_facts_off_the_checked_module(tmp_path: Path) -> None:
    """Checked in the planned order, the modules a run checks are parsed once: their importers'
    facts come from their checks (only utils.py, which no rule checks, is analysed for facts)."""
    files = _tree(tmp_path, PROJECT)
    jobs = [parallel.Job(p.name, str(p), RuleSet(("GP302", "GP401")), "none", False) for p in files]
    with project_index.run_scope() as run:
        jobs = [parallel.Job(j.path, j.fs_path, j.ruleset, j.mode, j.keep_source, run=run) for j in jobs]
        results = list(parallel.run_jobs(jobs, 1))
    assert [r.path for r in results] == [p.name for p in files]
    assert {Path(p).name for p in project_facts.COMPUTED} <= {"utils.py"}


def test_fix_mode_analyses_a_file_with_nothing_to_fix_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last fix pass checked the module the passes stopped at: its findings are the file's,
    not computed again; a file that was fixed is checked again as fixed."""
    from gpuperf_rewrite.lint import engine
    from gpuperf_rewrite.lint.registry import all_rules

    calls: list[str] = []
    real = engine.run_rules

    def counted(module, text, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(text)
        return real(module, text, *args, **kwargs)

    monkeypatch.setattr(engine, "run_rules", counted)
    rules = RuleSet(tuple(code for code, r in all_rules().items() if r.default_enabled))
    # (a loader built with every setting: the loader rules may report on it, and have nothing to say)
    clean = (b"from torch.utils.data import DataLoader\n\n\ndef main(ds):\n"
             b"    return DataLoader(ds, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)\n")
    fixed = engine.check_source(clean, "clean.py", rules, "unsafe")
    linted = engine.check_source(clean, "clean.py", rules, "none")
    assert len(calls) == 2 and fixed.fixed is None  # one pass in each mode
    assert [d.code for d in fixed.diagnostics] == [d.code for d in linted.diagnostics]
    calls.clear()
    loader = (b"from torch.utils.data import DataLoader\n\n\ndef main():\n    loader = DataLoader(ds, batch_size=32)\n"
              b"    for x in loader:\n        step(x)\n\n\nif __name__ == \"__main__\":\n    main()\n")
    out = engine.check_source(loader, "sync.py", rules, "unsafe")
    assert out.fixed is not None and out.applied
    again = engine.check_source(out.fixed, "sync.py", rules, "none")
    assert [(d.code, d.line) for d in out.diagnostics] == [(d.code, d.line) for d in again.diagnostics]


def test_every_result_comes_when_the_parent_answered_them_all(tmp_path: Path) -> None:
    """Files no rule can fire on are answered before any check (the torch gate): with nothing
    left to check, every one of them is still reported, in order."""
    files = [tmp_path / f"m{i:02d}.py" for i in range(20)]
    for p in files:
        p.write_text("import os\n")
    jobs = [parallel.Job(p.name, str(p), RuleSet(("GP101",)), "none", False) for p in files]
    assert [r.path for r in parallel.run_jobs(jobs, 2)] == [p.name for p in files]


def test_files_joined_by_imports_form_one_group(tmp_path: Path) -> None:
    files = _tree(tmp_path, {**PROJECT, "other/pyproject.toml": "", "other/a.py": "import torch\nimport b\n",
                             "other/b.py": "import torch\n", "lone.py": "import torch\n"})
    names = [str(p.relative_to(tmp_path)) for p in files]
    plan = job_order.plan([str(p) for p in files], None)
    groups: dict[int, set[str]] = {}
    for i, c in plan.component.items():
        groups.setdefault(c, set()).add(names[i])
    assert sorted(map(sorted, groups.values())) == [["data.py", "main.py", "models.py", "utils.py"],
                                                   ["other/a.py", "other/b.py"]]
    assert all(c == min(i for i, d in plan.component.items() if d == c) for c in plan.component.values())


def test_a_group_within_a_workers_share_is_one_task_and_results_keep_job_order(tmp_path: Path) -> None:
    """Two projects side by side: each goes to one worker whole (its modules analysed in one
    process), a project larger than a worker's share is chunked as files are; results in order."""
    files = _tree(tmp_path, {**PROJECT, **{f"other/m{i:02d}.py": "import torch\nimport other.m00\n" * 40
                                           for i in range(1, 20)}, "other/m00.py": "import torch\n"})
    names = [str(p.relative_to(tmp_path)) for p in files]
    jobs = [parallel.Job(n, str(p), RuleSet(("GP101",)), "none", False) for n, p in zip(names, files)]
    plan = job_order.plan([j.fs_path for j in jobs], None)
    todo = list(range(len(jobs)))
    sched = parallel._Scheduler(jobs, [todo[k] for k in plan.order], {}, 2, parallel.check_job, plan.level,
                                plan.component)
    tasks = [{names[i] for i in task} for task in sched.pending]
    assert {"data.py", "main.py", "models.py", "utils.py"} in tasks  # the small project: one task
    assert not any("other/m00.py" in t and len(t) == 20 for t in tasks)  # over a worker's share: chunked
    assert sorted(i for task in sched.pending for i in task) == todo
    order = [names[i] for i in next(t for t in sched.pending if names[t[0]] in PROJECT)]
    assert order.index("utils.py") < order.index("data.py") < order.index("main.py")
    assert [r.path for r in parallel.run_jobs(jobs, 2)] == names


def test_findings_do_not_depend_on_the_number_of_workers(tmp_path: Path) -> None:
    """Projects checked whole in one worker (or chunked, or by one process) report the same."""
    from gpuperf_rewrite.lint.registry import all_rules

    tree = {f"p{k}/{rel}": text for k in range(3) for rel, text in PROJECT.items()}
    tree.update({f"p0/extra{i:02d}.py": "import torch\nfrom models import Net\n\n\ndef f(loader):\n"
                 "    for x in loader:\n        print(Net()(x).item())\n" for i in range(12)})
    files = _tree(tmp_path, tree)
    rules = RuleSet(tuple(code for code, r in all_rules().items() if r.default_enabled))
    runs = []
    for workers in (1, 2):
        with project_index.run_scope() as run:
            jobs = [parallel.Job(str(p.relative_to(tmp_path)), str(p), rules, "none", False, run=run) for p in files]
            runs.append([(r.path, [(d.code, d.line, d.message) for d in r.diagnostics])
                         for r in parallel.run_jobs(jobs, workers)])
    assert runs[0] == runs[1]
    assert any(diags for _, diags in runs[0])  # the projects do have findings


# A helper module the training scripts' loops call every step (its ``.item()`` is per-step code
# only through them), and scripts of different shapes calling it: a function's loop, a trainer
# method's loop, an eval loop. ``setup.py`` imports it and has no loop (nothing to ask of it).
HELPER = ("import torch\n\n\ndef to_device(batch, device):\n    return [b.to(device) for b in batch]\n\n\n"
          "def log_loss(loss):\n    print(loss.item())\n")
SCRIPT_A = ("import torch\nfrom utils.device import to_device, log_loss\n\n\ndef train(model, loader, opt):\n"
            "    for batch in loader:\n        x, y = to_device(batch, 'cuda')\n        loss = model(x, y)\n"
            "        loss.backward()\n        opt.step()\n        log_loss(loss)\n")
SCRIPT_B = ("import torch\nimport utils.device as dev\n\n\nclass Trainer:\n    def fit(self, loader):\n"
            "        for step, batch in enumerate(loader):\n            batch = dev.to_device(batch, self.device)\n"
            "            loss = self.model(*batch)\n            self.opt.zero_grad()\n            loss.backward()\n"
            "            self.opt.step()\n            dev.log_loss(loss)\n")
SCRIPT_C = ("import torch\nfrom utils import device\n\n\n@torch.no_grad()\ndef evaluate(model, loader):\n"
            "    model.eval()\n    for batch in loader:\n        device.log_loss(model(*device.to_device(batch, 'cuda')))\n")
STEPPED = {"pyproject.toml": "", "utils/__init__.py": "", "utils/device.py": HELPER, "train_a.py": SCRIPT_A,
           "train_b.py": SCRIPT_B, "eval_c.py": SCRIPT_C,
           "setup_env.py": "import torch\nfrom utils.device import to_device\n\nX = to_device\n"}


def test_a_module_asking_for_step_calls_is_checked_after_the_importers_that_loop(tmp_path: Path) -> None:
    files = _tree(tmp_path, STEPPED)
    names = [str(p.relative_to(tmp_path)) for p in files]
    plan = job_order.plan([str(p) for p in files], None)
    order = [names[i] for i in plan.order]
    assert sorted(order) == sorted(names)
    assert all(order.index("utils/device.py") > order.index(s) for s in ("train_a.py", "train_b.py", "eval_c.py"))
    assert {names[i] for i in plan.steps_asked} == {"train_a.py", "train_b.py", "eval_c.py"}
    assert plan.level[names.index("utils/device.py")] > max(plan.level[names.index(s)] for s in ("train_a.py", "eval_c.py"))
    # No loop among its importers: nothing is asked, the module keeps its place before them.
    plain = _tree(tmp_path / "plain", {"pyproject.toml": "", "helper.py": HELPER,
                                       "use.py": "import torch\nfrom helper import to_device\n\nY = to_device\n"})
    quiet = job_order.plan([str(p) for p in plain], None)
    assert quiet.order == [0, 1] and not quiet.steps_asked


def _findings(files: list[Path], root: Path, workers: int, alone: bool) -> list[tuple[str, list[tuple[str, int, str]]]]:
    from gpuperf_rewrite.lint import early_contexts
    from gpuperf_rewrite.lint.registry import all_rules

    rules = RuleSet(tuple(code for code, r in all_rules().items() if r.default_enabled))
    out = []
    for group in ([[p] for p in files] if alone else [files]):
        project_index._NODES.clear()  # each run from nothing: no memo carries a fact over
        project_facts._FACTS_MEMO.clear()
        project_facts._CONTEXTS.clear()
        project_facts._PARSED.clear()
        early_contexts._EARLY.clear()
        with project_index.run_scope() as run:
            jobs = [parallel.Job(str(p.relative_to(root)), str(p), rules, "none", False, run=run) for p in group]
            out += [(r.path, [(d.code, d.line, d.message) for d in r.diagnostics])
                    for r in parallel.run_jobs(jobs, workers)]
    return out


def test_findings_are_the_same_whichever_check_gives_the_step_calls(tmp_path: Path) -> None:
    """The helper checked after its importers (their step calls read off their own checks) reports
    what each file checked alone reports (the helper's check then analyses its importers itself),
    by one process and by two workers."""
    files = _tree(tmp_path, {**STEPPED, **{f"p2/{k}": v for k, v in STEPPED.items()}})
    alone = _findings(files, tmp_path, 1, alone=True)
    assert _findings(files, tmp_path, 1, alone=False) == alone
    assert _findings(files, tmp_path, 2, alone=False) == alone
    helper = dict(alone)["utils/device.py"]
    assert any(code == "GP101" for code, _, _ in helper), helper  # ``.item()``, per step through its callers


def test_an_importer_asked_for_its_step_calls_is_analysed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuperf_rewrite.lint import early_contexts
    from gpuperf_rewrite.rules._framework import RuleContext

    built: list[str] = []
    real = RuleContext.__init__

    def counted(self, module, text, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(Path(path).name)
        real(self, module, text, path, *args, **kwargs)

    monkeypatch.setattr(RuleContext, "__init__", counted)
    monkeypatch.setattr(early_contexts, "_EARLY", {})
    files = _tree(tmp_path, STEPPED)
    _findings(files, tmp_path, 1, alone=False)
    assert {name: built.count(name) for name in ("train_a.py", "train_b.py", "eval_c.py")} == \
        {"train_a.py": 1, "train_b.py": 1, "eval_c.py": 1}
