"""Rebuilds the real-project trees, lints each labelled file in place and prints recall and false
alarms per rule for every labelled set under benchmarks/realcorpus/ (corpus1, corpus2, ...).

    .venv/bin/python benchmarks/realcorpus/score.py                  # all development sets, build what is missing
    .venv/bin/python benchmarks/realcorpus/score.py --sets corpus3   # the held-out set (folder with HELD_OUT)
    .venv/bin/python benchmarks/realcorpus/score.py --sets corpus2 --no-build --json out.json

Each set is a folder holding SOURCES.tsv (local_file, repo, path, commit) and LABELS.tsv
(local_file, line, label, guarded, confidence, note): tables only, never third-party code. The trees
are written from bare git mirrors ($MIRRORS/<owner>+<name>/repo, the layout of the shared build.sh)
to TREES/<set>/<owner>__<name>/ (every .py/.toml/.cfg/.yaml/.yml/.json/.sh at the pinned commit), so a
file is linted beside its project's own modules. Scoring is the shared scorer's
(../shared/realcorpus/score.py, or --scorer): it runs `gpuperf-rewrite FILE --output-format json
--select GP` per labelled file; this script reads its SHOW_MISSES listing and regroups it per rule.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KEEP = re.compile(r"\.(py|toml|cfg|ya?ml|json|sh)$")
CODE = {"SYNC_ITEM": "GP101", "SYNC_PRINT": "GP102", "CUDA_SYNC_IN_LOOP": "GP103", "TO_BLOCKING": "GP104",
        "TENSOR_CREATE_THEN_MOVE": "GP105", "DL_NO_WORKERS": "GP201", "DL_NO_PIN": "GP202",
        "DL_NO_PERSISTENT": "GP203", "NO_AMP": "GP301", "NO_TF32": "GP302", "NO_COMPILE": "GP303",
        "NO_CUDNN_BENCHMARK": "GP304", "OPT_NOT_FUSED": "GP305", "ZERO_GRAD_MISSING": "GP401",
        "ZERO_GRAD_NOT_NONE": "GP402", "LOSS_ACCUM_GRAPH": "GP403", "EVAL_NO_GRAD": "GP404",
        "DDP_NO_BUCKET_VIEW": "GP502", "DDP_NO_SET_EPOCH": "GP503", "ACCUM_ALLREDUCE": "GP504",
        "DDP_FIND_UNUSED": "GP505"}
_LISTED = re.compile(r"^(false alarm|miss|unlabeled) (GP\d+) ")
_RECALL = re.compile(r"(GP\d+) (\d+)/(\d+)")


@dataclass
class RuleScore:
    """One rule's figures on one set: hits of `positives` high-confidence rows, false alarms on
    `negatives` rows (NA_/CLEAN_/guarded syncs), and findings that match no row."""
    hits: int = 0
    positives: int = 0
    false_alarms: int = 0
    negatives: int = 0
    unlabeled: int = 0


def read_table(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def label_code(label: str) -> tuple[str | None, bool]:
    """The rule code a label speaks about, and whether the row is a trap/clean row."""
    negative = label.startswith(("NA_", "CLEAN_"))
    base = label.split("_", 1)[1] if negative else label
    return CODE.get(base), negative


def negatives_per_rule(rows: list[dict[str, str]]) -> dict[str, int]:
    """Rows the shared scorer counts as negatives: NA_/CLEAN_ rows and guarded SYNC_ITEM rows."""
    out: dict[str, int] = defaultdict(int)
    for r in rows:
        code, negative = label_code(r["label"])
        if code and (negative or (r["label"] == "SYNC_ITEM" and r["guarded"] == "yes")):
            out[code] += 1
    return out


def aggregate(rows: list[dict[str, str]], scorer_output: str) -> tuple[dict[str, RuleScore], int]:
    """Per-rule figures from the label rows and the shared scorer's SHOW_MISSES output, and the
    number of files whose output could not be read (internal errors, crashes, timeouts)."""
    per: dict[str, RuleScore] = defaultdict(RuleScore)
    for code, n in negatives_per_rule(rows).items():
        per[code].negatives = n
    unreadable = 0
    for line in scorer_output.splitlines():
        if line.startswith("per rule recall:"):
            for code, hit, pos in _RECALL.findall(line):
                per[code].hits, per[code].positives = int(hit), int(pos)
        elif m := _LISTED.match(line):
            kind, code = m.groups()
            if kind == "false alarm":
                per[code].false_alarms += 1
            elif kind == "unlabeled":
                per[code].unlabeled += 1
        elif "unreadable output" in line:
            unreadable += 1
    return dict(per), unreadable


def total(per: dict[str, RuleScore]) -> RuleScore:
    t = RuleScore()
    for s in per.values():
        t.hits += s.hits; t.positives += s.positives; t.false_alarms += s.false_alarms
        t.negatives += s.negatives; t.unlabeled += s.unlabeled
    return t


def table(name: str, per: dict[str, RuleScore], files: int, unreadable: int) -> str:
    pct = lambda h, n: f"{h / n:.0%}" if n else "-"
    lines = [f"### {name}: {files} files, linted in place", "",
             "| rule | recall | | false alarms / negative rows | unlabeled findings |", "|---|---|---|---|---|"]
    for code in sorted(per):
        s = per[code]
        lines.append(f"| {code} | {s.hits}/{s.positives} | {pct(s.hits, s.positives)} | "
                     f"{s.false_alarms}/{s.negatives} | {s.unlabeled} |")
    t = total(per)
    lines.append(f"| **total** | **{t.hits}/{t.positives}** | **{pct(t.hits, t.positives)}** | "
                 f"**{t.false_alarms}/{t.negatives}** | **{t.unlabeled}** |")
    if unreadable:
        lines.append(f"\n{unreadable} file(s) gave no readable output (internal error, crash or timeout).")
    return "\n".join(lines)


def build(sources: list[dict[str, str]], out: Path, mirrors: Path) -> None:
    """Writes each (repo, commit) tree once; a stamp file makes later runs skip unchanged trees."""
    for repo, commit in sorted({(r["repo"], r["commit"]) for r in sources}):
        dest = out / repo.replace("/", "__")
        stamp = out / (repo.replace("/", "__") + ".commit")
        if dest.is_dir() and stamp.is_file() and stamp.read_text().strip() == commit:
            continue
        git = mirrors / repo.replace("/", "+") / "repo"
        if not (git / "objects").is_dir():
            git = git / ".git"
        if not git.is_dir():
            sys.exit(f"no mirror for {repo} under {mirrors} (fetch it, or pass --mirrors / set MIRRORS)")
        listing = subprocess.run(["git", "--git-dir", str(git), "ls-tree", "-r", "-z", commit],
                                 capture_output=True, check=True).stdout.decode()
        wanted = []  # (blob, path): only the kinds of file build.sh writes; mirrors may lack other blobs
        for entry in filter(None, listing.split("\0")):
            meta, path = entry.split("\t", 1)
            if meta.split()[1] == "blob" and KEEP.search(path):
                wanted.append((meta.split()[2], path))
        shutil.rmtree(dest, ignore_errors=True)
        blobs = subprocess.run(["git", "--git-dir", str(git), "cat-file", "--batch"], capture_output=True,
                               input="".join(f"{b}\n" for b, _ in wanted).encode(), check=True).stdout
        at = 0
        for blob, path in wanted:
            header_end = blobs.index(b"\n", at)
            header = blobs[at:header_end].split()
            at = header_end + 1
            if header[-1] == b"missing":
                continue
            size = int(header[2])
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blobs[at:at + size])
            at += size + 1
        stamp.write_text(commit + "\n")
        print(f"built {dest} ({sum(1 for _ in dest.rglob('*.py'))} .py files)", file=sys.stderr)


def prelint(gpr: str, files: list[Path], env: dict[str, str], timeout: float) -> list[str]:
    """Lints each file once as the scorer will (same arguments, same cache), so that the scorer's
    300-second limit per file measures nothing but the cache; returns the files over `timeout`."""
    slow = []
    for path in files:
        try:
            subprocess.run([gpr, str(path), "--output-format", "json", "--select", "GP"], capture_output=True,
                           env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            slow.append(str(path))
    return slow


def default_sets(folder: Path) -> list[str]:
    """The label sets scored when none is named. A set holding a HELD_OUT file (corpus3) is scored only
    when named: it measures how the rules generalise, so the run engineers develop against leaves it out."""
    return sorted(p.name for p in folder.iterdir() if (p / "LABELS.tsv").is_file() and not (p / "HELD_OUT").exists())


def find_gpr(explicit: str | None) -> str:
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "gpuperf-rewrite"
    return str(beside) if beside.exists() else (shutil.which("gpuperf-rewrite") or "gpuperf-rewrite")


def main(argv: list[str] | None = None) -> int:
    sets_here = default_sets(HERE)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", default=sets_here, help=f"label sets: folder names here or paths (default: {sets_here})")
    ap.add_argument("--trees", type=Path, default=Path(os.environ.get("REALCORPUS_TREES", "/tmp/realcorpus-trees")),
                    help="where the source trees are built, one folder per set ($REALCORPUS_TREES)")
    ap.add_argument("--mirrors", type=Path, default=Path(os.environ.get("MIRRORS", "/work/.mirror")),
                    help="bare git mirrors as <owner>+<name>/repo ($MIRRORS)")
    ap.add_argument("--no-build", action="store_true", help="use the trees as they are")
    ap.add_argument("--gpr", help="the gpuperf-rewrite executable (default: the one beside this Python)")
    ap.add_argument("--scorer", type=Path, default=os.environ.get("REALCORPUS_SCORER"),
                    help="the shared scorer score.py ($REALCORPUS_SCORER; default: shared/realcorpus/score.py "
                         "in a folder above this checkout or beside the mirrors' folder)")
    ap.add_argument("--json", type=Path, help="also write the per-rule figures here")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds per file for the first lint (the shared scorer allows 300, too few for some "
                         "files on a loaded machine: each file is linted here first and the scorer reads the "
                         "tool's cache)")
    args = ap.parse_args(argv)
    if args.scorer is None:
        # shared/ sits above the checkout, and beside the mirrors' folder (the layout build.sh assumes)
        args.scorer = next((p / "shared" / "realcorpus" / "score.py" for p in (*ROOT.parents, args.mirrors.parent)
                            if (p / "shared" / "realcorpus" / "score.py").is_file()), Path("score.py"))
    if not args.scorer.is_file():
        ap.error("the shared scorer was not found: pass --scorer PATH/score.py or set REALCORPUS_SCORER")
    gpr = find_gpr(args.gpr)
    report, failed = {}, False
    for name in args.sets:
        folder = Path(name) if (Path(name) / "LABELS.tsv").is_file() else HERE / name
        name = folder.name
        sources, rows = read_table(folder / "SOURCES.tsv"), read_table(folder / "LABELS.tsv")
        tree = args.trees / name
        tree.mkdir(parents=True, exist_ok=True)
        if not args.no_build:
            build(sources, tree, args.mirrors)
        env = {**os.environ, "SHOW_MISSES": "1", "GPUPERF_CACHE_DIR": str(args.trees / ".gpuperf_cache")}
        started = time.monotonic()
        slow = prelint(gpr, [tree / where for where in sorted({r["repo"].replace("/", "__") + "/" + r["path"]
                                                                for r in sources})], env, args.timeout)
        lint_s = time.monotonic() - started
        run = subprocess.run([sys.executable, str(args.scorer), gpr, str(tree), str(folder / "LABELS.tsv"),
                              str(folder / "SOURCES.tsv")], capture_output=True, text=True, env=env)
        if "real corpus (" not in run.stdout:
            print(f"### {name}: the shared scorer failed (exit {run.returncode})\n{run.stderr[-1500:]}")
            failed = True
            continue
        per, unreadable = aggregate(rows, run.stdout)
        files = len({r["local_file"] for r in rows})
        print(table(name, per, files, unreadable))
        print(f"\nshared scorer: {run.stdout.strip().splitlines()[-1]}\nfirst lint of the {len(sources)} files: "
              f"{lint_s:.0f} s (one process per file){'; over the time limit: ' + ', '.join(slow) if slow else ''}\n")
        listing = [line for line in run.stdout.splitlines() if _LISTED.match(line)]
        if os.environ.get("SHOW_MISSES"):
            print("\n".join(listing) + "\n")
        report[name] = {"files": files, "unreadable": unreadable, "first_lint_s": round(lint_s), "timed_out": slow,
                        "listing": listing, "total": asdict(total(per)),
                        "rules": {c: asdict(s) for c, s in sorted(per.items())}}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
