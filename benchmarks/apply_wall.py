"""Wall time of ``gpuperf-rewrite train.py --apply --unsafe-fixes`` on each fixture (docs/benchmarks.md).

    python benchmarks/apply_wall.py [FIXTURE ...] [--opts "--runs 4 --steps 10 --warmup 2"] [--budget 15m]

Each fixture is copied as train.py into a fresh temporary git repository (as `make demo` does) and
``--apply --unsafe-fixes --json`` runs on it with the small CPU size; one Markdown table row per
fixture: verdict/status, what was committed, what was listed as needing a GPU, wall seconds, and
the 1-minute load average before and after (this machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ["input_bound", "cnn_item_logging", "resnet_no_amp", "gpt_fp32", "loss_accumulation",
            "catalogue_misc", "ddp_train", "optimized"]
SCRIPT_ARGS = ["--size", "small", "--device", "cpu"]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def one(name: str, opts: list[str], log_dir: Path) -> str:
    exe = Path(sys.executable).with_name("gpuperf-rewrite")
    with tempfile.TemporaryDirectory(prefix="gpuperf-wall-") as tmp:
        work = Path(tmp)
        shutil.copy(ROOT / "fixtures" / f"{name}.py", work / "train.py")
        _git(work, "init", "-q")
        for k, v in (("user.name", "bench"), ("user.email", "bench@example.invalid"), ("commit.gpgsign", "false")):
            _git(work, "config", k, v)
        _git(work, "add", "train.py")
        _git(work, "commit", "-q", "-m", "fixture")
        cmd = [str(exe), "train.py", "--apply", "--unsafe-fixes", *opts, "--json", "--", *SCRIPT_ARGS]
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        wall = time.monotonic() - t0
        load1 = os.getloadavg()[0]
        (log_dir / f"{name}.stderr.txt").write_text(proc.stderr)
        (log_dir / f"{name}.stdout.txt").write_text(proc.stdout)
        try:
            doc = json.loads(proc.stdout[proc.stdout.index("{"):])
        except ValueError:
            doc = {}
        abs_run = len(doc.get("attempts") or [])
        return (f"| {name} | {proc.returncode} | {doc.get('status', '?')} | "
                f"{', '.join(doc.get('rules_applied') or []) or '-'} | "
                f"{', '.join(doc.get('needs_gpu') or []) or '-'} | "
                f"{', '.join((doc.get('plan') or {}).get('lead') or []) or '-'} | {abs_run} | "
                f"{wall:.0f} | {load0:.1f} / {load1:.1f} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("fixtures", nargs="*", default=FIXTURES)
    p.add_argument("--opts", default="--runs 4 --steps 10 --warmup 2")
    p.add_argument("--budget", default=None)
    p.add_argument("--logs", default=None, help="directory for each run's stdout/stderr")
    o = p.parse_args()
    opts = shlex.split(o.opts) + (["--budget", o.budget] if o.budget else [])
    log_dir = Path(o.logs or tempfile.mkdtemp(prefix="apply-wall-logs-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"command: gpuperf-rewrite train.py --apply --unsafe-fixes {' '.join(opts)} --json -- "
          f"{' '.join(SCRIPT_ARGS)}  (logs: {log_dir})")
    print("| fixture | exit | status | committed | needs a GPU | diagnosed lead | A/Bs | wall s | load 1m before / after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in o.fixtures:
        print(one(name, opts, log_dir), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
