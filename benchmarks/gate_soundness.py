#!/usr/bin/env python
"""Are the rules' preconditions (``Rule.may_report``, asked before LibCST parses a file checked alone) sound
on real trees? Two steps, so that two versions of the code can be compared:

  gate_soundness.py list TREE... > KEPT.tsv
      (run with each version's python: a worktree's .venv, or an installed arm such as
      ``PYTHONPATH=/work/arms/k0-site``): every .py file of the trees that the engine's triage would
      parse (``rules_for`` of the default rules, the syntax gate), with the rules whose precondition
      holds on it (the engine's ``Glance``), one ``path<TAB>codes`` line per file.
  gate_soundness.py compare OLD.tsv NEW.tsv
      (run with the new version's python): for each file where NEW keeps fewer rules than OLD, the
      dropped rules' ``check`` run on LibCST's tree with no precondition asked (alone, as installed
      code is checked); a finding or a crash there is a precondition that is not sound: printed LOST.

A precondition may only refuse a file on which its rule provably reports nothing: ``compare`` must
print ``with-findings-ungated 0``.
"""
import os
import sys
import time

from gpuperf_rewrite.lint.engine import RuleSet, reporting_rules, rules_for, run_rules
from gpuperf_rewrite.lint.parsing import parse, syntax_gate
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.rules.analysis.syntax.glance import Glance

R = all_rules()
DEFAULT = RuleSet(tuple(c for c, r in R.items() if r.default_enabled))


def list_kept(roots: list[str]) -> None:
    for root in roots:
        paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root, followlinks=True) for f in fs if f.endswith(".py"))
        for path in paths:
            data = open(path, "rb").read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            rules = rules_for(text, DEFAULT)
            if not rules:
                continue
            trees: list = []
            nodes: list = []
            if syntax_gate(data, path, check_depth=True, trees=trees, nodes=nodes) is not None:
                continue
            kept = [type(r).code for r in reporting_rules(rules, Glance(text, trees[0], alone=True, nodes=nodes))]
            print(path, ",".join(kept), sep="\t", flush=True)


def _load(path: str) -> dict[str, set[str]]:
    out = {}
    for line in open(path):
        name, codes = line.rstrip("\n").split("\t")
        out[name] = set(codes.split(",")) - {""}
    return out


def compare(old_path: str, new_path: str) -> None:
    old, new = _load(old_path), _load(new_path)
    grew = [p for p in new if new[p] - old.get(p, set())]
    files = lost = 0
    start = time.process_time()
    for path in sorted(old):
        dropped = sorted(old[path] - new.get(path, set()))
        if not dropped:
            continue
        files += 1
        data = open(path, "rb").read()
        try:
            module = parse(data, path)
            _, found, crashes = run_rules(module, data.decode("utf-8"), path, [R[c]() for c in dropped], RuleSet(tuple(dropped)))
        except Exception as exc:  # noqa: BLE001 (a tool: say which file and go on)
            print("ERR", path, exc, flush=True)
            continue
        if found or crashes:
            lost += 1
            print("LOST", path, [(c.code, f.message[:80]) for c, f in found][:3], list(crashes), flush=True)
    print(f"files LibCST parses: {sum(map(bool, old.values()))} (old) -> {sum(map(bool, new.values()))} (new); "
          f"more rules kept by new on {len(grew)}; "
          f"files-with-dropped-rules {files} with-findings-ungated {lost} ({time.process_time() - start:.1f} s CPU)", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "list":
        list_kept(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
