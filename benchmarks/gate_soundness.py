#!/usr/bin/env python
"""Usage: gate_soundness.py TREE...  (run with the worktree's python). Files where the new GP104/GP105 gates refuse and the old ones passed; for each, GP104/GP105's
findings with no gate (check_source's rules called directly on LibCST's tree, alone)."""
import sys, ast, os
from gpuperf_rewrite.rules.analysis.syntax.glance import Glance
from gpuperf_rewrite.rules.analysis.facts.program_signs import may_train_or_evaluate
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.lint.engine import run_rules, RuleSet
from gpuperf_rewrite.lint.parsing import parse
R = all_rules()
def old104(g):
    return may_train_or_evaluate(g) or \
        g.mentions("from_numpy", "as_tensor") and g.mentions_in_code("from_numpy", "as_tensor") or \
        g.mentions("yield") and g.mentions(".to", ".cuda") or \
        g.mentions("random") and g.mentions(".to(", ".cuda(") and g.mentions_in_code("random") or \
        g.mentions("Loader") and g.mentions("next") and g.mentions_in_code("Loader") and g.mentions_in_code("next")
def old105(g):
    return may_train_or_evaluate(g) or g.mentions(".cuda", ".to(", ".type_as") and \
        g.mentions("shape", "size(", "batch") and g.mentions_in_code("cuda", "to", "type_as")
n = diff = found = 0
for root in sys.argv[1:]:
    for d, _, fs in os.walk(root, followlinks=True):
        for f in fs:
            if not f.endswith('.py'): continue
            p = os.path.join(d, f)
            try:
                text = open(p, encoding='utf-8').read()
                if 'torch' not in text and '.cuda' not in text and '.to(' not in text: continue
                tree = ast.parse(text)
            except Exception: continue
            n += 1
            g = Glance(text, tree, alone=True)
            drop = [c for c, old in (("GP104", old104), ("GP105", old105)) if old(g) and not R[c].may_report(g)]
            grew = [c for c, old in (("GP104", old104), ("GP105", old105)) if not old(g) and R[c].may_report(g)]
            assert not grew, (p, grew)
            if not drop: continue
            diff += 1
            try:
                mod = parse(text.encode(), p)
                _, fnd, crashes = run_rules(mod, text, p, [R[c]() for c in drop], RuleSet(tuple(drop)))
            except Exception as e:
                print("ERR", p, e, flush=True); continue
            if fnd or crashes:
                found += 1
                print("LOST", p, [(c.code, f.node) for c, f in fnd][:3], list(crashes), flush=True)
print(f"files {n} dropped-by-new-gate {diff} with-findings-ungated {found}", flush=True)
