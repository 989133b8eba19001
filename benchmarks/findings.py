"""Findings on real code: per-rule counts, and whether every fix re-parses and is idempotent.

    python benchmarks/findings.py counts PATH...                   # per-rule counts, --select ALL
    python benchmarks/findings.py counts --per-file fixtures/      # codes per file
    python benchmarks/findings.py counts --site /tmp/before_site PATH...   # an older build (below)
    python benchmarks/findings.py fixes DIR                        # fix safety on a corpus

``counts`` runs ``gpuperf-rewrite check --isolated --no-cache --select ALL --output-format json``
and tallies the findings by rule. ``--site DIR`` runs another build of the tool instead: DIR is a
``pip install --no-deps --target DIR <source tree>`` of an older commit, put first on PYTHONPATH
(the run's working directory is a temporary one, so this checkout cannot shadow it).

``fixes`` copies DIR's Python files to a temporary directory (nothing is written next to the
originals) and, for every (file, rule) pair whose findings carry a fix, and once for all rules
together, runs ``--fix --unsafe-fixes`` on a fresh copy and checks that the result parses and
compiles, and that a second ``--fix`` pass changes nothing (idempotence). A fix that changed
nothing is reported too (a fix offered but not applied).
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

BASE = ["check", "--isolated", "--no-cache", "-j", "1"]
OLD_BASE = ["check", "--isolated", "-j", "1"]  # builds from before the lint cache had no --no-cache


def tool(args: list[str], site: Path | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    with tempfile.TemporaryDirectory() as neutral:  # no checkout on sys.path[0]
        out = subprocess.run([sys.executable, "-m", "gpuperf_rewrite", *args], capture_output=True, text=True,
                             env=env, cwd=cwd or neutral)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"gpuperf-rewrite {' '.join(args[:8])} ... exited {out.returncode}:\n{out.stderr[-2000:]}")
    return out


def findings(paths: list[str], site: Path | None = None, select: str = "ALL") -> list[dict]:
    paths = [str(Path(p).resolve()) for p in paths]
    base = BASE if site is None else OLD_BASE
    return json.loads(tool([*base, "--select", select, "--output-format", "json", *paths], site).stdout or "[]")


def counts_main(args: argparse.Namespace) -> dict:
    diags = findings(args.paths, args.site)
    by_rule = collections.Counter(d["code"] for d in diags)
    files = collections.Counter(d["path"] for d in diags)
    print(f"{len(diags)} findings in {len(files)} files")
    print("| rule | findings | files |\n|---|---|---|")
    for code, n in sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"| {code} | {n} | {len({d['path'] for d in diags if d['code'] == code})} |")
    per_file: dict[str, dict[str, int]] = {}
    for d in diags:
        per_file.setdefault(d["path"], collections.Counter())[d["code"]] += 1
    if args.per_file:
        print("\n| file | findings by rule |\n|---|---|")
        for path in sorted(per_file):
            print(f"| `{Path(path).name}` | " + ", ".join(f"{c} x{n}" if n > 1 else c
                                                         for c, n in sorted(per_file[path].items())) + " |")
    return {"total": len(diags), "by_rule": dict(by_rule), "per_file": per_file}


@dataclass
class FixCheck:
    file: str
    rules: str
    fixable: int  # findings of these rules on the file that carry a fix
    changed: bool = False
    parses: bool = True
    compiles: bool = True
    idempotent: bool = True
    error: str = ""


def check_fix(src: Path, rules: str, fixable: int, work: Path) -> FixCheck:
    res = FixCheck(str(src), rules, fixable)
    work.mkdir(parents=True, exist_ok=True)
    target = work / src.name
    shutil.copyfile(src, target)
    before = target.read_bytes()
    fix = [*BASE, "--select", rules, "--fix", "--unsafe-fixes", "-q", str(target)]
    tool(fix)
    first = target.read_bytes()
    res.changed = first != before
    try:
        tree_src = first.decode("utf-8")
        ast.parse(tree_src)
    except (SyntaxError, UnicodeDecodeError) as exc:
        res.parses = res.compiles = False
        res.error = f"parse: {exc}"
        return res
    try:
        compile(tree_src, str(target), "exec")
    except SyntaxError as exc:
        res.compiles, res.error = False, f"compile: {exc}"
    tool(fix)
    res.idempotent = target.read_bytes() == first
    if not res.idempotent:
        res.error += " second pass changed the file"
    return res


def fixes_main(args: argparse.Namespace) -> dict:
    files = sorted(p for p in Path(args.dir).rglob("*.py") if p.is_file())
    diags = findings([str(p) for p in files])
    fixable: dict[Path, collections.Counter] = {}  # by full path: a corpus holds many train.py
    for d in diags:
        if d.get("fix"):
            fixable.setdefault(Path(d["path"]).resolve(), collections.Counter())[d["code"]] += 1
    checks: list[FixCheck] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (path, codes) in enumerate(sorted(fixable.items())):
            for code, n in sorted(codes.items()):
                checks.append(check_fix(path, code, n, Path(tmp, f"{i}-{code}")))
            checks.append(check_fix(path, "ALL", sum(codes.values()), Path(tmp, f"{i}-ALL")))
            print(f"checked {path}", file=sys.stderr, flush=True)
    single = [c for c in checks if c.rules != "ALL"]
    together = [c for c in checks if c.rules == "ALL"]
    summary = {
        "files": len(files),
        "fixable_findings": sum(c.fixable for c in single),
        "fixable_by_safety": dict(collections.Counter(d["fix"]["safety"] for d in diags if d.get("fix"))),
        "file_rule_pairs": len(single),
        "pairs_changed": sum(c.changed for c in single),
        "pairs_reparse": sum(c.parses for c in single),
        "pairs_compile": sum(c.compiles for c in single),
        "pairs_idempotent": sum(c.idempotent for c in single),
        "files_all_rules": len(together),
        "files_all_changed": sum(c.changed for c in together),
        "files_all_reparse": sum(c.parses for c in together),
        "files_all_compile": sum(c.compiles for c in together),
        "files_all_idempotent": sum(c.idempotent for c in together),
    }
    per_rule: dict[str, collections.Counter] = {}
    for c in single:
        r = per_rule.setdefault(c.rules, collections.Counter())
        r["pairs"] += 1
        r["fixable"] += c.fixable
        r["changed"] += c.changed
        r["ok"] += c.parses and c.compiles and c.idempotent
    print(json.dumps(summary, indent=1))
    print("\n| rule | files with a fix | fixable findings | file changed | re-parses, compiles, idempotent |")
    print("|---|---|---|---|---|")
    for code, r in sorted(per_rule.items()):
        print(f"| {code} | {r['pairs']} | {r['fixable']} | {r['changed']} | {r['ok']} |")
    bad = [c for c in checks if not (c.parses and c.compiles and c.idempotent)]
    unchanged = [c for c in single if not c.changed]
    for c in bad:
        print(f"BROKEN: {c.file} --select {c.rules}: {c.error}")
    for c in unchanged:
        print(f"offered but not applied: {c.file} --select {c.rules} ({c.fixable} fixable)")
    return {"summary": summary, "checks": [asdict(c) for c in checks]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("counts", help="per-rule findings with --select ALL")
    c.add_argument("paths", nargs="+")
    c.add_argument("--per-file", action="store_true")
    c.add_argument("--site", type=Path, help="run the build installed (pip --target) in this directory")
    f = sub.add_parser("fixes", help="every fix re-parses, compiles and is idempotent")
    f.add_argument("dir")
    for p in (c, f):
        p.add_argument("--json", type=Path, help="also write the raw results here")
    args = ap.parse_args(argv)
    report = counts_main(args) if args.cmd == "counts" else fixes_main(args)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=dict))
    return 0


if __name__ == "__main__":
    sys.exit(main())
