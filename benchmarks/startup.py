"""Start-up of one pre-commit lint, measured as hyperfine does: warm-up runs, then many runs,
median (and mean, sd, min, max). Uses ``hyperfine`` when it is on PATH, else the same procedure
with subprocess (the cases interleaved round by round, so machine load hits them alike).

Cases, each the pre-commit hook's own command (``gpuperf-rewrite check --force-exclude FILE``) in
a throwaway project with a ``[tool.gpuperf]`` table:

* ``python -c pass``: the interpreter's own floor (site, the editable-install finder);
* a file that imports no torch package (the torch gate skips it: nothing but the CLI is imported);
* one training script (``fixtures/cnn_item_logging.py``), cold (``--no-cache``) and with a warm cache;
* ``main.py`` of a project whose step, model and helpers are its own modules
  (tests/rules/projects/engine_split: engine.py, models/, utils.py), cold and warm: the start-up
  counts the modules it imports (issue 27).

``--baseline BIN_DIR`` runs another install's ``gpuperf-rewrite`` in the same rounds (before/after).

Targets (issue 20 item 7, on a quiet 2-core machine): <= 150 ms for the non-torch file,
<= 400 ms for the training script. Prints a markdown table for docs/benchmarks.md.

    .venv/bin/python benchmarks/startup.py [--runs 30] [--warmup 3] [--baseline OTHER/.venv/bin] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PLAIN = '"""Not training code."""\nimport os\n\n\ndef main():\n    print(os.getcwd())\n'
PYPROJECT = '[project]\nname = "demo"\n\n[tool.gpuperf]\nexclude = ["build/"]\n'


def gp_command(bin_dir: Path = BIN) -> list[str]:
    exe = shutil.which("gpuperf-rewrite", path=str(bin_dir))
    return [exe] if exe else [str(bin_dir / "python"), "-m", "gpuperf_rewrite"]


def cases(baseline: Path | None = None) -> list[tuple[str, list[str]]]:
    todo = [("python -c pass (floor)", [sys.executable, "-c", "pass"])]
    for label, bin_dir in [("", BIN), *([(" (baseline)", baseline)] if baseline else [])]:
        gp = [*gp_command(bin_dir), "check", "--force-exclude"]
        todo += [(f"non-torch file{label}", [*gp, "util.py"]),
                 (f"training script, no cache{label}", [*gp, "--no-cache", "train.py"]),
                 (f"training script, warm cache{label}", [*gp, "train.py"]),
                 (f"main.py + its modules, no cache{label}", [*gp, "--no-cache", "split/main.py"]),
                 (f"main.py + its modules, warm cache{label}", [*gp, "split/main.py"])]
    return todo


def make_project(tmp: Path) -> Path:
    project = tmp / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "util.py").write_text(PLAIN)
    shutil.copy(ROOT / "fixtures" / "cnn_item_logging.py", project / "train.py")
    # A training script whose step, model and helpers live in its own modules (issue 27): the
    # start-up counts reading and analysing the modules it imports.
    shutil.copytree(ROOT / "tests" / "rules" / "projects" / "engine_split", project / "split",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return project


def bytecode_env(cache: Path) -> dict[str, str]:
    """Bytecode cached, as in an installed package (pip compiles it; an editable install writes
    it on first import), though this environment may say PYTHONDONTWRITEBYTECODE: compiling our
    modules on every run would cost more than the rest of the start-up. Cached under ``cache``,
    not beside the sources."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


ENV: dict[str, str] | None = None  # set by main()


def run_once(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU (user + sys) seconds of one run: CPU is what a loaded machine blurs least."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    rc = subprocess.call(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {rc}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def with_subprocess(todo: list[tuple[str, list[str]]], cwd: Path, runs: int,
                    warmup: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    times: dict[str, list[float]] = {name: [] for name, _ in todo}
    cpu: dict[str, list[float]] = {name: [] for name, _ in todo}
    for _ in range(warmup):
        for _, cmd in todo:
            run_once(cmd, cwd)
    for _ in range(runs):
        for name, cmd in todo:
            wall, used = run_once(cmd, cwd)
            times[name].append(wall)
            cpu[name].append(used)
    return times, cpu


def with_hyperfine(todo: list[tuple[str, list[str]]], cwd: Path, runs: int, warmup: int,
                   exe: str) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd in todo:
            out = Path(tmp, "h.json")
            subprocess.run([exe, "-N", "--warmup", str(warmup), "--runs", str(runs), "-i", "--export-json",
                            str(out), subprocess.list2cmdline(cmd)], cwd=cwd, check=True, capture_output=True,
                           env=ENV)
            times[name] = json.loads(out.read_text())["results"][0]["times"]
    return times


def imports_libcst(cmd: list[str], cwd: Path) -> bool:
    """Whether the run imports LibCST (``-X importtime`` of the same command)."""
    py = cmd if cmd[1:2] == ["-m"] else [str(Path(cmd[0]).parent / "python"), "-m", "gpuperf_rewrite", *cmd[1:]]
    out = subprocess.run([py[0], "-X", "importtime", *py[1:]], cwd=cwd, capture_output=True, text=True, env=ENV)
    return any(line.split("|")[-1].strip() == "libcst" for line in out.stderr.splitlines())


def table(todo: list[tuple[str, list[str]]], times: dict[str, list[float]], cpu: dict[str, list[float]],
          cwd: Path) -> str:
    rows = ["| case | median ms | mean ± sd ms | min ms | max ms | median CPU ms | runs | imports LibCST |",
            "|---|---|---|---|---|---|---|---|"]
    for name, cmd in todo:
        t = [x * 1000 for x in times[name]]
        sd = statistics.stdev(t) if len(t) > 1 else 0.0
        used = f"{statistics.median(cpu[name]) * 1000:.0f}" if cpu.get(name) else ""
        lib = "" if cmd[1:2] == ["-c"] else ("yes" if imports_libcst(cmd, cwd) else "no")
        rows.append(f"| {name} | **{statistics.median(t):.0f}** | {statistics.mean(t):.0f} ± {sd:.0f} | "
                    f"{min(t):.0f} | {max(t):.0f} | {used} | {len(t)} | {lib} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-hyperfine", action="store_true", help="measure with subprocess even if hyperfine is there")
    ap.add_argument("--baseline", type=Path, metavar="BIN_DIR",
                    help="also run another install's gpuperf-rewrite (its venv's bin/), interleaved")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="keep the environment's PYTHONDONTWRITEBYTECODE (every run compiles our modules)")
    ap.add_argument("--json", type=Path, help="write the raw times (seconds) here")
    args = ap.parse_args()
    hyperfine = None if args.no_hyperfine else shutil.which("hyperfine")
    global ENV
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(Path(tmp))
        if not args.no_bytecode_cache:
            ENV = bytecode_env(Path(tmp, "pycache"))
        todo = cases(args.baseline)
        load_before = os.getloadavg()
        start = datetime.datetime.now(datetime.timezone.utc)
        if hyperfine:
            times, cpu = with_hyperfine(todo, project, args.runs, args.warmup, hyperfine), {}
        else:
            times, cpu = with_subprocess(todo, project, args.runs, args.warmup)
        load_after = os.getloadavg()
        print(f"## Start-up ({start:%Y-%m-%d %H:%M} UTC)\n")
        print(f"- {'hyperfine' if hyperfine else 'subprocess, hyperfine-style'}: {args.warmup} warm-up runs, "
              f"{args.runs} runs per case{', interleaved' if not hyperfine else ''}; "
              f"command `gpuperf-rewrite check --force-exclude FILE` (the pre-commit hook's); bytecode "
              f"{'not cached (PYTHONDONTWRITEBYTECODE as set)' if ENV is None else 'cached, as installed'}")
        print(f"- {os.cpu_count()} cores, Python {platform.python_version()}; 1/5/15-min load average "
              f"before {', '.join(f'{x:.1f}' for x in load_before)}, after "
              f"{', '.join(f'{x:.1f}' for x in load_after)}\n")
        print(table(todo, times, cpu, project))
        if args.json:
            args.json.write_text(json.dumps({"date": start.isoformat(), "load": [load_before, load_after],
                                             "times_s": times, "cpu_s": cpu}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
