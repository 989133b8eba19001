"""Lint-speed benchmark: gpuperf-rewrite vs TorchFix vs LibCST's bare parse, side by side.

    python benchmarks/lint_speed.py                       # the installed torch package
    python benchmarks/lint_speed.py --sample 40 --repeat 1 --no-torchfix   # smoke run

Every contender is a separate process over the *same* file list, run in interleaved rounds
(ours, floors, TorchFix, ours, ...) so machine load hits them alike; medians are reported.

* wall: from spawn to exit, measured by a small wrapper process around the contender;
* CPU: user+sys of the contender and all its worker processes (``RUSAGE_CHILDREN`` of the
  wrapper, which includes reaped grandchildren);
* peak RSS, largest process: ``ru_maxrss`` of the same rusage, exact;
* peak RSS, all processes: the sum over the process tree, sampled every 50 ms with psutil
  (forked workers share pages, so this over-counts; blank without psutil).

Memory flatness: our linter with one process on 25 %, 50 % and 100 % of the files (every 4th,
every 2nd, all); a linter that keeps trees alive grows with the file count.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

try:
    import psutil
except ImportError:  # optional: only the all-processes memory column needs it
    psutil = None

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BARE_PARSE = HERE / "bare_parse.py"


# ---- measuring one process tree -------------------------------------------------------------
def _exec_and_report(out_path: str, cmd: list[str], stdout_path: str) -> int:
    """Wrapper mode (run in its own process so its rusage covers exactly one contender)."""
    with open(stdout_path, "wb") as out:
        start = time.perf_counter()
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(out_path).write_text(json.dumps({
        "rc": rc, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
        # Linux reports ru_maxrss in KiB, macOS in bytes.
        "maxrss_mb": ru.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024),
    }))
    return 0


def _sample_tree_rss(pid: int, stop: threading.Event, peak: list[float]) -> None:
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    while not stop.is_set():
        total = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        peak[0] = max(peak[0], total / 2**20)
        stop.wait(0.05)


@dataclass
class Run:
    wall: float
    cpu: float
    maxrss_mb: float
    tree_rss_mb: float | None
    stdout: str


def measure(cmd: list[str], ok_codes: tuple[int, ...] = (0, 1)) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        report, stdout = Path(tmp, "rusage.json"), Path(tmp, "stdout")
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--_exec", str(report),
                                 str(stdout), "--", *cmd])
        stop, peak = threading.Event(), [0.0]
        sampler = None
        if psutil is not None:
            sampler = threading.Thread(target=_sample_tree_rss, args=(proc.pid, stop, peak), daemon=True)
            sampler.start()
        proc.wait()
        stop.set()
        if sampler is not None:
            sampler.join()
        data = json.loads(report.read_text())
        if data["rc"] not in ok_codes:
            raise RuntimeError(f"{cmd[0]} exited {data['rc']}:\n{stdout.read_text(errors='replace')[-2000:]}")
        return Run(data["wall"], data["cpu"], data["maxrss_mb"],
                   peak[0] if psutil is not None else None, stdout.read_text(errors="replace"))


# ---- the contenders ---------------------------------------------------------------------
@dataclass
class Contender:
    name: str
    cmd: list[str]
    files: int  # files it actually parses (after its own prefilter)
    rules: str
    runs: list[Run] = field(default_factory=list)
    rounds: int | None = None  # None: every round

    def median(self, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None]
        return statistics.median(values) if values else None


def torch_corpus() -> Path:
    spec = importlib.util.find_spec("torch")  # locates torch without importing it
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed in this interpreter; pass --corpus DIR")
    return Path(spec.origin).parent


def gather(corpus: Path, sample: int | None) -> list[Path]:
    files = sorted(p for p in corpus.rglob("*.py") if p.is_file())
    if sample and sample < len(files):
        step = len(files) / sample
        files = [files[int(i * step)] for i in range(sample)]
    return files


def count_lines(files: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in files)


def mentions_torch(files: list[Path]) -> int:
    return sum(b"torch" in p.read_bytes() for p in files)


def our_rule_count() -> int:
    from gpuperf_rewrite.lint.registry import all_rules

    return sum(r.default_enabled for r in all_rules().values())


def torchfix_rule_count(python: Path) -> int | None:
    try:
        out = subprocess.run([str(python), "-c", "from torchfix.torchfix import process_error_code_str;"
                              "print(len(process_error_code_str(None)))"],
                             capture_output=True, text=True, check=True)
        return int(out.stdout.strip())
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None


def libcst_version(python: Path | str) -> str:
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('libcst'))"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def ours_findings(stdout: str) -> int:
    """Total from ``--statistics`` lines (``  12  GP101  sync-in-loop``)."""
    total = 0
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].startswith("GP"):
            total += int(parts[0])
    return total


def torchfix_findings(stdout: str) -> int:
    return sum(1 for line in stdout.splitlines() if ": TOR" in line)


# ---- reporting ----------------------------------------------------------------------------
def fmt(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def table(contenders: list[Contender], totals: dict[str, int], ours: Contender) -> str:
    head = ("| tool | rules | files parsed | runs | wall s | CPU s | files/s | lines/s | "
            "peak RSS, largest process MB | peak RSS, all processes MB | wall vs ours | CPU vs ours |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    ow, oc = ours.median("wall"), ours.median("cpu")
    for c in contenders:
        if not c.runs:
            continue
        wall, cpu = c.median("wall"), c.median("cpu")
        rows.append(
            f"| {c.name} | {c.rules} | {c.files} | {len(c.runs)} | {fmt(wall, 2)} | {fmt(cpu, 2)} | "
            f"{fmt(totals['files'] / wall, 0)} | {fmt(totals['lines'] / wall, 0)} | "
            f"{fmt(c.median('maxrss_mb'), 0)} | {fmt(c.median('tree_rss_mb'), 0)} | "
            f"{wall / ow:.2f}x | {cpu / oc:.2f}x |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_exec"]:
        return _exec_and_report(argv[1], argv[4:], argv[2])
    ap = argparse.ArgumentParser(description="Lint speed: ours vs TorchFix vs bare LibCST parse.")
    ap.add_argument("--corpus", type=Path, help="directory of Python files (default: installed torch)")
    ap.add_argument("--sample", type=int, help="use N files spread evenly over the corpus")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (median reported)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the parallel runs")
    ap.add_argument("--torchfix", type=Path, default=ROOT / ".venv-torchfix" / "bin" / "torchfix",
                    help="TorchFix executable (its own venv: it pins an older libcst)")
    ap.add_argument("--torchfix-rounds", type=int, default=1,
                    help="rounds that include TorchFix (it is slow)")
    ap.add_argument("--no-torchfix", action="store_true")
    ap.add_argument("--no-memory-scaling", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the raw runs here")
    args = ap.parse_args(argv)

    corpus = args.corpus or torch_corpus()
    files = gather(corpus, args.sample)
    if not files:
        sys.exit(f"no Python files under {corpus}")
    n_lines = count_lines(files)
    n_torch = mentions_torch(files)
    gp = shutil.which("gpuperf-rewrite", path=str(Path(sys.executable).parent)) or "gpuperf-rewrite"
    tf_python = args.torchfix.parent / "python"
    use_tf = not args.no_torchfix and args.torchfix.exists()
    if not args.no_torchfix and not use_tf:
        print(f"note: {args.torchfix} not found; skipping TorchFix (make bench-lint installs it)",
              file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        filelist = Path(tmp, "files.txt")
        filelist.write_text("".join(f"{p}\n" for p in files))
        paths = [str(p) for p in files]
        ours_cmd = [gp, "check", "--isolated", "-q", "--statistics"]
        n_rules = our_rule_count()
        ours = Contender(f"gpuperf-rewrite -j {args.jobs}", [*ours_cmd, "-j", str(args.jobs), *paths],
                         n_torch, str(n_rules))
        contenders = [
            ours,
            Contender("gpuperf-rewrite -j 1", [*ours_cmd, "-j", "1", *paths], n_torch, str(n_rules)),
            Contender(f"bare LibCST parse, {args.jobs} processes",
                      [sys.executable, str(BARE_PARSE), str(filelist), "--jobs", str(args.jobs)],
                      len(files), "0"),
            Contender("bare LibCST parse, 1 process", [sys.executable, str(BARE_PARSE), str(filelist)],
                      len(files), "0"),
        ]
        if use_tf:
            contenders.append(Contender(f"TorchFix -j {args.jobs}",
                                        [str(args.torchfix), "-j", str(args.jobs), *paths], n_torch,
                                        str(torchfix_rule_count(tf_python) or "?"),
                                        rounds=args.torchfix_rounds))
        for rnd in range(args.repeat):
            for c in contenders:
                if c.rounds is not None and rnd >= c.rounds:
                    continue
                run = measure(c.cmd)
                c.runs.append(run)
                print(f"round {rnd + 1}: {c.name}: wall {run.wall:.2f} s, CPU {run.cpu:.2f} s, "
                      f"max RSS {run.maxrss_mb:.0f} MB", file=sys.stderr, flush=True)

        # Peak RSS is set by the largest tree held at once, so each subset's bare parse (which
        # holds one tree at a time) is the reference: ours growing past it would mean retention.
        scaling: list[tuple[int, int, Run, Run]] = []
        if not args.no_memory_scaling:
            for frac in (4, 2, 1):
                subset = paths[::frac]
                sub_list = Path(tmp, f"files_{frac}.txt")
                sub_list.write_text("".join(f"{p}\n" for p in subset))
                run = measure([*ours_cmd, "-j", "1", *subset])
                floor = measure([sys.executable, str(BARE_PARSE), str(sub_list)])
                biggest = max(Path(p).read_bytes().count(b"\n") for p in subset)
                scaling.append((len(subset), biggest, run, floor))
                print(f"memory scaling: {len(subset)} files: max RSS {run.maxrss_mb:.0f} MB "
                      f"(bare parse {floor.maxrss_mb:.0f} MB)", file=sys.stderr, flush=True)

    findings = ours_findings(ours.runs[0].stdout)
    tf = next((c for c in contenders if c.name.startswith("TorchFix") and c.runs), None)
    floor2, floor1 = contenders[2], contenders[3]
    ow = ours.median("wall")
    py = platform.python_version()
    print(f"## Lint speed ({date.today().isoformat()})\n")
    print(f"- corpus: `{corpus}` — {len(files)} files, {n_lines:,} lines; {n_torch} mention `torch`")
    print(f"- machine: {cpu_model()}, {os.cpu_count()} cores; load average at start "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; Python {py}")
    print(f"- libcst {libcst_version(sys.executable)} (ours, floor)"
          + (f", {libcst_version(tf_python)} (TorchFix's venv)" if tf else ""))
    print(f"- medians of {args.repeat} interleaved rounds"
          + (f" ({tf.rounds} for TorchFix)" if tf else "") + "; files/s and lines/s over all "
          f"{len(files)} files\n")
    print(table(contenders, {"files": len(files), "lines": n_lines}, ours))
    print()
    print(f"- ours, -j {args.jobs}, vs the {args.jobs}-process bare parse: "
          f"{ow / floor2.median('wall'):.2f}x wall, {ours.median('cpu') / floor2.median('cpu'):.2f}x CPU "
          f"(target: within 2x)")
    print(f"- ours, -j 1, vs the 1-process bare parse: "
          f"{contenders[1].median('wall') / floor1.median('wall'):.2f}x wall")
    if tf:
        print(f"- TorchFix vs ours (both -j {args.jobs}): {tf.median('wall') / ow:.1f}x the wall time, "
              f"{tf.median('cpu') / ours.median('cpu'):.1f}x the CPU time; findings: ours {findings}, "
              f"TorchFix {torchfix_findings(tf.runs[0].stdout)} (different rule sets)")
    else:
        print(f"- findings (ours): {findings}")
    if scaling:
        print("\nMemory vs file count (one process; every 4th file, every 2nd, all):\n")
        print("| files | largest file (lines) | ours peak RSS MB | bare parse peak RSS MB | ours - parse MB |")
        print("|---|---|---|---|---|")
        for n, biggest, run, floor in scaling:
            print(f"| {n} | {biggest:,} | {run.maxrss_mb:.0f} | {floor.maxrss_mb:.0f} | "
                  f"{run.maxrss_mb - floor.maxrss_mb:+.0f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "corpus": str(corpus), "files": len(files), "lines": n_lines, "mention_torch": n_torch,
            "contenders": [{"name": c.name, "rules": c.rules, "files_parsed": c.files,
                            "runs": [{k: v for k, v in vars(r).items() if k != "stdout"} for r in c.runs]}
                           for c in contenders],
            "memory_scaling": [{"files": n, "largest_file_lines": b, "maxrss_mb": r.maxrss_mb,
                                "bare_parse_maxrss_mb": f.maxrss_mb} for n, b, r, f in scaling],
        }, indent=2))
    return 0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
