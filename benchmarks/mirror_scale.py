"""Cost of the scratch mirror for a script with many small files beside it (docs/benchmarks.md).

    python benchmarks/mirror_scale.py [--files 20000] [--runs 4] [--before REF] [--no-apply]

A tiny CPU torch script (a Linear layer, ``zero_grad(set_to_none=False)`` for GP402 to fix) in a
fresh git repository, once alone and once with ``--files`` small files beside it; on each:

* ``ab train.py train.py --runs R --max-runs R``: wall seconds, and the number of runs, so the
  per-run cost of the mirror shows as the difference between the two trees;
* ``train.py --apply --unsafe-fixes --select GP402`` with the same few runs: wall seconds, the
  plan's estimate for the first A/B (``ab_estimate_s`` in the JSON), and the highest ETA the progress
  line showed, against what the A/B took.

With ``--before REF`` the same commands also run with the package as it was at git REF (exported
to a temporary directory and put first on PYTHONPATH, the runtime shim included), side by side in
one session. The 1-minute load average is printed with each row: this machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 8)
for step in range(100000):
    opt.zero_grad(set_to_none=False)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
"""
AB_OPTS = ["--steps", "10", "--warmup", "2"]
ALONE = """import json, sys, time
from gpuperf_rewrite.validate.run.runs import ScriptVersion, run_request
from gpuperf_rewrite.validate.run.workspace import Workspace
t0 = time.perf_counter()
out = {}
with Workspace() as ws:
    path = ws.add(ScriptVersion.read(sys.argv[1]))
    out["plan_s"] = time.perf_counter() - t0
    run = ws.runner(lambda request: {})
    out["runs_s"] = []
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        run(run_request(path))
        out["runs_s"].append(time.perf_counter() - t)
    t = time.perf_counter()
out["cleanup_s"] = time.perf_counter() - t
print(json.dumps(out))
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(where: Path, files: int) -> Path:
    where.mkdir(parents=True)
    (where / "train.py").write_text(SCRIPT)
    for i in range(files):
        (where / f"shard_{i:05d}.txt").write_text(f"{i}\n")
    _git(where, "init", "-q")
    for k, v in (("user.name", "bench"), ("user.email", "bench@example.invalid"), ("commit.gpgsign", "false")):
        _git(where, "config", k, v)
    _git(where, "add", "train.py")  # the shards stay untracked: the mirror holds them all the same
    _git(where, "commit", "-q", "-m", "tiny")
    return where


def export(ref: str, dest: Path) -> Path:
    """The package at ``ref``, laid out as installed (rules/ and runtime/ inside gpuperf_rewrite/)."""
    tar = dest / "src.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "archive", ref, "gpuperf_rewrite", "rules", "runtime"], cwd=ROOT, check=True, stdout=fh)
    with tarfile.open(tar) as tf:
        tf.extractall(dest / "src", filter="data")
    pkg = dest / "src" / "gpuperf_rewrite"
    (dest / "src" / "rules").rename(pkg / "rules")
    (dest / "src" / "runtime").rename(pkg / "runtime")
    return dest / "src"


class Ran:
    def __init__(self, rc: int, stdout: str, lines: list[tuple[float, str]]) -> None:
        self.returncode, self.stdout, self.lines = rc, stdout, lines
        self.stderr = "".join(line for _, line in lines)

    def after(self, prefix: str, end: float) -> float | None:
        """Seconds from the first stderr line starting with ``prefix`` to ``end``."""
        return next((end - t for t, line in self.lines if line.startswith(prefix)), None)


def tool(path: Path | None, repo: Path, args: list[str]) -> tuple[float, Ran]:
    """Runs the tool; stderr lines are time-stamped as they come (when the plan was printed)."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    env["COLUMNS"] = "200"
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "gpuperf_rewrite", *args], cwd=repo, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(p.stdout.read() if p.stdout else ""))
    reader.start()
    assert p.stderr is not None
    for line in p.stderr:
        lines.append((time.monotonic() - t0, line))
    rc = p.wait()
    reader.join()
    return time.monotonic() - t0, Ran(rc, "".join(out), lines)


def _seconds(text: str) -> float:
    total = 0.0
    for n, unit in re.findall(r"(\d+(?:\.\d+)?)(h|m|s)", text):
        total += float(n) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total


def row_alone(label: str, path: Path | None, repo: Path, files: int, runs: int) -> str:
    """The mirror alone: a workspace whose runner does nothing, ``runs`` runs."""
    env = dict(os.environ, **({"PYTHONPATH": str(path)} if path is not None else {}))
    load = os.getloadavg()[0]
    p = subprocess.run([sys.executable, "-c", ALONE, str(repo / "train.py"), str(runs)], env=env, cwd=repo,
                       capture_output=True, text=True)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return f"| {label} | {files} | error: {p.stderr.strip()[-300:]} |"
    per_run = " / ".join(f"{t:.2f}" for t in doc["runs_s"])
    return (f"| {label} | {files} | {doc['plan_s']:.2f} | {per_run} | {sum(doc['runs_s']):.1f} "
            f"| {doc['cleanup_s']:.2f} | {load:.1f} |")


def row_ab(label: str, path: Path | None, repo: Path, files: int, runs: int) -> str:
    load = os.getloadavg()[0]
    wall, p = tool(path, repo, ["ab", "train.py", "train.py", "--runs", str(runs), "--max-runs", str(runs),
                                *AB_OPTS, "--json", "-"])
    try:
        doc = json.loads(p.stdout[p.stdout.index("{"):])
        n = int(doc["runs"]["a"]) + int(doc["runs"]["b"])
    except (ValueError, KeyError, TypeError):
        n = 2 * runs
    if p.returncode == 2:
        return f"| {label} | ab | {files} | error: {p.stderr.strip()[-200:]} |"
    return f"| {label} | ab | {files} | {n} runs | {wall:.1f} | - | - | {load:.1f} |"


def row_apply(label: str, path: Path | None, repo: Path, files: int, runs: int) -> str:
    load = os.getloadavg()[0]
    _git(repo, "reset", "-q", "--hard", "HEAD")
    wall, p = tool(path, repo, ["train.py", "--apply", "--unsafe-fixes", "--select", "GP402", "--no-commit",
                                "--runs", str(runs), "--max-runs", str(runs), *AB_OPTS, "--json"])
    _git(repo, "reset", "-q", "--hard", "HEAD")
    try:
        doc = json.loads(p.stdout[p.stdout.index("{"):])
    except ValueError:
        return f"| {label} | --apply | {files} | exit {p.returncode}: {p.stderr.strip()[-300:]} |"
    plan = doc.get("plan") or {}
    etas = [_seconds(m.group(1)) for m in re.finditer(r"ETA ([0-9hms.]+) for this A/B", p.stderr)]
    ab_s = p.after("== A/B 1", wall)  # from the first A/B's start to the end (one fix: one A/B)
    setup = next((line.strip() for _, line in p.lines if "set-up:" in line), "")
    return (f"| {label} | --apply | {files} | {doc.get('status', '?')}, profile run {plan.get('run_s', '?')} s"
            f"{'; ' + setup if setup else ''} | {wall:.1f} | ~{plan.get('ab_estimate_s', '?')} s "
            f"(first ETA {max(etas, default=0):.0f} s) | {ab_s or 0:.1f} | {load:.1f} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=20000)
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--before", default=None, help="git ref to compare with (e.g. main)")
    p.add_argument("--no-apply", action="store_true")
    p.add_argument("--alone-only", action="store_true", help="only the mirror with a runner that does nothing")
    p.add_argument("--no-empty", action="store_true", help="skip the commands in the tree without the files")
    o = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuperf-mirror-scale-") as tmp:
        t = Path(tmp)
        trees = [("this tree", None)]
        if o.before:
            (t / "before").mkdir()
            trees.insert(0, (f"at {o.before}", export(o.before, t / "before")))
        repos = {n: make_repo(t / f"repo{n}", n) for n in ((o.files,) if o.no_empty else (0, o.files))}
        print(f"The mirror alone ({o.runs * 2} runs of a runner that does nothing), seconds:")
        print("| code | files | plan (walk, snapshot) | each run (lay out or reset, run, check) | all runs "
              "| clean-up | load 1m |")
        print("|---|---|---|---|---|---|---|")
        for label, path in trees:
            print(row_alone(label, path, repos[o.files], o.files, 2 * o.runs), flush=True)
        if o.alone_only:
            return 0
        print(f"{o.files} small files beside a tiny CPU torch script; --runs {o.runs} --max-runs {o.runs} "
              f"{' '.join(AB_OPTS)}; python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
        print("| code | command | files | runs / result | wall s | plan estimate of the A/B | A/B took s "
              "| load 1m |")
        print("|---|---|---|---|---|---|---|---|")
        for n, repo in repos.items():
            for label, path in trees:
                print(row_ab(label, path, repo, n, o.runs), flush=True)
                if not o.no_apply:
                    print(row_apply(label, path, repo, n, o.runs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
