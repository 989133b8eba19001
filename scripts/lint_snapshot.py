"""Dump the linter's output on a fixed corpus, so a refactoring can prove it changed nothing.

    python scripts/lint_snapshot.py OUT_DIR                # write the snapshot
    python scripts/lint_snapshot.py --compare BASE NEW     # diff two snapshots (exit 1 on a difference)

The corpus: every file under fixtures/, tests/rules/data and tests/lint/data, linted by the CLI
(``--output-format json``, ``--diff --unsafe-fixes`` and the text report, all rules, no cache); and every embedded
rule example and rule fixture case (tests/rules/fixtures), linted in-process with its own rule
(and its options) and with all rules: the JSON diagnostics and the unsafe-fixed source.
``--compare`` ignores only the keys named with
``--ignore-key`` (a new JSON field), or folds one back into the message (``--glue-key
no_fix_reason``: the message with its reason, as the text report shows it), and reports any
other difference byte for byte (JSON documents are then re-indented alike on both sides).
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ("fixtures", "tests/rules/data", "tests/lint/data")


def _cli(args: list[str], cwd: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "gpuperf_rewrite", *args], cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    return f"exit {out.returncode}\n--- stdout\n{out.stdout}--- stderr\n{out.stderr}"


def _files() -> list[Path]:
    return sorted(p for d in CORPUS for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def snapshot_cli(out: Path) -> None:
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        name = rel.replace("/", "__")
        base = ["--isolated", "--no-cache", "--select", "ALL", "-j", "1", rel]
        (out / f"cli__{name}.json.txt").write_text(_cli([*base, "--output-format", "json"], ROOT))
        (out / f"cli__{name}.diff.txt").write_text(_cli([*base, "--diff", "--unsafe-fixes"], ROOT))
        (out / f"cli__{name}.text.txt").write_text(_cli([*base, "--unsafe-fixes"], ROOT))


def snapshot_examples(out: Path) -> None:
    """Every rule case (kept examples and tests/rules/fixtures), keyed by its content, not by
    where it is written, so moving an example into a fixture changes nothing here."""
    import hashlib

    sys.path.insert(0, str(ROOT))  # tests.helpers, when run as a script
    from gpuperf_rewrite.lint.engine import RuleSet, check_source
    from gpuperf_rewrite.lint.registry import all_rules
    from gpuperf_rewrite.lint.reporters import format_json
    from tests.helpers.rule_cases import all_cases

    every = tuple(all_rules())
    by_rule: dict[str, list[tuple[str, str]]] = {code: [] for code in every}
    for case in all_cases():
        opts = {case.rule: dict(case.options)} if case.options else {}
        key = json.dumps([case.kind, case.code, opts], sort_keys=True)
        parts = []
        for label, codes in (("own", (case.rule,)), ("all", every)):
            rs = RuleSet(codes, opts)
            found = check_source(case.code.encode(), "example.py", rs, "none")
            fixed = check_source(case.code.encode(), "example.py", rs, "unsafe")
            parts.append(f"=== {case.kind} {hashlib.sha256(key.encode()).hexdigest()[:12]} {label}\n"
                         f"{format_json(found.diagnostics)}\n--- error {found.error!r}\n--- fixed\n"
                         f"{fixed.fixed.decode() if fixed.fixed is not None else '<none>'}\n")
        by_rule[case.rule].append((key, "".join(parts)))
    for code, cases in by_rule.items():
        (out / f"examples__{code}.txt").write_text("".join(text for _, text in sorted(cases)))


def _strip(text: str, keys: set[str], glue: str | None) -> str:
    """Drop the ignored keys from every JSON document in ``text`` (documents sit between the
    ``===``/``---`` marker lines); with ``glue``, put that key's value back into the message the
    way the text report shows it, to compare against a snapshot from before the key existed."""
    if not keys and glue is None:
        return text
    out, chunk = [], []

    def flush() -> None:
        body = "".join(chunk)
        try:
            data = json.loads(body)
        except ValueError:
            out.append(body)
        else:
            out.append(json.dumps(_drop(data, keys, glue), indent=2) + "\n")
        chunk.clear()

    for line in text.splitlines(keepends=True):
        if line.startswith(("===", "---", "exit ")):
            flush()
            out.append(line)
        else:
            chunk.append(line)
    flush()
    return "".join(out)


def _drop(data: object, keys: set[str], glue: str | None) -> object:
    if isinstance(data, dict):
        if glue is not None and glue in data:
            if data[glue]:
                data = {**data, "message": f"{data['message']} (no automatic fix: {data[glue]})"}
            data = {k: v for k, v in data.items() if k != glue}
        return {k: _drop(v, keys, glue) for k, v in data.items() if k not in keys}
    if isinstance(data, list):
        return [_drop(v, keys, glue) for v in data]
    return data


def compare(base: Path, new: Path, keys: set[str], glue: str | None = None) -> int:
    names = sorted({p.name for p in base.iterdir()} | {p.name for p in new.iterdir()})
    bad = 0
    for name in names:
        a, b = base / name, new / name
        if not a.exists() or not b.exists():
            print(f"only in {'new' if b.exists() else 'base'}: {name}")
            bad += 1
            continue
        ta, tb = _strip(a.read_text(), keys, None), _strip(b.read_text(), keys, glue)
        if ta != tb:
            bad += 1
            sys.stdout.writelines(difflib.unified_diff(ta.splitlines(True), tb.splitlines(True), str(a), str(b)))
    print(f"{len(names)} files compared, {bad} differ")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BASE", "NEW"))
    ap.add_argument("--ignore-key", action="append", default=[], help="JSON key to leave out of --compare")
    ap.add_argument("--glue-key", help="JSON key of NEW to fold back into its message, as the text report shows it")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare, set(args.ignore_key), args.glue_key)
    if args.out is None:
        ap.error("give OUT_DIR or --compare BASE NEW")
    args.out.mkdir(parents=True, exist_ok=True)
    snapshot_cli(args.out)
    snapshot_examples(args.out)
    print(f"snapshot written to {args.out} ({len(list(args.out.iterdir()))} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
