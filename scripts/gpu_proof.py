"""The proof on the target hardware, one command (issue 23; docs/benchmarks.md, "GPU proof").

    python scripts/gpu_proof.py --out DIR                              # a CUDA machine, --size full
    python scripts/gpu_proof.py --out DIR --device cpu --size small    # the CPU dry run (in the test suite)
    make gpu-proof                                                     # installs from .whl/ when needed, then runs it

Stages run most valuable first; each writes its file into DIR (atomically) as soon as it ends, and
a later invocation skips every stage whose file is there and records a result (``--redo STAGE``
runs one again). A stage whose file records a crash or an error (a profile that crashed or timed
out, an A/B or ``--apply`` that ended in an error, ncu's error) is not done: the summary lists it
under ``stages_failed``, the log says ERROR, and the next invocation runs it again:

    env            env.json: device (as torch names it), torch, CUDA, date
    ab:NAME        ab-NAME.json: the fixture against its full ``--fix --unsafe-fixes`` rewrite, one
                   A/B (``gpuperf-rewrite ab``): the speedups and their geometric mean. On CUDA a
                   ``prewarm`` first compiles every pending rewrite at once (inductor's caches)
    script:NAME    script-NAME.json: ``--apply --unsafe-fixes`` on a script of ``--scripts
                   MANIFEST`` (not a fixture) in a scratch copy of its folder
                   (scripts/gpu_proof_manifest.py)
    apply:NAME     apply-NAME.json: ``--apply --unsafe-fixes`` on the fixture, what a user runs
                   (profile, plan, search, commit in a scratch repository: what --apply keeps);
                   its first run is the fixture's profile; --no-apply leaves them out
    harmful:NAME   harmful-NAME.json: ``--apply --unsafe-fixes`` on a harmful-fix class
                   (fixtures/harmful/): a Sigmoid+BCELoss GAN, a gradient-penalty critic, DataParallel
    shim           shim-overhead.json: benchmarks/shim_overhead.py's workload with and without the shim
    profile:NAME   profile-NAME.json: the profile document of the fixture on the device (when its
                   --apply did not write one)
    ncu            ncu.json: Nsight Compute's top kernels of one fixture before and after its rewrite
                   (skipped with the reason without CUDA or ncu; --no-ncu leaves it out)

``--only KINDS`` keeps some kinds of stage (``env`` always runs). ``--budget SECONDS`` (default: one
~9-minute device call at --size full) bounds the invocation: a stage whose estimate
(scripts/gpu_proof_cost.py, fitted to the H100 runs, scaled by how the stages run so far compared
with theirs) does not fit in what is left is not started, and one still running at the deadline is
stopped and runs again next time. After every stage DIR/<gpu>-<date>.json summarises what is done
(``fixtures``, ``geomean_speedup``, ``scripts``, ...) and what is not (``stages_left``,
``stages_failed``), and ``--archive`` (a .tgz) holds the whole folder; ``--resume-from`` continues
an earlier session's (gpu_proof_store.py).

Exit codes: 0 every stage done and no harmful fix kept; 1 stages left or failed (run again: it
resumes) or a harmful fix kept; 2 usage or set-up error (a bad manifest included).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_proof_cost as cost  # noqa: E402  (sibling files: scripts/ is not a package)
import gpu_proof_stages as st  # noqa: E402
from gpu_proof_store import (folder_name, read_json, record_session, resume_from, slug,  # noqa: E402
                             write_archive, write_json)

from gpu_proof_manifest import ManifestError, ScriptEntry, read_manifest  # noqa: E402

from gpuperf_rewrite.runtime.schema import OK_STATUSES  # noqa: E402  (standard library only)

# Most valuable first: the largest expected GPU gains and the cheapest A/Bs lead; input_bound (its
# gain is CPU-side, its runs the longest) comes last.
FIXTURES = ("gpt_fp32", "cnn_item_logging", "resnet_no_amp", "loss_accumulation", "ddp_train", "input_bound")
HARMFUL = ("gan_bce", "wgan_gp", "dataparallel")
NCU_FIXTURE = "cnn_item_logging"
# ab: 3+3 runs at alpha 0.1 (one-sided p of 3+3 is at least 1/20 = 0.05 = alpha/2, so every B run
# must beat every A run): the six A/Bs took ~10 minutes of an H100 over two calls, ~12 with the
# prewarm (gpu_proof_cost.py, fitted to them); 4+4 at alpha 0.05 (--ab-runs 4) costs ~4 minutes
# more. apply: --apply's own 4+4 at alpha 0.05 (what a user's --apply commits with), each bounded
# by its budget.
SIZES: dict[str, dict[str, Any]] = {
    "full": {"budget": 510,
             "ab": {"runs": 3, "alpha": 0.1, "warmup": 5, "steps": 15, "timeout": 180,
                    "per_fixture": {"input_bound": (2, 6)}},
             # 240 s: the first 4+4 A/B of every fixture but input_bound ends inside it on an H100
             # (~100-175 s, gpu_proof_cost.apply_s); input_bound at 2 + 6 steps needs ~280 s.
             "apply": {"runs": 4, "max_runs": 4, "warmup": 5, "steps": 15, "timeout": 180, "budget": 240,
                       "per_fixture": {"input_bound": (2, 6)}, "per_fixture_budget": {"input_bound": 300}},
             "harmful": {"budget": 120},  # what --apply decides of a harmful class in 2 minutes
             "shim": {"runs": 3, "steps": 300, "warmup": 30, "size": "medium"},
             "ncu": {"steps": 40, "skip": 300, "count": 100, "timeout": 150}},
    "small": {"budget": 1800, "run_s": 8.0, "other_s": {"env": 10.0, "shim": 30.0, "ncu": 5.0},
              "ab": {"runs": 3, "alpha": 0.1, "warmup": 1, "steps": 3, "timeout": 120},
              "apply": {"runs": 4, "max_runs": 4, "warmup": 1, "steps": 3, "timeout": 120, "budget": 120},
              "harmful": {"budget": 120},
              "shim": {"runs": 1, "steps": 20, "warmup": 5, "size": "tiny"},
              "ncu": {"steps": 4, "skip": 0, "count": 50, "timeout": 120}},
}
RESERVE_S = 15.0  # kept free at the end of the budget: the summary and the archive
now = time.monotonic  # the budget's clock (replaced in tests)


class BudgetStop(KeyboardInterrupt):
    """Raised in the stage running when the budget ends: its processes are ended (the runners
    treat it as Ctrl-C), nothing of it is written, and it runs again next time."""


def log_to(path: Path) -> Callable[[str], None]:
    def log(message: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {message}"
        print(line, file=sys.stderr, flush=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    return log


def stage_files(stage: str) -> list[str]:
    kind, _, name = stage.partition(":")
    return [{"env": "env.json", "ab": f"ab-{name}.json", "harmful": f"harmful-{name}.json",
             "shim": "shim-overhead.json", "profile": f"profile-{name}.json", "apply": f"apply-{name}.json",
             "script": f"script-{name}.json", "ncu": "ncu.json"}[kind]]


KINDS = ("env", "ab", "script", "apply", "harmful", "shim", "profile", "ncu")


def plan_stages(args: argparse.Namespace) -> list[str]:
    """Most valuable first: the fixtures' A/Bs, the manifest's scripts (--scripts), the user's own
    command on each fixture, the harmful-fix classes, the shim overhead, the profiles (--apply
    writes each fixture's as its first run), ncu; ``--only`` keeps some kinds (and ``env``)."""
    stages = ["env", *(f"ab:{n}" for n in args.fixtures), *(f"script:{e.name}" for e in args.scripts),
              *([] if args.no_apply else [f"apply:{n}" for n in args.fixtures]),
              *(f"harmful:{n}" for n in args.harmful), "shim", *(f"profile:{n}" for n in args.fixtures),
              *([] if args.no_ncu else ["ncu"])]
    return [s for s in stages if args.only is None or s == "env" or s.partition(":")[0] in args.only]


def stage_failure(stage: str, doc: Any) -> str | None:
    """Why the stage's document records a failure rather than a result (a crashed or timed-out
    profile, an A/B or ``--apply`` that ended in an error, an ncu run that errored), or None. A
    failed stage is not done: the summary lists it under ``stages_failed`` and it runs again."""
    kind = stage.partition(":")[0]
    if not isinstance(doc, dict):
        return "its file is not a JSON object"
    if kind == "profile" and doc.get("status") not in OK_STATUSES:
        tail = str(doc.get("stderr_tail") or "").strip().splitlines()[-1:]
        return (f"{doc.get('status') or 'no status'} (exit {doc.get('exit_code')}): "
                f"{doc.get('error') or 'no error text'}" + (f"; {tail[0][:300]}" if tail else ""))
    if kind == "ab" and doc.get("verdict") in (None, "error"):
        return f"the A/B ended in an error: {doc.get('reason') or 'no reason given'}"
    if kind in ("apply", "harmful", "script") and doc.get("status") in (None, "error", "crashed"):
        return f"--apply ended in an error: {str(doc.get('error') or 'no report')[-300:]}"
    if kind == "ncu":
        errors = [f"{side}: {doc[side]['error']}" for side in ("before", "after")
                  if isinstance(doc.get(side), dict) and doc[side].get("error")]
        return "; ".join(errors) or None
    return None


def stage_state(out: Path, stage: str) -> tuple[str, str | None]:
    """("done" | "failed" | "missing", the failure's reason) from the stage's file in ``out``."""
    path = out / stage_files(stage)[0]
    if not path.exists():
        return "missing", None
    why = stage_failure(stage, read_json(path))
    return ("failed", why) if why else ("done", None)


def size_config(args: argparse.Namespace) -> dict[str, Any]:
    cfg = {k: (dict(v) if isinstance(v, dict) else v) for k, v in SIZES[args.size].items()}
    if args.ab_runs:
        cfg["ab"].update(runs=args.ab_runs, alpha=0.05 if args.ab_runs >= 4 else 0.1)
    if args.apply_budget:
        cfg["apply"].update(budget=args.apply_budget, per_fixture_budget={})
        cfg["harmful"]["budget"] = args.apply_budget
    return cfg


def run_stage(stage: str, out: Path, args: argparse.Namespace, cfg: dict[str, Any], left_s: float,
              log: Callable[[str], None]) -> None:
    kind, _, name = stage.partition(":")
    script_args = ["--size", args.size, "--device", args.device]
    if kind == "env":
        write_json(out / "env.json", {**st.environment(args.device), "size": args.size})
    elif kind == "ab":
        try:
            doc = st.ab_fixture(name, script_args, cfg["ab"], log)
        except Exception as exc:  # noqa: BLE001  the original fails there: a result, not a retry
            doc = {"name": name, "verdict": "error", "reason": f"{type(exc).__name__}: {exc}"}
        write_json(out / f"ab-{name}.json", doc)
    elif kind in ("apply", "harmful"):
        script = (st.FIXTURES if kind == "apply" else st.HARMFUL) / f"{name}.py"
        # Never plan past the deadline: --apply starts no A/B that cannot end within its budget.
        w, s = cost.steps_for(name, cfg["apply"])
        budget = cost.budget_for(name, cfg["apply"]) if kind == "apply" else cfg["harmful"]["budget"]
        acfg = {**cfg["apply"], "warmup": w, "steps": s,
                "budget": max(1.0, min(budget, left_s - cost.APPLY_OVER_BUDGET_S))}
        report, profile = st.apply_fixture(script, script_args, acfg, log, with_siblings=kind == "apply")
        if kind == "harmful":
            report["harmful_rules"] = st.harmful_rules(script)
        elif (profile is not None and stage_state(out, f"profile:{name}")[0] != "done"
              and stage_failure(f"profile:{name}", profile) is None):
            write_json(out / f"profile-{name}.json", profile)  # --apply's first run: the profile stage's
        write_json(out / f"{kind}-{name}.json", report)
    elif kind == "script":
        entry = next(e for e in args.scripts if e.name == name)
        acfg = {**cfg["apply"], "budget": max(1.0, min(entry.budget, left_s - cost.APPLY_OVER_BUDGET_S))}
        write_json(out / f"script-{name}.json", st.apply_external(entry, acfg, log))
    elif kind == "profile":
        w, s = cost.steps_for(name, cfg["ab"])
        doc = st.profile_directly(st.FIXTURES / f"{name}.py", script_args,
                                  {"steps": s, "warmup": w, "timeout": cfg["ab"]["timeout"]})
        write_json(out / f"profile-{name}.json", doc)
    elif kind == "shim":
        write_json(out / "shim-overhead.json", st.shim_overhead(args.device, cfg["shim"], log))
    elif kind == "ncu":
        write_json(out / "ncu.json", st.ncu_top_kernels(args.device, NCU_FIXTURE, args.size, cfg["ncu"], log))


JUDGED = ("faster", "slower", "no_difference")


def fixture_row(name: str, ab: dict[str, Any], apply: dict[str, Any] | None = None) -> dict[str, Any]:
    """One entry of ``fixtures``: the A/B of the fixture against its full rewrite; ``rules_kept``
    is what that A/B lets be committed (all of the rewrite's rules when it is ``faster``, else
    none); ``apply`` what ``--apply`` kept, once its stage ran."""
    verdict = ab.get("verdict") or "error"
    judged = verdict in JUDGED
    applied = list(ab.get("rules_applied") or [])
    row = {"name": name, "speedup": ab.get("speedup") if judged else None,
           "ci95": ab.get("ci95") if judged else None, "verdict": verdict,
           "rules_kept": applied if verdict == "faster" else [],
           "needs_gpu_before": list(ab.get("needs_gpu_before") or []), "rules_applied": applied,
           "p_value": ab.get("p_value"), "alpha": ab.get("alpha"), "runs": ab.get("runs"),
           "median_before": (ab.get("a") or {}).get("median"), "median_after": (ab.get("b") or {}).get("median"),
           "unit": ab.get("unit"), "loss_check": (ab.get("loss_check") or {}).get("status"),
           "wall_s": ab.get("wall_s"), "reason": ab.get("reason")}
    ov = ab.get("overhead") or {}
    if ov:  # issue 28's figures on this GPU: the A/B's wall time and how much of it was measured
        row["time"] = {k: ov.get(k) for k in ("wall_s", "measured_s", "measured_share", "server_start_s",
                                              "server_start_hidden_s", "starts", "fresh_because")}
    if apply is not None:
        row["apply"] = _apply_summary(apply)
    return row


def geomean(rows: list[dict[str, Any]]) -> tuple[float | None, list[str], dict[str, str]]:
    """The geometric mean of what the validated rewrites deliver: a ``faster`` fixture counts its
    measured speedup, a ``slower`` or ``no_difference`` one 1.0 (nothing would be committed: the
    script stays as it is); one that was not judged (``broken``, an error) is left out and listed,
    never counted as a pass."""
    over, excluded, logs = [], {}, []
    for r in rows:
        if r["verdict"] == "faster" and r["speedup"]:
            logs.append(math.log(r["speedup"]))
        elif r["verdict"] in JUDGED and r["speedup"] is not None:
            logs.append(0.0)
        else:
            excluded[r["name"]] = r["verdict"]
            continue
        over.append(r["name"])
    return (round(math.exp(sum(logs) / len(logs)), 4) if logs else None), over, excluded


def measured_geomean(rows: list[dict[str, Any]]) -> float | None:
    """The geometric mean of every judged A/B's point estimate, slower ones included."""
    logs = [math.log(r["speedup"]) for r in rows if r["verdict"] in JUDGED and r["speedup"]]
    return round(math.exp(sum(logs) / len(logs)), 4) if logs else None


def _apply_summary(rep: dict[str, Any]) -> dict[str, Any]:
    val = rep.get("validation") or {}
    return {"status": rep.get("status"), "rules_kept": list(rep.get("rules_applied") or []),
            "verdict": val.get("verdict"), "speedup": val.get("speedup"), "ci95": val.get("ci95"),
            "wall_s": rep.get("wall_s")}


def script_row(entry: ScriptEntry, rep: dict[str, Any]) -> dict[str, Any]:
    """One entry of ``scripts``: what ``--apply --unsafe-fixes`` kept of a manifest's script."""
    return {"name": entry.name, "folder": str(entry.folder), "script": entry.script,
            "arguments": list(entry.arguments), **_apply_summary(rep), "rules_tried": rep.get("rules_tried") or [],
            "needs_gpu": rep.get("needs_gpu") or [], "commit": rep.get("commit"), "error": rep.get("error")}


def harmful_row(name: str, rep: dict[str, Any]) -> dict[str, Any]:
    harmful = rep.get("harmful_rules") or []
    offered = set(rep.get("rules_tried") or ()) | set(rep.get("needs_gpu") or ())
    kept = list(rep.get("rules_applied") or [])
    return {"name": name, "status": rep.get("status"), "harmful_rules": harmful,
            "harmful_offered": sorted(offered & set(harmful)), "harmful_kept": sorted(set(kept) & set(harmful)),
            "rules_kept": kept, "dropped": rep.get("dropped") or {}, "needs_gpu": rep.get("needs_gpu") or [],
            "verdicts": [a.get("verdict") for a in rep.get("attempts") or []], "wall_s": rep.get("wall_s"),
            "error": rep.get("error")}


def _names(out: Path, prefix: str, first: list[str]) -> list[str]:
    return list(first) + [p.stem[len(prefix):] for p in sorted(out.glob(f"{prefix}*.json"))
                          if p.stem[len(prefix):] not in first]


def summarise(out: Path, args: argparse.Namespace, stages: list[str]) -> tuple[Path | None, dict[str, Any]]:
    env = read_json(out / "env.json")
    if env is None:
        return None, {}
    rows = [fixture_row(n, ab, read_json(out / f"apply-{n}.json"))
            for n in _names(out, "ab-", args.fixtures) if (ab := read_json(out / f"ab-{n}.json")) is not None]
    # every fixture's --apply, with or without its A/B (a session may run only the apply stages)
    applies = [{"name": n, **_apply_summary(rep)} for n in _names(out, "apply-", args.fixtures)
               if (rep := read_json(out / f"apply-{n}.json")) is not None]
    harm = [harmful_row(n, rep) for n in _names(out, "harmful-", args.harmful)
            if (rep := read_json(out / f"harmful-{n}.json")) is not None]
    geo, over, excluded = geomean(rows)
    states = {s: stage_state(out, s) for s in stages}
    failed = {s: why for s, (state, why) in states.items() if state == "failed"}
    scripts = {e.name: read_json(out / f"script-{e.name}.json") for e in args.scripts}
    doc = {"device": env["device"], "torch": env["torch"], "cuda": env["cuda"], "date": env["date"],
           "size": env.get("size"), "python": env.get("python"), "gpu_count": env.get("gpu_count"),
           "fixtures": rows, "geomean_speedup": geo, "geomean_over": over, "geomean_excluded": excluded,
           "geomean_measured": measured_geomean(rows), "applies": applies,
           "harmful": harm, "harmful_fixes_kept": {h["name"]: h["harmful_kept"] for h in harm if h["harmful_kept"]},
           "shim_overhead": read_json(out / "shim-overhead.json"), "ncu": read_json(out / "ncu.json"),
           "scripts": [script_row(e, rep) for e in args.scripts if (rep := scripts[e.name]) is not None],
           "profiles": sorted(p.stem[8:] for p in out.glob("profile-*.json")
                              if stage_failure(f"profile:{p.stem[8:]}", read_json(p)) is None),
           "stages_done": [s for s, (state, _) in states.items() if state == "done"],
           "stages_left": [s for s, (state, _) in states.items() if state != "done"],
           "stages_failed": failed,
           "sessions": read_json(out / "sessions.json") or [],
           "command": "python scripts/gpu_proof.py " + " ".join(args.argv)}
    path = out / f"{slug(env['device'])}-{env['date']}.json"
    write_json(path, doc)
    return path, doc


def check_device(args: argparse.Namespace, out: Path) -> str | None:
    """Why this invocation cannot run (None when it can): no CUDA for --device cuda, or DIR holding
    another device's or size's results (resuming into it would mix them)."""
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return ("no CUDA device is visible to torch here; the CPU dry run is "
                    "`python scripts/gpu_proof.py --out DIR --device cpu --size small`")
    env = read_json(out / "env.json")
    if env and (env.get("device_type"), env.get("size")) != (args.device, args.size):
        return (f"{out} holds results for --device {env.get('device_type')} --size {env.get('size')}; "
                f"use another --out (or remove it) for --device {args.device} --size {args.size}")
    return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--out", type=Path, required=True, help="results directory (created; resumed when it exists)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--size", choices=sorted(SIZES), default="full")
    p.add_argument("--fixtures", default=",".join(FIXTURES), help="comma-separated fixtures, in this order")
    p.add_argument("--harmful", default=",".join(HARMFUL), help="comma-separated harmful-fix classes")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for this invocation (default: the size's; 510 at --size full)")
    p.add_argument("--apply-budget", type=float, default=None, help="seconds per --apply (default: the size's)")
    p.add_argument("--ab-runs", type=int, choices=[3, 4, 5, 6], default=None,
                   help="runs per side of each fixture's A/B (3: alpha 0.1, the default; 4 or more: alpha 0.05)")
    p.add_argument("--resume-from", type=Path, default=None, metavar="ROOT",
                   help="an earlier session's results (a folder, or a folder of them: benchmarks/results/gpu-proof)")
    p.add_argument("--archive", type=Path, default=None, metavar="FILE.tgz",
                   help="rewrite this archive of DIR after every stage")
    p.add_argument("--redo", action="append", default=[], metavar="STAGE", help="run STAGE again (repeatable)")
    p.add_argument("--no-apply", action="store_true", help="leave out the fixtures' --apply stages")
    p.add_argument("--no-ncu", action="store_true", help="leave out the optional ncu stage")
    p.add_argument("--scripts", type=Path, default=None, metavar="MANIFEST",
                   help="a YAML/JSON list of scripts that are not fixtures (folder, script, arguments, budget): "
                        "each runs --apply --unsafe-fixes as the stage script:NAME (scripts/gpu_proof_manifest.py)")
    p.add_argument("--only", default=None, metavar="KINDS",
                   help=f"comma-separated stage kinds to run ({', '.join(KINDS[1:])}); env always runs")
    args = p.parse_args(argv)
    args.argv = argv
    if args.only is not None:
        args.only = [k.strip() for k in args.only.split(",") if k.strip()]
        unknown = [k for k in args.only if k not in KINDS]
        if unknown:
            p.error(f"--only: unknown stage kind(s) {', '.join(unknown)} (known: {', '.join(KINDS)})")
    try:
        args.scripts = ([] if args.scripts is None else
                        read_manifest(args.scripts, SIZES[args.size]["apply"]["budget"]))
    except ManifestError as exc:
        p.error(f"--scripts: {exc}")
    for attr, known, where in (("fixtures", FIXTURES + ("catalogue_misc", "optimized"), st.FIXTURES),
                               ("harmful", HARMFUL, st.HARMFUL)):
        names = [n.strip().removesuffix(".py") for n in getattr(args, attr).split(",") if n.strip()]
        unknown = [n for n in names if not (where / f"{n}.py").is_file()]
        if unknown:
            p.error(f"--{attr}: no {', '.join(unknown)} in {where} (known: {', '.join(known)})")
        setattr(args, attr, names)
    if args.budget is not None and args.budget <= 0:
        p.error("--budget must be positive")
    return args


class Clock:
    """The invocation's deadline, the estimates' calibration, and the alarm that stops a stage
    still running at the deadline."""

    def __init__(self, budget: float) -> None:
        self.start, self.budget = now(), budget
        self.deadline = self.start + budget
        self.ratios: list[float] = []
        self.in_stage = self.expired = False

    def left(self) -> float:
        return self.deadline - now()

    def scale(self) -> float:
        """Measured / estimated over the stages run so far (median, within 0.5-3)."""
        if not self.ratios:
            return 1.0
        r = sorted(self.ratios)[len(self.ratios) // 2]
        return min(3.0, max(0.5, r))

    def arm(self) -> None:
        def ring(signum: int, frame: Any) -> None:
            self.expired = True
            if self.in_stage:
                raise BudgetStop()
        if hasattr(signal, "setitimer"):
            signal.signal(signal.SIGALRM, ring)
            signal.setitimer(signal.ITIMER_REAL, max(0.01, self.left()))

    def disarm(self) -> None:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)


def _prewarm_if_due(stage: str, stages: list[str], out: Path, args: argparse.Namespace, cfg: dict[str, Any],
                    clock: Clock, state: dict[str, Any], log: Callable[[str], None], stage_s: float = 0.0) -> None:
    """Before the first pending A/B on CUDA: compile every pending rewrite at once (once per
    session: the caches live on the machine), if it and that A/B (``stage_s``) fit."""
    if args.device != "cuda" or not stage.startswith("ab:") or "prewarm" in state:
        return
    names = [s[3:] for s in stages
             if s.startswith("ab:") and (s in args.redo or stage_state(out, s)[0] != "done")]
    est = cost.prewarm_s(names) * clock.scale()
    state["prewarm"] = {"skipped": "no time"} if est + stage_s > clock.left() - RESERVE_S else None
    if state["prewarm"] is None:
        log(f"prewarm: compiling the rewrites of {', '.join(names)} at once (~{est:.0f} s)")
        try:
            state["prewarm"] = st.prewarm(names, ["--size", args.size, "--device", args.device],
                                          min(cfg["ab"]["timeout"], clock.left() - RESERVE_S), log)
        except Exception as exc:  # noqa: BLE001  only a head start: the A/Bs compile for themselves
            state["prewarm"] = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"prewarm: FAILED ({type(exc).__name__}: {exc}); the A/Bs compile cold")


def stage_estimate(stage: str, cfg: dict[str, Any], args: argparse.Namespace) -> float:
    """``cost.estimate``, with a manifest script's own --apply budget."""
    kind, _, name = stage.partition(":")
    if kind == "script":
        entry = next(e for e in args.scripts if e.name == name)
        return entry.budget + cost.APPLY_OVER_BUDGET_S
    return cost.estimate(stage, cfg)


def run_stages(out: Path, args: argparse.Namespace, stages: list[str], clock: Clock,
               log: Callable[[str], None], state: dict[str, Any]) -> None:
    cfg = size_config(args)
    for stage in stages:
        before, why = stage_state(out, stage)
        if stage not in args.redo and before == "done":
            log(f"{stage}: done before, skipped")
            continue
        if before == "failed" and stage not in args.redo:
            log(f"{stage}: failed before ({why}); it runs again")
        est = stage_estimate(stage, cfg, args) * clock.scale()
        if clock.expired or est > clock.left() - RESERVE_S:
            log(f"{stage}: not started (expected ~{est:.0f} s, {max(0, clock.left()):.0f} s of the budget left); "
                "run again to resume")
            continue  # a shorter stage further on may still fit
        clock.in_stage = True
        try:
            _prewarm_if_due(stage, stages, out, args, cfg, clock, state, log, est)
            log(f"{stage}: running (expected ~{est:.0f} s)")
            t0 = now()
            run_stage(stage, out, args, cfg, clock.left() - RESERVE_S, log)
        except BudgetStop:
            log(f"{stage}: stopped at the end of the budget; nothing written, it runs again next time")
            break
        except KeyboardInterrupt:
            if not clock.expired:
                raise
            log(f"{stage}: stopped at the end of the budget; nothing written, it runs again next time")
            break
        except Exception as exc:  # noqa: BLE001  one broken stage must not lose the others' results
            log(f"{stage}: FAILED ({type(exc).__name__}: {exc}); nothing written, it runs again next time\n"
                + traceback.format_exc())
            continue
        finally:
            clock.in_stage = False
        took = now() - t0
        after, why = stage_state(out, stage)
        if after != "done":  # a crash is no result: it calibrates nothing and runs again next time
            state.setdefault("failed", {})[stage] = {"wall_s": round(took, 1), "reason": why or "no file written"}
            _checkpoint(out, args, stages, state, log)
            log(f"{stage}: FAILED in {took:.0f} s ({why or 'no file written'}); it runs again next time")
            continue
        if stage.startswith(("ab:", "profile:")):  # the run-time model's stages calibrate it
            clock.ratios.append(took / cost.estimate(stage, cfg))
        state["stages"][stage] = round(took, 1)
        state.get("failed", {}).pop(stage, None)
        _checkpoint(out, args, stages, state, log)
        log(f"{stage}: done in {took:.0f} s (estimate x{clock.scale():.2f})")


def _checkpoint(out: Path, args: argparse.Namespace, stages: list[str], state: dict[str, Any],
                log: Callable[[str], None]) -> tuple[Path | None, dict[str, Any]]:
    """sessions.json, the summary and the archive, after every stage: what a lease cut off keeps."""
    env = read_json(out / "env.json")
    if env is not None:
        record_session(out, {**state["session"], "device": env["device"], "elapsed_s": round(now() - state["t0"], 1),
                             "stages": state["stages"], "failed": state.get("failed") or {},
                             "prewarm": state.get("prewarm")})
    path, doc = summarise(out, args, stages)
    if args.archive is not None and env is not None:
        write_archive(out, args.archive, folder_name(env))
    return path, doc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    why = check_device(args, out)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    stages = plan_stages(args)
    unknown = [s for s in args.redo if s not in stages]
    if unknown:
        print(f"error: --redo {', '.join(unknown)}: not a stage of this run ({', '.join(stages)})", file=sys.stderr)
        return 2
    log = log_to(out / "gpu_proof.log")
    clock = Clock(args.budget or SIZES[args.size]["budget"])
    state: dict[str, Any] = {"t0": clock.start, "stages": {}, "session": {
        "id": uuid.uuid4().hex[:12], "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "budget_s": clock.budget,
        "command": "python scripts/gpu_proof.py " + " ".join(args.argv),
        "install_s": float(os.environ["GPU_PROOF_INSTALL_S"]) if os.environ.get("GPU_PROOF_INSTALL_S") else None}}
    log(f"budget {clock.budget:.0f} s; stages: {', '.join(stages)}")
    clock.arm()
    try:
        if args.resume_from is not None:
            _resume(out, args, log)
        run_stages(out, args, stages, clock, log, state)
    finally:
        clock.disarm()
    path, doc = _checkpoint(out, args, stages, state, log)
    left = doc.get("stages_left", stages)
    log(f"summary: {path}; geomean speedup {doc.get('geomean_speedup')} over {doc.get('geomean_over')}; "
        f"{now() - clock.start:.0f} s of {clock.budget:.0f}; stages left: {', '.join(left) or 'none'}")
    for stage, why in (doc.get("stages_failed") or {}).items():
        log(f"ERROR {stage}: {why} (it runs again next time)")
    if doc.get("harmful_fixes_kept"):
        log(f"HARMFUL FIX KEPT: {doc['harmful_fixes_kept']}")
    return 1 if left or doc.get("harmful_fixes_kept") else 0


def _resume(out: Path, args: argparse.Namespace, log: Callable[[str], None]) -> None:
    """The earlier session's files of this device and size into DIR (its ``env.json`` too, whose
    date names the summary file, so a resumed proof keeps one summary)."""
    mine = read_json(out / "env.json") or {**st.environment(args.device), "size": args.size}
    resume_from(args.resume_from, out, mine, log)
    if not (out / "env.json").exists():
        write_json(out / "env.json", mine)


if __name__ == "__main__":
    sys.exit(main())
