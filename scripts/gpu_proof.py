"""The proof on the target hardware, one command (issue 23; docs/benchmarks.md, "GPU proof").

    python scripts/gpu_proof.py --out DIR                              # a CUDA machine, --size full
    python scripts/gpu_proof.py --out DIR --device cpu --size small    # the CPU dry run (in the test suite)
    make gpu-proof                                                     # installs from .whl/ when needed, then runs it

Stages run in this order; each writes its file into DIR (atomically) as soon as it ends, and a
second invocation skips every stage whose file is there, so a run cut off by a lease resumes
where it stopped (``--redo STAGE`` runs one again):

    env            env.json: device (as torch names it), torch, CUDA, date
    fixture:NAME   apply-NAME.json: ``--apply --unsafe-fixes --json --budget B`` on the fixture in a
                   scratch git repository (profile, plan, A/B search, commit), and profile-NAME.json:
                   the profile document of the original (the first run --apply makes)
    harmful:NAME   harmful-NAME.json: the same on a harmful-fix class (fixtures/harmful/): a
                   Sigmoid+BCELoss GAN, a gradient-penalty critic, a DataParallel model
    shim           shim-overhead.json: benchmarks/shim_overhead.py's workload with and without the shim
    ncu            ncu.json: Nsight Compute's top kernels of one fixture before and after its rewrite
                   (optional; skipped with the reason without CUDA or ncu; --no-ncu leaves it out)

After every stage, DIR/<gpu>-<date>.json summarises what is there: ``device``, ``torch``,
``cuda``, ``fixtures`` (``name``, ``speedup``, ``ci95``, ``verdict``, ``rules_kept``,
``needs_gpu_before``, ...), ``geomean_speedup``, ``harmful``, ``shim_overhead``, ``ncu``.

Exit codes: 0 every stage done and no harmful fix kept; 1 stages left (``--time-limit`` stopped it:
run the same command again) or a harmful fix was kept; 2 usage or set-up error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_proof_stages as st  # noqa: E402  (a sibling file: scripts/ is not a package)

FIXTURES = ("cnn_item_logging", "resnet_no_amp", "gpt_fp32", "input_bound", "loss_accumulation", "ddp_train")
HARMFUL = ("gan_bce", "wgan_gp", "dataparallel")
NCU_FIXTURE = "cnn_item_logging"
# Per size: the A/B of each --apply, its time budget, the shim workload and the ncu window. 4+4
# runs, no extension, is the fewest that can decide at alpha/2 (every B run beats every A run:
# p = 1/70); a sequential extension would lower the per-look level below what 4+4 can reach and
# make every A/B run 5+5 or more. "full" is sized for an H100 inside a 10-minute call: the
# budget stops the search before an A/B whose estimate does not fit.
SIZES: dict[str, dict[str, Any]] = {
    "full": {"runs": 4, "max_runs": 4, "steps": 30, "warmup": 10, "timeout": 240, "budget": 240,
             "shim": {"runs": 5, "steps": 300, "warmup": 30, "size": "medium"},
             "ncu": {"steps": 60, "skip": 300, "count": 300, "timeout": 200}},
    "small": {"runs": 4, "max_runs": 4, "steps": 3, "warmup": 1, "timeout": 120, "budget": 120,
              "shim": {"runs": 1, "steps": 20, "warmup": 5, "size": "tiny"},
              "ncu": {"steps": 4, "skip": 0, "count": 50, "timeout": 120}},
}
# Seconds a stage is expected to take at most, for --time-limit; --apply stages: the budget plus
# the rewrites and an A/B running past its estimate (one is only started when its estimate fits).
EXPECTED_S = {"env": 30, "apply_over_budget": 60, "shim": 150, "ncu": 450}


def log_to(path: Path) -> Callable[[str], None]:
    def log(message: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {message}"
        print(line, file=sys.stderr, flush=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    return log


def write_json(path: Path, doc: Any) -> None:
    """Atomically: a reader (or a resumed run) never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, default=str)
        fh.write("\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def stage_files(stage: str) -> list[str]:
    kind, _, name = stage.partition(":")
    return {"env": ["env.json"], "fixture": [f"apply-{name}.json", f"profile-{name}.json"],
            "harmful": [f"harmful-{name}.json"], "shim": ["shim-overhead.json"], "ncu": ["ncu.json"]}[kind]


def plan_stages(args: argparse.Namespace) -> list[str]:
    stages = ["env", *(f"fixture:{n}" for n in args.fixtures), *(f"harmful:{n}" for n in args.harmful), "shim"]
    return stages + ([] if args.no_ncu else ["ncu"])


def run_stage(stage: str, out: Path, args: argparse.Namespace, log: Callable[[str], None]) -> None:
    kind, _, name = stage.partition(":")
    cfg = {**SIZES[args.size], **({"budget": args.budget} if args.budget else {})}
    script_args = ["--size", args.size, "--device", args.device]
    if kind == "env":
        write_json(out / "env.json", {**st.environment(args.device), "size": args.size})
    elif kind in ("fixture", "harmful"):
        script = (st.FIXTURES if kind == "fixture" else st.HARMFUL) / f"{name}.py"
        report, profile = st.apply_fixture(script, script_args, cfg, log, with_siblings=kind == "fixture")
        if kind == "harmful":
            report["harmful_rules"] = st.harmful_rules(script)
            write_json(out / f"harmful-{name}.json", report)
            return
        if profile is None:  # --apply ran nothing (no fix): profile the fixture on its own
            profile = st.profile_directly(script, script_args, cfg)
        write_json(out / f"profile-{name}.json", profile)
        write_json(out / f"apply-{name}.json", report)  # last: its presence marks the stage done
    elif kind == "shim":
        write_json(out / "shim-overhead.json", st.shim_overhead(args.device, cfg["shim"], log))
    elif kind == "ncu":
        write_json(out / "ncu.json", st.ncu_top_kernels(args.device, NCU_FIXTURE, args.size, cfg["ncu"], log))


def fixture_row(name: str, rep: dict[str, Any]) -> dict[str, Any]:
    """One entry of ``fixtures``: the deciding A/B of --apply (the commit's when a rewrite was
    kept, else its last), what was kept, what a CPU-only run would have listed as needing a GPU."""
    status = rep.get("status", "error")
    val = rep.get("validation") or {}
    judged = status in ("committed", "written", "rejected") and bool(val)
    return {"name": name, "speedup": val.get("speedup") if judged else None,
            "ci95": val.get("ci95") if judged else None,
            "verdict": val.get("verdict") if judged else status,
            "rules_kept": list(rep.get("rules_applied") or []),
            "needs_gpu_before": list(rep.get("needs_gpu_before") or []),
            "status": status, "rules_tried": list(rep.get("rules_tried") or []),
            "dropped": rep.get("dropped") or {}, "not_tried": rep.get("not_tried") or {},
            "needs_gpu": list(rep.get("needs_gpu") or []), "abs": len(rep.get("attempts") or []),
            "wall_s": rep.get("wall_s"), "error": rep.get("error"),
            # the last A/B's numbers also when they decided nothing (a search the budget stopped)
            "last_ab": {k: val.get(k) for k in ("verdict", "speedup", "ci95", "reason")} if val else None}


def geomean(rows: list[dict[str, Any]]) -> tuple[float | None, list[str], dict[str, str]]:
    """The geometric mean of what --apply delivered: a kept rewrite counts its measured speedup, a
    script left unchanged after a judged A/B counts 1.0; a fixture that was not judged (needs a
    GPU, budget ran out, error) is left out and listed, never counted as a pass."""
    over, excluded, logs = [], {}, []
    for r in rows:
        if r["status"] in ("committed", "written") and r["speedup"]:
            logs.append(math.log(r["speedup"]))
        elif r["status"] == "rejected" and r["speedup"] is not None:
            logs.append(0.0)
        else:
            excluded[r["name"]] = r["status"]
            continue
        over.append(r["name"])
    return (round(math.exp(sum(logs) / len(logs)), 4) if logs else None), over, excluded


def harmful_row(name: str, rep: dict[str, Any]) -> dict[str, Any]:
    harmful = rep.get("harmful_rules") or []
    offered = set(rep.get("rules_tried") or ()) | set(rep.get("needs_gpu") or ())
    kept = list(rep.get("rules_applied") or [])
    return {"name": name, "status": rep.get("status"), "harmful_rules": harmful,
            "harmful_offered": sorted(offered & set(harmful)), "harmful_kept": sorted(set(kept) & set(harmful)),
            "rules_kept": kept, "dropped": rep.get("dropped") or {}, "needs_gpu": rep.get("needs_gpu") or [],
            "verdicts": [a.get("verdict") for a in rep.get("attempts") or []], "wall_s": rep.get("wall_s"),
            "error": rep.get("error")}


def summarise(out: Path, args: argparse.Namespace, stages: list[str]) -> tuple[Path | None, dict[str, Any]]:
    env = read_json(out / "env.json")
    if env is None:
        return None, {}
    names = list(args.fixtures) + [p.stem[6:] for p in sorted(out.glob("apply-*.json")) if p.stem[6:] not in args.fixtures]
    bad = list(args.harmful) + [p.stem[8:] for p in sorted(out.glob("harmful-*.json")) if p.stem[8:] not in args.harmful]
    rows = [fixture_row(n, rep) for n in names if (rep := read_json(out / f"apply-{n}.json")) is not None]
    harm = [harmful_row(n, rep) for n in bad if (rep := read_json(out / f"harmful-{n}.json")) is not None]
    geo, over, excluded = geomean(rows)
    done = {s: all((out / f).exists() for f in stage_files(s)) for s in stages}
    doc = {"device": env["device"], "torch": env["torch"], "cuda": env["cuda"], "date": env["date"],
           "size": env.get("size"), "python": env.get("python"), "gpu_count": env.get("gpu_count"),
           "fixtures": rows, "geomean_speedup": geo, "geomean_over": over, "geomean_excluded": excluded,
           "harmful": harm, "harmful_fixes_kept": {h["name"]: h["harmful_kept"] for h in harm if h["harmful_kept"]},
           "shim_overhead": read_json(out / "shim-overhead.json"), "ncu": read_json(out / "ncu.json"),
           "stages_done": [s for s, ok in done.items() if ok], "stages_left": [s for s, ok in done.items() if not ok],
           "command": "python scripts/gpu_proof.py " + " ".join(args.argv)}
    slug = re.sub(r"[^a-z0-9]+", "-", env["device"].lower()).strip("-")
    path = out / f"{slug}-{env['date']}.json"
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
    p.add_argument("--fixtures", default=",".join(FIXTURES), help="comma-separated fixtures (default: the six)")
    p.add_argument("--harmful", default=",".join(HARMFUL), help="comma-separated harmful-fix classes")
    p.add_argument("--budget", type=float, default=None, help="seconds per --apply (default: the size's)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds: start no stage that is not expected to end within this (then exit 1)")
    p.add_argument("--redo", action="append", default=[], metavar="STAGE", help="run STAGE again (repeatable)")
    p.add_argument("--no-ncu", action="store_true", help="leave out the optional ncu stage")
    args = p.parse_args(argv)
    args.argv = argv
    for attr, known, where in (("fixtures", FIXTURES + ("catalogue_misc", "optimized"), st.FIXTURES),
                               ("harmful", HARMFUL, st.HARMFUL)):
        names = [n.strip().removesuffix(".py") for n in getattr(args, attr).split(",") if n.strip()]
        unknown = [n for n in names if not (where / f"{n}.py").is_file()]
        if unknown:
            p.error(f"--{attr}: no {', '.join(unknown)} in {where} (known: {', '.join(known)})")
        setattr(args, attr, names)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    why = check_device(args, out)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    log = log_to(out / "gpu_proof.log")
    stages, start = plan_stages(args), time.monotonic()
    budget = args.budget or SIZES[args.size]["budget"]
    unknown = [s for s in args.redo if s not in stages]
    if unknown:
        print(f"error: --redo {', '.join(unknown)}: not a stage of this run ({', '.join(stages)})", file=sys.stderr)
        return 2
    for stage in stages:
        files = [out / f for f in stage_files(stage)]
        if stage not in args.redo and all(f.exists() for f in files):
            log(f"{stage}: done before, skipped")
            continue
        kind = stage.partition(":")[0]
        expected = budget + EXPECTED_S["apply_over_budget"] if kind in ("fixture", "harmful") else EXPECTED_S[kind]
        if args.time_limit is not None and time.monotonic() - start + expected > args.time_limit:
            log(f"{stage}: not started (expected ~{expected:.0f} s, past --time-limit); run again to resume")
            continue  # a shorter stage further on may still fit
        log(f"{stage}: running")
        t0 = time.monotonic()
        try:
            run_stage(stage, out, args, log)
        except Exception as exc:  # noqa: BLE001  one broken stage must not lose the others' results
            log(f"{stage}: FAILED ({type(exc).__name__}: {exc}); nothing written, it runs again next time\n"
                + traceback.format_exc())
            continue
        path, _ = summarise(out, args, stages)
        log(f"{stage}: done in {time.monotonic() - t0:.0f} s -> {path.name if path else '?'}")
    path, doc = summarise(out, args, stages)
    left = doc.get("stages_left", stages)
    log(f"summary: {path}; geomean speedup {doc.get('geomean_speedup')} over {doc.get('geomean_over')}; "
        f"stages left: {', '.join(left) or 'none'}")
    if doc.get("harmful_fixes_kept"):
        log(f"HARMFUL FIX KEPT: {doc['harmful_fixes_kept']}")
    return 1 if left or doc.get("harmful_fixes_kept") else 0


if __name__ == "__main__":
    sys.exit(main())
