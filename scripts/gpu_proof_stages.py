"""The stages of ``scripts/gpu_proof.py``: each returns the JSON document its file gets.

Every measurement goes through the package's own API (``validate.apply.run_apply`` with the
engine's rewriter, the runtime shim through ``validate.run.profiling``), never a re-implementation:
what is proven on the GPU is exactly what a user's ``--apply --unsafe-fixes`` does.
"""

from __future__ import annotations

import atexit
import csv
import glob
import importlib.util
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from gpu_proof_manifest import ScriptEntry

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
HARMFUL = FIXTURES / "harmful"
Log = Callable[[str], None]


def _benchmark(name: str) -> Any:
    """A module of benchmarks/ (not a package): rewrite_gains, shim_overhead."""
    spec = importlib.util.spec_from_file_location(f"gpu_proof_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def environment(device: str) -> dict[str, Any]:
    """What the proof ran on: ``device`` as torch names it, torch and CUDA versions."""
    import torch

    from gpuperf_rewrite.runtime.measure.fingerprint import cpu_name

    doc: dict[str, Any] = {"device_type": device, "torch": torch.__version__, "cuda": torch.version.cuda,
                           "python": platform.python_version(), "cpu": cpu_name(), "cpu_count": os.cpu_count(),
                           "date": time.strftime("%Y-%m-%d", time.gmtime())}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        doc.update(device=torch.cuda.get_device_name(0), gpu_count=torch.cuda.device_count(),
                   capability=f"{props.major}.{props.minor}", gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   multiprocessors=props.multi_processor_count)
    else:
        doc["device"] = f"cpu ({doc['cpu']})"
    return doc


_WORK: dict[str, Path] = {}  # this process's copy of fixtures/ with the rewrites (prewarm and ab share it)


def work_dir() -> Path:
    """One copy of ``fixtures/`` per process, the rewrites beside the originals: the ``prewarm``
    compiles and the A/Bs run the very same files at the same paths, so inductor's caches hit."""
    if "dir" not in _WORK:
        root = Path(tempfile.mkdtemp(prefix="gpu-proof-work-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        shutil.copytree(FIXTURES, root / "fixtures", ignore=shutil.ignore_patterns("__pycache__", "harmful"))
        _WORK["dir"] = root / "fixtures"
    return _WORK["dir"]


def rewritten(name: str) -> tuple[Path, Path, list[str]]:
    """(original, its full ``--fix --unsafe-fixes`` rewrite, the rules applied) in :func:`work_dir`."""
    work = work_dir()
    original, fixed_path = work / f"{name}.py", work / f"{name}__rewritten.py"
    fixed, applied = _benchmark("rewrite_gains").rewrite(original.read_bytes(), str(original))
    if not fixed_path.exists() or fixed_path.read_bytes() != fixed:
        fixed_path.write_bytes(fixed)
    return original, fixed_path, sorted(applied)


def ab_fixture(name: str, script_args: list[str], ab: dict[str, Any], log: Log) -> dict[str, Any]:
    """The fixture against its full unsafe rewrite (what ``gpuperf-rewrite ab ORIGINAL REWRITE``
    decides, as benchmarks/rewrite_gains.py does): the A/B's JSON, the rules applied, the fixes a
    CPU-only ``--apply`` would list as needing a GPU, and the stage's wall time."""
    from gpuperf_rewrite.validate.judge.abtest import run_ab
    from gpuperf_rewrite.validate.run.config import ABConfig

    t0 = time.monotonic()
    original, fixed, applied = rewritten(name)
    warmup, steps = ab.get("per_fixture", {}).get(name, (ab["warmup"], ab["steps"]))
    cfg = ABConfig(runs=ab["runs"], max_runs=ab["runs"], min_runs=ab["runs"], steps=steps, warmup=warmup,
                   timeout=ab["timeout"], alpha=ab["alpha"])

    def progress(ev: Any) -> None:
        if getattr(ev, "phase", "") == "done":
            log(f"  run {ev.run}/{ev.total} ({ev.side}) speedup so far {ev.speedup}")

    res = run_ab(original, fixed, script_args, config=cfg, cwd=original.parent, progress=progress,
                 source_a=original.read_text(), source_b=fixed.read_text()).to_json()
    res.update(name=name, rules_applied=applied, needs_gpu_before=needs_gpu_on_cpu({"rules_tried": applied}),
               script_args=script_args, wall_s=round(time.monotonic() - t0, 1))
    return res


def prewarm(names: list[str], script_args: list[str], timeout: float, log: Log) -> dict[str, Any]:
    """Compile every rewrite in ``names`` once, all at the same time (a few steps each, under the
    shim like the A/B's runs), so that each A/B's rewritten runs find inductor's caches warm and
    the cold compiles overlap instead of adding up. Measures nothing that is reported."""
    from concurrent.futures import ThreadPoolExecutor

    from gpuperf_rewrite.validate.run.profiling import run_profile

    def one(name: str) -> tuple[str, dict[str, Any]]:
        _, fixed, _ = rewritten(name)
        t0 = time.monotonic()
        doc = run_profile(fixed, script_args, steps=2, warmup=1, timeout=timeout, cwd=fixed.parent)
        return name, {"status": doc.get("status"), "wall_s": round(time.monotonic() - t0, 1),
                      "error": doc.get("error")}

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        done = dict(pool.map(one, names))
    summary = ", ".join(f"{n} {d['wall_s']} s ({d['status']})" for n, d in done.items())
    log(f"  prewarm: {summary}")
    return {"fixtures": done, "wall_s": round(time.monotonic() - t0, 1)}


def _scratch_repo(tmp: Path, script: Path, with_siblings: bool) -> tuple[Path, bool]:
    """``script`` copied into a fresh directory, committed in a fresh git repository when git and
    GitPython are there (so --apply commits, as for a user); (the copy, whether it is committed)."""
    work = tmp / "repo"
    if with_siblings:  # helpers next to the fixtures stay importable
        shutil.copytree(script.parent, work, ignore=shutil.ignore_patterns("__pycache__", "harmful"))
    else:
        work.mkdir()
        shutil.copy(script, work / script.name)
    return work / script.name, _git_committed(work, "fixtures")


def _git(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=work, check=True, capture_output=True, text=True)


def _git_committed(work: Path, message: str) -> bool:
    """Make ``work`` a git repository whose HEAD holds all of it (a fresh one unless it is the
    top of one already; then only its uncommitted files are committed), so --apply commits
    there as for a user; False when git or GitPython is missing (--apply then runs --no-commit)."""
    if shutil.which("git") is None:
        return False
    try:
        import git  # noqa: F401  (GitPython: what --apply commits with)
    except ImportError:
        return False
    if not (work / ".git").exists():
        _git(work, "init", "-q")
    for key, value in (("user.name", "gpu-proof"), ("user.email", "gpu-proof@example.invalid"),
                       ("commit.gpgsign", "false")):
        _git(work, "config", key, value)
    _git(work, "add", "-A")
    if _git(work, "status", "--porcelain").stdout.strip():
        _git(work, "commit", "-q", "-m", message)
    return True


def apply_fixture(script: Path, script_args: list[str], cfg: dict[str, Any], log: Log,
                  with_siblings: bool = True) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``gpuperf-rewrite SCRIPT --apply --unsafe-fixes --json --budget B -- ARGS`` in a scratch
    repository, through the API: (the --apply report plus what the proof adds, the profile
    document of the original: the first run --apply makes, which plans the validation)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-proof-") as tmp:
        target, committed = _scratch_repo(Path(tmp), script, with_siblings)
        report, profile = apply_in(target, target.parent, committed, script_args, cfg, log)
    report["wall_s"] = round(time.monotonic() - t0, 1)
    return report, profile


def apply_external(entry: ScriptEntry, cfg: dict[str, Any], log: Log) -> dict[str, Any]:
    """A manifest's script (``gpu_proof_manifest.ScriptEntry``): ``--apply --unsafe-fixes`` run
    from the top of a scratch copy of its folder (the folder itself is never changed), committed
    there as for the user; the report adds the entry and the diff of what was committed."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-proof-script-") as tmp:
        work = Path(tmp) / entry.folder.name
        shutil.copytree(entry.folder, work, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        if (work / ".git").is_file():  # a worktree's or submodule's link: commits would land in the original
            (work / ".git").unlink()
        committed = _git_committed(work, "gpu-proof: the script as given")
        base = _git(work, "rev-parse", "HEAD").stdout.strip() if committed else None
        report, _ = apply_in(work / entry.script, work, committed, list(entry.arguments), cfg, log)
        if committed and report.get("status") == "committed":
            report["diff"] = _git(work, "diff", f"{base}..HEAD").stdout[-20000:]
    report.update(name=entry.name, folder=str(entry.folder), script=entry.script,
                  wall_s=round(time.monotonic() - t0, 1))
    return report


def apply_in(target: Path, cwd: Path, committed: bool, script_args: list[str], cfg: dict[str, Any],
             log: Log) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """--apply of ``target`` run from ``cwd`` (where the user would type the command): (the
    report plus what the proof adds, the profile document of its first run)."""
    from gpuperf_rewrite.lint.api import load_settings
    from gpuperf_rewrite.validate.judge.abtest import ABConfig, default_runner
    from gpuperf_rewrite.validate.apply import ApplyError, ApplyOptions, run_apply
    from gpuperf_rewrite.validate.run.runs import RunDoc, RunRequest

    profiles: list[dict[str, Any]] = []
    base = default_runner()

    def runner(request: RunRequest) -> RunDoc:
        doc = base(request)
        if not profiles:
            profiles.append(dict(doc))
        return doc

    messages: list[str] = []

    def echo(message: str = "", err: bool = False) -> None:
        messages.append(message)
        if message.lstrip().startswith("{") and not err:
            return  # the JSON report: read below, not logged
        log(f"  {message}")

    ab = ABConfig(runs=cfg["runs"], max_runs=cfg["max_runs"], steps=cfg["steps"], warmup=cfg["warmup"],
                  timeout=cfg["timeout"])
    t0 = time.monotonic()
    here = os.getcwd()
    os.chdir(cwd)  # the runs start where the user's command would: never in this project's root
    try:
        code = run_apply(str(target), settings=load_settings(isolated=True), script_args=script_args,
                         config=ab, options=ApplyOptions(json_out=True, budget_s=cfg["budget"],
                                                         no_commit=not committed),
                         runner=runner, echo=echo)
    except ApplyError as exc:
        code, messages = 2, [*messages, f"error: {exc}"]
    finally:
        os.chdir(here)
    if code in (130, 143):  # run_apply's exit codes for Ctrl-C / SIGTERM
        raise KeyboardInterrupt  # stop the proof; the stage is not recorded, so it runs again
    report = _report_from(messages, code)
    report.update(exit_code=code, wall_s=round(time.monotonic() - t0, 1), scratch_repo_committed=committed,
                  script_args=script_args, config={k: cfg[k] for k in ("runs", "max_runs", "steps", "warmup",
                                                                        "timeout", "budget")})
    report["needs_gpu_before"] = needs_gpu_on_cpu(report)
    return report, (profiles[0] if profiles else None)


def _report_from(messages: list[str], code: int) -> dict[str, Any]:
    for message in reversed(messages):
        if message.lstrip().startswith("{"):
            try:
                return json.loads(message)
            except ValueError:
                break
    if code == 0:  # run_apply returns 0 without a report when no rule has a fix for the script
        return {"status": "nothing_to_fix", "rules_tried": [], "rules_applied": [], "needs_gpu": []}
    tail = [m for m in messages if m.startswith(("error", "refused"))] or messages[-3:]
    return {"status": "error", "error": "\n".join(tail)[-2000:], "rules_tried": [], "rules_applied": [],
            "needs_gpu": []}


def needs_gpu_on_cpu(report: dict[str, Any]) -> list[str]:
    """The fixes a CPU-only ``--apply`` lists as "needs a GPU to validate" for this script: the
    plan's own rule (validate.plan.make_plan) on a CPU profile."""
    from gpuperf_rewrite.validate.plan import make_plan

    codes = sorted(set(report.get("rules_tried") or ()) | set(report.get("needs_gpu") or ()))
    return list(make_plan({"fingerprint": {"device": "cpu"}}, 0.0, codes, 2).needs_gpu)


def profile_directly(script: Path, script_args: list[str], cfg: dict[str, Any]) -> dict[str, Any]:
    """A profile run of its own, for a script --apply did not run (nothing to fix)."""
    from gpuperf_rewrite.validate.run.profiling import run_profile

    return run_profile(script, script_args, steps=cfg["steps"], warmup=cfg["warmup"], timeout=cfg["timeout"],
                       cwd=script.parent)


def harmful_rules(script: Path) -> list[str]:
    """The codes of the script's ``Harmful if applied:`` docstring line."""
    m = re.search(r"^Harmful if applied: (.*)$", script.read_text(), re.MULTILINE)
    return m.group(1).split() if m else []


def shim_overhead(device: str, sc: dict[str, Any], log: Log) -> dict[str, Any]:
    """benchmarks/shim_overhead.py's end-to-end measurement: the same workload with and without
    the shim, interleaved, on ``device``."""
    mod = _benchmark("shim_overhead")
    return mod.end_to_end(sc["runs"], sc["steps"], sc["warmup"], sc["size"], 1, device, log=log)


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu", "/usr/local/NVIDIA-Nsight-Compute*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def ncu_top_kernels(device: str, fixture: str, size: str, nc: dict[str, Any], log: Log) -> dict[str, Any]:
    """Nsight Compute's kernel times for ``fixture`` before and after its full unsafe rewrite
    (what rewrite_gains.py A/Bs): the top kernels by total time in a window of launches after
    the warm-up. Skipped, with the reason, where it cannot run."""
    if device != "cuda":
        return {"skipped": "ncu profiles CUDA kernels; this run is on the CPU"}
    ncu = find_ncu()
    if ncu is None:
        return {"skipped": "ncu (Nsight Compute) was not found on PATH or under /opt/nvidia/nsight-compute"}
    gains = _benchmark("rewrite_gains")
    out: dict[str, Any] = {"fixture": fixture, "ncu": ncu, "launch_skip": nc["skip"], "launch_count": nc["count"]}
    with tempfile.TemporaryDirectory(prefix="gpu-proof-ncu-") as tmp:
        work = Path(tmp) / "fixtures"
        shutil.copytree(FIXTURES, work, ignore=shutil.ignore_patterns("__pycache__", "harmful"))
        original = work / f"{fixture}.py"
        fixed, applied = gains.rewrite(original.read_bytes(), str(original))
        rewritten = work / f"{fixture}__rewritten.py"
        rewritten.write_bytes(fixed)
        out["rules_applied"] = sorted(applied)
        for label, path in (("before", original), ("after", rewritten)):
            cmd = [ncu, "--clock-control", "none", "--target-processes", "application-only", "--csv",
                   "--metrics", "gpu__time_duration.sum", "--launch-skip", str(nc["skip"]),
                   "--launch-count", str(nc["count"]), sys.executable, str(path), "--size", size,
                   "--device", "cuda", "--steps", str(nc["steps"])]
            log(f"  ncu {label}: {' '.join(cmd[-8:])}")
            out[label] = _ncu_run(cmd, work, nc["timeout"])
    return out


def _ncu_run(cmd: list[str], cwd: Path, timeout: float) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"ncu ran past {timeout:g} s", "wall_s": round(time.monotonic() - t0, 1)}
    res: dict[str, Any] = {"exit_code": proc.returncode, "wall_s": round(time.monotonic() - t0, 1)}
    kernels = parse_ncu_csv(proc.stdout)
    if not kernels:
        res["error"] = "no kernel rows in ncu's output"
        res["output_tail"] = (proc.stdout[-1500:] + proc.stderr[-1500:])
        return res
    total = sum(k["total_us"] for k in kernels)
    res.update(kernels_profiled=sum(k["launches"] for k in kernels), total_us=round(total, 1),
               top=[{**k, "share": round(k["total_us"] / total, 4)} for k in kernels[:10]])
    return res


_UNIT_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Kernels from ``ncu --csv --metrics gpu__time_duration.sum`` output, grouped by name and
    sorted by total time (us), longest first."""
    start = text.find('"ID"')
    if start < 0:
        return []
    by_name: dict[str, dict[str, Any]] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            value = float(str(row.get("Metric Value", "")).replace(",", ""))
        except ValueError:
            continue
        us = value * _UNIT_US.get(str(row.get("Metric Unit", "")).strip(), 1.0)
        name = str(row.get("Kernel Name", "?"))
        k = by_name.setdefault(name, {"kernel": name[:200], "launches": 0, "total_us": 0.0})
        k["launches"] += 1
        k["total_us"] += us
    kernels = sorted(by_name.values(), key=lambda k: -k["total_us"])
    for k in kernels:
        k["total_us"] = round(k["total_us"], 2)
    return kernels
