"""Rewrite gains: every fixture, original vs its ``--fix --unsafe-fixes`` rewrite, through the A/B
validator; one table.

    python benchmarks/rewrite_gains.py                                   # CPU, small size
    python benchmarks/rewrite_gains.py --size full --device cuda         # a GPU machine
    python benchmarks/rewrite_gains.py --ablation                        # + each rule's fix alone

For each fixture the rewrite is produced with the engine (all default rules, unsafe fixes
included: exactly what ``gpuperf-rewrite --fix --unsafe-fixes`` writes) into a temporary copy of
``fixtures/``, then ``gpuperf-rewrite ab ORIGINAL REWRITE --json - -- --size S --device D`` runs both
alternately under the runtime shim and decides (Mann-Whitney + bootstrap CI, loss check).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
# The six workloads of the benchmark (optimized.py must stay clean; catalogue_misc is a rule
# catalogue, not a workload).
DEFAULT_FIXTURES = ("cnn_item_logging", "resnet_no_amp", "gpt_fp32", "input_bound",
                    "loss_accumulation", "ddp_train")


def rewrite(source: bytes, path: str, codes: tuple[str, ...] | None = None) -> tuple[bytes, dict[str, int]]:
    """The unsafe-fix rewrite of ``source`` (only ``codes``' fixes when given) and the fixes
    applied per rule."""
    from gpuperf_rewrite.lint.engine import RuleSet, check_source
    from gpuperf_rewrite.lint.registry import all_rules

    enabled = tuple(c for c, r in all_rules().items() if r.default_enabled)
    res = check_source(source, path, RuleSet(enabled), "unsafe", fix_codes=codes)
    return (res.fixed if res.fixed is not None else source), dict(res.applied)


def run_ab(a: Path, b: Path, args: argparse.Namespace) -> dict[str, Any]:
    gp = shutil.which("gpuperf-rewrite", path=str(Path(sys.executable).parent)) or "gpuperf-rewrite"
    cmd = [gp, "ab", str(a), str(b), "--runs", str(args.runs), "--max-runs", str(args.max_runs),
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--json", "-", "--",
           "--size", args.size, "--device", args.device]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=a.parent)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"verdict": "error", "reason": (proc.stderr or proc.stdout).strip()[-500:]}


def _mb(n: int | None) -> str:
    return "" if not n else f"{n / 2**20:,.0f}"


def _num(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def row(name: str, res: dict[str, Any], applied: str) -> str:
    a, b = res.get("a") or {}, res.get("b") or {}
    ci = res.get("ci95")
    speed = res.get("speedup")
    fp = res.get("fingerprint") or {}
    p = res.get("p_value")
    mem = res.get("memory") or {}
    loss = res.get("loss_check") or {}
    runs = res.get("runs") or {}
    return (f"| {name} | {applied} | {fp.get('device') or fp.get('device_name') or ''} | "
            f"{_num(a.get('median'))} | {_num(b.get('median'))} | "
            f"{'' if speed is None else f'{speed:.2f}x'} | "
            f"{'' if not ci else f'{ci[0]:.2f}-{ci[1]:.2f}'} | "
            f"{'' if p is None else f'{p:.3f}'} | "
            f"**{res.get('verdict', '?')}** | {_mb(mem.get('a_peak_bytes'))} | {_mb(mem.get('b_peak_bytes'))} | "
            f"{loss.get('status', '')} | {runs.get('a', '')}+{runs.get('b', '')} |")


HEADER = ("| script | rules applied | device | median before | median after | speedup | 95% CI | p | "
          "verdict | peak MB before | peak MB after | loss check | runs |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A/B every fixture against its full rewrite.")
    ap.add_argument("--size", choices=["small", "full"], default="small")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu")
    ap.add_argument("--fixtures", default=",".join(DEFAULT_FIXTURES),
                    help="comma-separated fixture names (default: the six workloads)")
    ap.add_argument("--runs", type=int, default=5, help="planned runs per side")
    ap.add_argument("--max-runs", type=int, default=None, help="most runs per side (default 2x runs)")
    ap.add_argument("--steps", type=int, default=10, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps per run (compile happens here)")
    ap.add_argument("--ablation", action="store_true", help="also A/B each applied rule's fix alone")
    ap.add_argument("--json", type=Path, help="write all A/B results here")
    args = ap.parse_args(argv)
    args.max_runs = args.max_runs or 2 * args.runs

    names = [n.strip().removesuffix(".py") for n in args.fixtures.split(",") if n.strip()]
    results: dict[str, Any] = {}
    rows, ablation_rows, speedups = [], [], []
    with tempfile.TemporaryDirectory(prefix="gpuperf-gains-") as tmp:
        work = Path(tmp) / "fixtures"
        shutil.copytree(FIXTURES, work)  # helpers next to the scripts stay importable
        for name in names:
            original = work / f"{name}.py"
            if not original.exists():
                sys.exit(f"no fixture {name!r} in {FIXTURES}")
            fixed, applied = rewrite(original.read_bytes(), str(original))
            rewritten = work / f"{name}__rewritten.py"
            rewritten.write_bytes(fixed)
            codes = ", ".join(sorted(applied)) or "(none)"
            print(f"{name}: A/B original vs rewrite ({codes}) ...", file=sys.stderr, flush=True)
            res = run_ab(original, rewritten, args)
            results[name] = {"applied": applied, "ab": res}
            rows.append(row(f"`{name}`", res, codes))
            if res.get("speedup") and res.get("verdict") != "broken":
                speedups.append(res["speedup"])
            print(rows[-1], file=sys.stderr, flush=True)
            if args.ablation:
                for code in sorted(applied):
                    alone, _ = rewrite(original.read_bytes(), str(original), (code,))
                    single = work / f"{name}__{code}.py"
                    single.write_bytes(alone)
                    print(f"{name}: ablation {code} ...", file=sys.stderr, flush=True)
                    r = run_ab(original, single, args)
                    results[name].setdefault("ablation", {})[code] = r
                    ablation_rows.append(row(f"`{name}`", r, f"{code} alone"))
                    print(ablation_rows[-1], file=sys.stderr, flush=True)

    # The installed distribution's version (what torch.__version__ says) without importing torch:
    # an interpreter importing it cost ~4 s of CPU for one string.
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "(not installed)"
    print(f"## Rewrite gains ({args.device}, size {args.size}, {date.today().isoformat()})\n")
    print(f"- command: `python benchmarks/rewrite_gains.py --size {args.size} --device {args.device} "
          f"--runs {args.runs} --steps {args.steps} --warmup {args.warmup}`")
    print(f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; torch {torch_version}; "
          f"Python {platform.python_version()}")
    print(f"- throughput in the fixture's samples/s (steps/s where it reports no batch size), "
          f"median over runs\n")
    print(HEADER)
    print("\n".join(rows))
    if speedups:
        geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        print(f"\nGeometric-mean speedup over {len(speedups)} fixtures: {geo:.2f}x")
    if ablation_rows:
        print("\n### Ablation: each rule's fix alone vs the original\n")
        print(HEADER)
        print("\n".join(ablation_rows))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
