"""Lint-speed benchmark: gpuperf-rewrite vs ruff, TorchFix and LibCST's bare parse, side by side.

    python benchmarks/lint_speed.py                       # the installed torch package
    python benchmarks/lint_speed.py --sample 40 --repeat 1 --no-torchfix   # smoke run
    python benchmarks/lint_speed.py --mixed               # stdlib + torch: cold/warm cache vs ruff

Every contender is a separate process over the *same* file list, run in interleaved rounds
(ours, floors, TorchFix, ours, ...) so machine load hits them alike; medians are reported.
How a process tree is measured: see ``_measure.py``.

Default mode: the torch package, ours (``--no-cache``) with ``-j N`` and ``-j 1`` next to the bare
parse in N processes and in 1, plus TorchFix; then memory flatness: our linter with one process
on 25 %, 50 % and 100 % of the files (a linter that keeps trees alive grows with the file count).

``--mixed``: a repository that is mostly not training code. Two corpora, the Python standard
library (without site-packages and test folders) and the installed torch package, each linted by
ours with a cold cache and a warm one (``-j N``; cold also with ``-j 1``), ours at a baseline
source tree (``--baseline DIR``: a ``git archive`` of an older commit with ``rules/`` and
``runtime/`` moved into ``gpuperf_rewrite/``), ``ruff check --select ALL --no-cache``, TorchFix and
the bare parse.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

from _measure import Contender, Run, fmt, load_range, machine_line, measure, run_rounds

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BARE_PARSE = HERE / "bare_parse.py"
BIN = Path(sys.executable).parent


def torch_corpus() -> Path:
    spec = importlib.util.find_spec("torch")  # locates torch without importing it
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed in this interpreter; pass --corpus DIR")
    return Path(spec.origin).parent


def stdlib_corpus() -> tuple[Path, list[Path]]:
    """The standard library's own modules: no site-packages, no test suites."""
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages", "test", "tests", "idle_test"}
    return root, sorted(p for p in root.rglob("*.py") if p.is_file() and not skip & set(p.relative_to(root).parts))


def gather(corpus: Path, sample: int | None) -> list[Path]:
    return spread(sorted(p for p in corpus.rglob("*.py") if p.is_file()), sample)


def spread(files: list[Path], sample: int | None) -> list[Path]:
    if sample and sample < len(files):
        step = len(files) / sample
        files = [files[int(i * step)] for i in range(sample)]
    return files


def count_lines(files: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in files)


def mentions_torch(files: list[Path]) -> int:
    return sum(b"torch" in p.read_bytes() for p in files)


def passes_our_prefilter(files: list[Path]) -> int:
    """Files ours parses: those some default rule's keywords and markers can fire on."""
    from gpuperf_rewrite.lint.engine import RuleSet, rules_for
    from gpuperf_rewrite.lint.registry import all_rules
    from gpuperf_rewrite.lint.sourceio import decode_source

    rs = RuleSet(tuple(c for c, r in all_rules().items() if r.default_enabled))
    n = 0
    for p in files:
        try:
            n += bool(rules_for(decode_source(p.read_bytes()), rs))
        except (SyntaxError, UnicodeDecodeError, LookupError):
            n += 1  # reported as undecodable: counts as checked
    return n


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


def gp_executable() -> str:
    return shutil.which("gpuperf-rewrite", path=str(BIN)) or "gpuperf-rewrite"


# ---- default mode: the torch package ---------------------------------------------------------
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


def memory_scaling(ours_cmd: list[str], paths: list[str], tmp: str) -> list[tuple[int, int, Run, Run]]:
    """Peak RSS is set by the largest tree held at once, so each subset's bare parse (which holds
    one tree at a time) is the reference: ours growing past it would mean retention."""
    scaling = []
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
    return scaling


def ours_uncached() -> list[str]:
    return [gp_executable(), "check", "--isolated", "--no-cache", "-q", "--statistics"]


def torch_contenders(args: argparse.Namespace, paths: list[str], filelist: Path, n_torch: int,
                     tf: Path | None) -> list[Contender]:
    ours_cmd = ours_uncached()
    n_rules = str(our_rule_count())
    contenders = [
        Contender(f"gpuperf-rewrite -j {args.jobs}", [*ours_cmd, "-j", str(args.jobs), *paths], n_torch, n_rules),
        Contender("gpuperf-rewrite -j 1", [*ours_cmd, "-j", "1", *paths], n_torch, n_rules),
        Contender(f"bare LibCST parse, {args.jobs} processes",
                  [sys.executable, str(BARE_PARSE), str(filelist), "--jobs", str(args.jobs)], len(paths), "0"),
        Contender("bare LibCST parse, 1 process", [sys.executable, str(BARE_PARSE), str(filelist)], len(paths), "0"),
    ]
    if tf is not None:
        contenders.append(Contender(f"TorchFix -j {args.jobs}", [str(tf), "-j", str(args.jobs), *paths], n_torch,
                                    str(torchfix_rule_count(tf.parent / "python") or "?"),
                                    rounds=args.torchfix_rounds))
    return contenders


def torch_report(args: argparse.Namespace, corpus: Path, files: list[Path], contenders: list[Contender],
                 scaling: list[tuple[int, int, Run, Run]], n_lines: int, n_torch: int) -> None:
    ours = contenders[0]
    findings = ours_findings(ours.runs[0].stdout)
    tf = next((c for c in contenders if c.name.startswith("TorchFix") and c.runs), None)
    floor2, floor1 = contenders[2], contenders[3]
    ow = ours.median("wall")
    print(f"## Lint speed ({date.today().isoformat()})\n")
    print(f"- corpus: `{corpus}` — {len(files)} files, {n_lines:,} lines; {n_torch} mention `torch`")
    print(f"- machine: {machine_line()}")
    print(f"- libcst {libcst_version(sys.executable)} (ours, floor)"
          + (f", {libcst_version(args.torchfix.parent / 'python')} (TorchFix's venv)" if tf else ""))
    print(f"- medians of {args.repeat} interleaved rounds" + (f" ({tf.rounds} for TorchFix)" if tf else "")
          + f"; files/s and lines/s over all {len(files)} files\n")
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


def torch_mode(args: argparse.Namespace) -> dict:
    corpus = args.corpus or torch_corpus()
    files = gather(corpus, args.sample)
    if not files:
        sys.exit(f"no Python files under {corpus}")
    n_lines, n_torch = count_lines(files), mentions_torch(files)
    with tempfile.TemporaryDirectory() as tmp:
        filelist = Path(tmp, "files.txt")
        filelist.write_text("".join(f"{p}\n" for p in files))
        paths = [str(p) for p in files]
        contenders = torch_contenders(args, paths, filelist, n_torch, torchfix_path(args))
        run_rounds(contenders, args.repeat)
        scaling = [] if args.no_memory_scaling else memory_scaling(ours_uncached(), paths, tmp)
    torch_report(args, corpus, files, contenders, scaling, n_lines, n_torch)
    return {"corpus": str(corpus), "files": len(files), "lines": n_lines, "mention_torch": n_torch,
            "contenders": raw(contenders),
            "memory_scaling": [{"files": n, "largest_file_lines": b, "maxrss_mb": r.maxrss_mb,
                                "bare_parse_maxrss_mb": f.maxrss_mb} for n, b, r, f in scaling]}


def torchfix_path(args: argparse.Namespace, n_files: int = 0) -> Path | None:
    if args.no_torchfix:
        return None
    if args.torchfix_max_files is not None and n_files > args.torchfix_max_files:
        print(f"note: TorchFix left out on {n_files} files (--torchfix-max-files {args.torchfix_max_files})",
              file=sys.stderr)
        return None
    if not args.torchfix.exists():
        print(f"note: {args.torchfix} not found; skipping TorchFix (make bench-lint installs it)", file=sys.stderr)
        return None
    return args.torchfix


def raw(contenders: list[Contender]) -> list[dict]:
    return [{"name": c.name, "rules": c.rules, "files_parsed": c.files,
             "runs": [{k: v for k, v in vars(r).items() if k != "stdout"} for r in c.runs]} for c in contenders]


# ---- mixed mode: the standard library and the torch package ----------------------------------
def mixed_contenders(args: argparse.Namespace, name: str, files: list[Path], tmp: Path) -> list[Contender]:
    paths = [str(p) for p in files]
    filelist = tmp / f"{name}.txt"
    filelist.write_text("".join(f"{p}\n" for p in paths))
    cache = tmp / f"cache-{name}"
    ours = [gp_executable(), "check", "--isolated", "-q", "--statistics", "--cache-dir", str(cache)]
    ours_files, n_torch, n_rules = passes_our_prefilter(files), mentions_torch(files), str(our_rule_count())

    def empty_cache() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    j = str(args.jobs)
    contenders = [
        Contender(f"gpuperf-rewrite, cold cache, -j {j}", [*ours, "-j", j, *paths], ours_files, n_rules,
                  before=empty_cache),
        Contender(f"gpuperf-rewrite, warm cache, -j {j}", [*ours, "-j", j, *paths], 0, n_rules),
        Contender("gpuperf-rewrite, cold cache, -j 1", [*ours, "-j", "1", *paths], ours_files, n_rules,
                  before=empty_cache),
    ]
    if args.baseline:  # first on sys.path, ahead of the current directory and our own install
        boot = (f"import sys; sys.path.insert(0, {str(args.baseline)!r}); "
                "from gpuperf_rewrite.cli import main; main()")
        contenders.append(Contender(f"gpuperf-rewrite at {args.baseline.name}, -j {j}",
                                    [sys.executable, "-c", boot, "check", "--isolated", "-q", "--statistics",
                                     "-j", j, *paths], None, n_rules))
    ruff = shutil.which("ruff", path=str(BIN)) or shutil.which("ruff")
    if ruff:
        contenders.append(Contender("ruff check --select ALL --no-cache",
                                    [ruff, "check", "--isolated", "--select", "ALL", "--no-cache", "--statistics",
                                     *paths], len(files), "ALL"))
    else:
        print("note: ruff not found; `pip install ruff` (the bench extra) to compare", file=sys.stderr)
    tf = torchfix_path(args, len(files))
    if tf is not None:
        contenders.append(Contender(f"TorchFix -j {j}", [str(tf), "-j", j, *paths], n_torch,
                                    str(torchfix_rule_count(tf.parent / "python") or "?"),
                                    rounds=args.torchfix_rounds))
    contenders.append(Contender(f"bare LibCST parse, {j} processes",
                                [sys.executable, str(BARE_PARSE), str(filelist), "--jobs", j], len(files), "0"))
    return contenders


def mixed_table(contenders: list[Contender]) -> str:
    """CPU time first among the ratios: on a shared machine wall time mostly measures the others."""
    head = ("| tool | files parsed | runs | CPU s | wall s | peak RSS MB | CPU vs ruff | wall vs ruff | "
            "CPU vs ours cold |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    ruff = next((c for c in contenders if c.name.startswith("ruff") and c.runs), None)
    cold = contenders[0].median("cpu")
    for c in contenders:
        if not c.runs:
            continue
        wall, cpu = c.median("wall"), c.median("cpu")
        cpu_ruff = f"{cpu / ruff.median('cpu'):.2f}x" if ruff else ""
        wall_ruff = f"{wall / ruff.median('wall'):.2f}x" if ruff else ""
        parsed = "" if c.files is None else f"{c.files:,}"
        rows.append(f"| {c.name} | {parsed} | {len(c.runs)} | {fmt(cpu, 2)} | {fmt(wall, 2)} | "
                    f"{fmt(c.median('maxrss_mb'), 0)} | {cpu_ruff} | {wall_ruff} | {cpu / cold:.2f}x |")
    return "\n".join(rows)


def startup(small: Path, rounds: int = 5) -> tuple[float, float]:
    """Median total import time (``-X importtime``) and wall time of ``gpuperf-rewrite FILE``."""
    import statistics

    imports, walls = [], []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "gpuperf_rewrite", "--isolated",
                              "--no-cache", str(small)], capture_output=True, text=True)
        imports.append(sum(int(line.split("|")[1]) for line in out.stderr.splitlines()
                           if line.startswith("import time:") and line.split("|")[1].strip().isdigit()
                           and not line.split("|")[2].startswith("  ")) / 1e6)
        walls.append(measure([gp_executable(), "--isolated", "--no-cache", str(small)]).wall)
    return statistics.median(imports), statistics.median(walls)


def mixed_mode(args: argparse.Namespace) -> dict:
    corpora = []
    if "stdlib" in args.corpora:
        std_root, std_files = stdlib_corpus()
        corpora.append(("stdlib", std_root, spread(std_files, args.sample)))
    if "torch" in args.corpora:
        corpora.append(("torch", torch_corpus(), gather(torch_corpus(), args.sample)))
    report: dict = {"corpora": []}
    print(f"## Lint speed, mixed tree ({date.today().isoformat()})\n")
    print(f"- machine: {machine_line()}; libcst {libcst_version(sys.executable)}")
    print(f"- medians of {args.repeat} interleaved rounds; `-j {args.jobs}` unless noted; every contender "
          f"gets the same explicit file list; ours cold = empty cache directory before the run, warm = "
          f"right after the cold run of the same round\n")
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp, "train.py")
        small.write_text("import torch\nfor x in loader:\n    loss = model(x)\n    loss.backward()\n")
        imports, wall = startup(small, args.startup_rounds)
        print(f"Start-up, `gpuperf-rewrite train.py` on a 4-line file: {wall * 1000:.0f} ms wall; imports "
              f"{imports * 1000:.0f} ms (`python -X importtime`, median of {args.startup_rounds})\n")
        report["startup"] = {"wall_s": wall, "imports_s": imports}
        for name, root, files in corpora:
            contenders = mixed_contenders(args, name, files, Path(tmp))
            run_rounds(contenders, args.repeat)
            print(f"### {name}: `{root}`: {len(files)} files, {count_lines(files):,} lines; "
                  f"{mentions_torch(files)} mention `torch`, {contenders[0].files} pass our prefilter\n")
            print(mixed_table(contenders))
            cold, warm = contenders[0], contenders[1]
            same = all(r.stdout == cold.runs[0].stdout for r in [*cold.runs, *warm.runs, *contenders[2].runs])
            print(f"\n- findings (ours): {ours_findings(cold.runs[0].stdout)}; cold, warm and -j 1 reports "
                  f"{'identical' if same else 'DIFFER (bug)'}; 1-minute load average at the end of each run "
                  f"{load_range(contenders)}\n")
            report["corpora"].append({"name": name, "root": str(root), "files": len(files),
                                      "contenders": raw(contenders), "reports_identical": same})
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Lint speed: ours vs ruff, TorchFix and the bare LibCST parse.")
    ap.add_argument("--mixed", action="store_true", help="stdlib + torch package, cold and warm cache, vs ruff")
    ap.add_argument("--corpus", type=Path, help="directory of Python files (default: installed torch)")
    ap.add_argument("--sample", type=int, help="use N files spread evenly over each corpus")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (median reported)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the parallel runs")
    ap.add_argument("--corpora", type=lambda v: v.split(","), default=["stdlib", "torch"],
                    help="--mixed: which corpora (comma-separated: stdlib, torch)")
    ap.add_argument("--baseline", type=Path, help="--mixed: also run ours from this source tree (PYTHONPATH)")
    ap.add_argument("--torchfix", type=Path, default=ROOT / ".venv-torchfix" / "bin" / "torchfix",
                    help="TorchFix executable (its own venv: it pins an older libcst)")
    ap.add_argument("--torchfix-rounds", type=int, default=1, help="rounds that include TorchFix (it is slow)")
    ap.add_argument("--startup-rounds", type=int, default=5, help="--mixed: start-up measurements")
    ap.add_argument("--torchfix-max-files", type=int, help="--mixed: leave TorchFix out on larger corpora")
    ap.add_argument("--no-torchfix", action="store_true")
    ap.add_argument("--no-memory-scaling", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the raw runs here")
    args = ap.parse_args(argv)
    report = mixed_mode(args) if args.mixed else torch_mode(args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
