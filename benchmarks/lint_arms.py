"""Lint wall time, CPU time and peak memory of several arms, interleaved round by round, so the
machine's load hits every arm alike (issue 34): this tree, older trees (``pip install --no-deps
--target SITE <tree>``, run by PYTHONPATH with this interpreter) and TorchFix.

    python benchmarks/lint_arms.py --arm main=/tmp/site-main --arm this= --torchfix \\
        --rounds 3 --timeout 900 -- PATH... [-- OUR OPTIONS]

Ours runs as ``python -m gpuperf_rewrite check --isolated --no-cache -q PATH... OPTIONS`` (cold:
no lint cache); TorchFix as ``.venv-torchfix/bin/torchfix -j JOBS PATH...``. Peak memory is the
largest single process of the run's tree (``wait4``'s ru_maxrss: the worker, or the main process
when it ran alone). Bytecode is cached for every arm alike (``PYTHONPYCACHEPREFIX``, one
uncounted warm-up run each on a tiny file), as in lint_interleaved.py.

CPU time (user + sys of the whole process tree, ``wait4``) is the figure to compare on a shared,
loaded machine, where wall time measures the other users' load; the table gives both ratios to
TorchFix. ``--defaults`` runs ours with the project's own configuration (no ``--isolated``), as a
user would; ``--save DIR`` keeps each arm's last output (``DIR/NAME.out``) to compare arms' findings
(``--output-format json`` among OUR OPTIONS makes that a byte-for-byte check).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYCACHE = tempfile.mkdtemp(prefix="lint-arms-pyc-")


def run(cmd: list[str], pythonpath: str | None, cwd: str, timeout: float, save: Path | None = None) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = PYCACHE
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        deadline = t0 + timeout
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        raw = out.read()
        text = raw.decode("utf-8", "replace")
    if save is not None:
        save.write_bytes(raw)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_mb": usage.ru_maxrss / 1024,
            "rc": proc.returncode, "timed_out": timed_out, "lines": text.count("\n"),
            "tail": text.strip().splitlines()[-1:] if text.strip() else []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", action="append", default=[], help="NAME=SITE (empty SITE: this tree)")
    ap.add_argument("--torchfix", action="store_true", help="also TorchFix (.venv-torchfix)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run; a run past it is killed")
    ap.add_argument("--defaults", action="store_true", help="ours without --isolated (the projects' own settings)")
    ap.add_argument("--save", type=Path, help="keep each arm's last output in this folder (NAME.out)")
    ap.add_argument("--cwd", default=os.getcwd(), help="where the runs start (their project root is found from the files)")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- PATH... [-- OUR OPTIONS]")
    args = ap.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    paths, ours = (rest[:rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
    arms: list[tuple[str, list[str], str | None]] = []
    for spec in args.arm:
        name, _, site = spec.partition("=")
        # -P: the run's folder is not put first on sys.path, or a run started in a checkout of this
        # project would import that checkout's code for every arm instead of the arm's site.
        arms.append((name, [sys.executable, "-P", "-m", "gpuperf_rewrite", "check",
                            *([] if args.defaults else ["--isolated"]), "--no-cache", "-q",
                            "-j", str(args.jobs), *paths, *ours], site or None))
    if args.torchfix:
        arms.append(("TorchFix", [str(ROOT / ".venv-torchfix/bin/torchfix"), "-j", str(args.jobs), *paths], None))
    print(f"# {' '.join(paths)} {' '.join(ours)}; jobs {args.jobs}; load {os.getloadavg()}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    tiny = Path(PYCACHE, "warmup.py")
    tiny.write_text("import torch\n\nfor x in loader:\n    print(x.item())\n")
    for name, cmd, site in arms:  # warm-up: bytecode for every arm, on one tiny file
        if name != "TorchFix":
            run([*cmd[:cmd.index("-j") + 2], str(tiny)], site, args.cwd, args.timeout)
    results: dict[str, list[dict]] = {name: [] for name, _, _ in arms}
    for r in range(args.rounds):
        for name, cmd, site in arms if r % 2 == 0 else arms[::-1]:
            if args.save is not None:
                args.save.mkdir(parents=True, exist_ok=True)
            got = run(cmd, site, args.cwd, args.timeout, args.save / f"{name}.out" if args.save else None)
            results[name].append(got)
            print(f"round {r + 1} {name}: wall {got['wall']:.1f} s, CPU {got['cpu']:.1f} s, "
                  f"peak {got['maxrss_mb']:.0f} MB, rc {got['rc']}{' TIMED OUT' if got['timed_out'] else ''}, "
                  f"{got['lines']} output lines {got['tail']}; load {os.getloadavg()[0]:.1f}", flush=True)
    tf = results.get("TorchFix")
    tf_cpu = statistics.median(x["cpu"] for x in tf) if tf else None
    tf_wall = statistics.median(x["wall"] for x in tf) if tf else None
    print("\n| arm | wall s median (rounds) | CPU s median | peak MB, largest process | output lines "
          "| TorchFix CPU / ours | TorchFix wall / ours |")
    print("|---|---|---|---|---|---|---|")
    for name, rs in results.items():
        walls = [x["wall"] for x in rs]
        cpu, wall = statistics.median(x["cpu"] for x in rs), statistics.median(walls)
        ratios = (f"{tf_cpu / cpu:.1f}x | {tf_wall / wall:.1f}x" if tf_cpu is not None and tf_wall is not None
                  and cpu > 0 and wall > 0 else "- | -")
        print(f"| {name} | {wall:.1f} ({', '.join(f'{w:.1f}' for w in walls)}"
              f"{'; timed out' if any(x['timed_out'] for x in rs) else ''}) | "
              f"{cpu:.1f} | {max(x['maxrss_mb'] for x in rs):.0f} | "
              f"{rs[0]['lines']} | {ratios} |")
    print(f"\nload after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
