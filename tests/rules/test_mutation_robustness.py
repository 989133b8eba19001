"""Robust by construction (issue 27): real training-loop shapes, rewritten programmatically into
the forms real projects wrap them in (tests/helpers/mutations.py: the loop under
``if``/``with``/``try``/``for``-``else``/``match``, in nested, async and decorated defs and methods,
with ``global``/``nonlocal``, one-line suites and semicolons, walrus, attribute and subscript
targets, annotations, comprehension-heavy lines, a file repeated 50 times), then linted with every
rule (``--select ALL``) and every fix (unsafe too), in process: no internal error, nothing that
cannot be parsed, no fix rejected or left unconverged, every fixed file compiles and a second fix
pass changes nothing.

Deterministic and bounded: every mutation runs on three of the seeds (in rotation, so each seed
meets most wrappers and rewrites), plus fixed chains of three mutations from a seeded generator.
A failure names the seed and the chain; ``tests.helpers.mutations.mutate(source, chain)`` rebuilds
the mutant."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import resolve_selection
from tests.helpers.mutations import MUTATIONS, compositions, mutate, repeated

DATA = Path(__file__).parent / "data"
SEEDS = {  # the training-loop shapes mutated: name -> file
    "plain": DATA / "train_small.py",  # a loop in a function, model class, optimizer
    "ddp_accum": DATA / "frameworks" / "ddp_accum_slow.py",  # DDP, accumulation under a periodic if
    "micro_amp_eval": DATA / "mutation_seeds" / "micro_steps_amp_eval.py",  # nanoGPT's loop in small
    "accelerate": DATA / "frameworks" / "accelerate_slow.py",
    "hf_trainer": DATA / "frameworks" / "hf_trainer_slow.py",
    "lightning": DATA / "frameworks" / "lightning_slow.py",
}
ALL = RuleSet(tuple(resolve_selection(select=["ALL"])))
PER_MUTATION = 3  # seeds each single mutation runs on
CHAINS = compositions(count=24, length=3, seed=27)
LONG_REPEAT = 50


def _plan() -> dict[str, list[tuple[str, ...]]]:
    """Seed -> the mutation chains it runs: singles in rotation, then the chains, round robin."""
    seeds = list(SEEDS)
    plan: dict[str, list[tuple[str, ...]]] = {s: [] for s in seeds}
    for i, name in enumerate(sorted(MUTATIONS)):
        for k in range(PER_MUTATION):
            plan[seeds[(i + k) % len(seeds)]].append((name,))
    for i, chain in enumerate(CHAINS):
        plan[seeds[i % len(seeds)]].append(chain)
    return plan


PLAN = _plan()


def _problems(code: str, label: str) -> list[str]:
    """What is wrong with linting and fixing ``code`` with every rule; empty when nothing is."""
    res = check_source(code.encode(), "mutant.py", ALL, "unsafe")
    out = [f"{label}: {d.code} {d.line}:{d.column} {d.message}" for d in res.diagnostics if d.code.startswith("E")]
    out += [f"{label}: warning: {w}" for w in res.warnings]
    if res.fixed is not None:
        try:
            compile(res.fixed, "fixed.py", "exec")
        except SyntaxError as exc:
            return [*out, f"{label}: the fixed file does not compile: {exc}"]
        again = check_source(res.fixed, "mutant.py", ALL, "unsafe")
        if again.fixed is not None:
            out.append(f"{label}: a second fix pass changed the file again")
        out += [f"{label}: after fixing: {d.code} {d.message}" for d in again.diagnostics if d.code.startswith("E")]
    return out


def test_every_mutation_runs_and_the_plan_is_fixed():
    assert sum(len(chains) for chains in PLAN.values()) == len(MUTATIONS) * PER_MUTATION + len(CHAINS)
    assert {c for chains in PLAN.values() for chain in chains for c in chain} == set(MUTATIONS)
    assert CHAINS == compositions(count=24, length=3, seed=27)  # the same mutants on every run
    sources = {seed: path.read_text(encoding="utf-8") for seed, path in SEEDS.items()}
    for name in MUTATIONS:  # each mutation changes the code of some seed it runs on (none is a no-op)
        planned = [seed for seed, chains in PLAN.items() if (name,) in chains]
        assert any(mutate(sources[seed], (name,)) != sources[seed] for seed in planned), name


@pytest.mark.parametrize("seed", list(SEEDS))
def test_mutants_lint_and_fix_without_internal_errors(seed: str):
    source = SEEDS[seed].read_text(encoding="utf-8")
    problems = _problems(source, f"{seed} (unmutated)")
    for chain in PLAN[seed]:
        label = f"{seed} {'+'.join(chain)}"
        code = mutate(source, chain)
        compile(code, label, "exec")  # the mutation itself kept the code valid
        problems += _problems(code, label)
    assert problems == [], "\n".join(problems)


def test_a_very_long_file_lints_and_fixes_without_internal_errors():
    code = mutate(SEEDS["plain"].read_text(encoding="utf-8"), ("one_line_suites",))
    long = repeated(LONG_REPEAT)(cst.parse_module(code)).code
    assert long.count("loss.backward()") == LONG_REPEAT
    assert _problems(long, f"plain one_line_suites x{LONG_REPEAT}") == []
