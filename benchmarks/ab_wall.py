"""Wall time of ``gpuperf-rewrite ab`` (or ``--apply``) before and after a change, interleaved
(docs/benchmarks.md, "Where the time goes").

    python benchmarks/ab_wall.py --before BASE_TREE [--repeats 2] [--opts "--runs 4 ..."] PAIR ...
    python benchmarks/ab_wall.py --before BASE_TREE --apply FIXTURE ...

A PAIR is ``A.py:B.py`` (run with ``-- --size small --device cpu``). ``BASE_TREE`` is a checkout
of the code before the change (its ``gpuperf_rewrite`` package, with ``runtime`` and ``rules``
copied inside it, goes first on PYTHONPATH); "after" is ``--after`` (the same way) or the
installed tree. Each repeat runs
before then after, or after then before (alternating), so machine load hits both alike. Prints
one Markdown row per run: wall seconds, verdict/status, measured seconds (the runs' measured
windows: measured steps / steps per second), their share of the wall time, and the 1-minute
load average; then the medians and the before/after ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT_ARGS = ["--", "--size", "small", "--device", "cpu"]  # --script-args replaces the fixtures' own


def measured_s(ab: dict) -> float:
    total = 0.0
    for side in ("a", "b"):
        for r in (ab.get(side) or {}).get("runs") or []:
            if r.get("steps_per_s") and r.get("measured_steps"):
                total += r["measured_steps"] / r["steps_per_s"]
    return total


def one_ab(pair: str, env: dict, opts: list[str], out: Path) -> tuple[float, str, float]:
    a, b = pair.split(":")
    cmd = [sys.executable, "-m", "gpuperf_rewrite", "ab", a, b, *opts, "--json", str(out), *SCRIPT_ARGS]
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError):
        return wall, "error", 0.0
    return wall, doc.get("verdict", "?"), measured_s(doc)


def one_apply(fixture: str, env: dict, opts: list[str], out: Path) -> tuple[float, str, float]:
    with tempfile.TemporaryDirectory(prefix="abwall-") as tmp:
        work = Path(tmp)
        shutil.copy(fixture, work / "train.py")
        for args in (["init", "-q"], ["config", "user.name", "bench"], ["config", "user.email", "b@example.invalid"],
                     ["config", "commit.gpgsign", "false"], ["add", "train.py"], ["commit", "-q", "-m", "fixture"]):
            subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)
        cmd = [sys.executable, "-m", "gpuperf_rewrite", "train.py", "--apply", "--unsafe-fixes", *opts, "--json",
               *SCRIPT_ARGS]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        out.write_text(proc.stdout)
        try:
            doc = json.loads(proc.stdout[proc.stdout.index("{"):])
        except ValueError:
            return wall, "error", 0.0
        m = measured_s(doc.get("validation") or {})  # the deciding (or last) A/B's measured windows
        status = f"{doc.get('status')} {','.join(doc.get('rules_applied') or []) or '-'}"
        return wall, status, m


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("items", nargs="+")
    p.add_argument("--before", required=True, help="checkout of the code before the change")
    p.add_argument("--after", default=None, help="checkout of the code after the change (default: this tree)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--opts", default="--runs 4 --max-runs 4 --steps 10 --warmup 2")
    p.add_argument("--apply", action="store_true", help="items are fixtures for --apply")
    p.add_argument("--out", default=None, help="directory for the JSON results")
    p.add_argument("--script-args", default=None, help="the scripts' arguments (default: --size small --device cpu)")
    o = p.parse_args()
    if o.script_args is not None:
        SCRIPT_ARGS[:] = ["--", *shlex.split(o.script_args)]
    out_dir = Path(o.out or tempfile.mkdtemp(prefix="abwall-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    base_env = dict(os.environ, PYTHONPATH=os.pathsep.join([o.before, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    after_env = dict(os.environ)
    if o.after:
        after_env["PYTHONPATH"] = os.pathsep.join([o.after, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    envs = {"before": base_env, "after": after_env}
    opts = shlex.split(o.opts)
    fn = one_apply if o.apply else one_ab
    print(f"command: gpuperf-rewrite {'--apply' if o.apply else 'ab'} {o.opts} {' '.join(SCRIPT_ARGS)}; "
          f"before = {o.before}, after = {o.after or 'this tree'}; results in {out_dir}")
    print("| item | repeat | version | wall s | verdict/status | measured s | measured share | load 1m |")
    print("|---|---|---|---|---|---|---|---|")
    walls: dict[tuple[str, str], list[float]] = {}
    shares: dict[tuple[str, str], list[float]] = {}
    for item in o.items:
        for k in range(o.repeats):
            order = ("before", "after") if k % 2 == 0 else ("after", "before")
            for version in order:
                out = out_dir / f"{Path(item.split(':')[0]).stem}-{k}-{version}.json"
                wall, verdict, m = fn(item, envs[version], opts, out)
                walls.setdefault((item, version), []).append(wall)
                shares.setdefault((item, version), []).append(m / wall)
                print(f"| {Path(item.split(':')[-1]).name} | {k + 1} | {version} | {wall:.1f} | {verdict} | {m:.2f} | "
                      f"{m / wall:.2%} | {os.getloadavg()[0]:.1f} |", flush=True)
    print("\n| item | median wall before s | after s | before/after | measured share before | after |")
    print("|---|---|---|---|---|---|")
    for item in o.items:
        wb, wa = statistics.median(walls[(item, "before")]), statistics.median(walls[(item, "after")])
        sb, sa = statistics.median(shares[(item, "before")]), statistics.median(shares[(item, "after")])
        print(f"| {Path(item.split(':')[-1]).name} | {wb:.1f} | {wa:.1f} | {wb / wa:.2f}x | {sb:.2%} | {sa:.2%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
