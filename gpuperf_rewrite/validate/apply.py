"""``gpuperf-rewrite train.py --apply``: rewrite, A/B-validate, keep what passed, commit it with a note.

The script and the first-party modules it runs are rewritten together
(:mod:`gpuperf_rewrite.validate.changeset`): one candidate is one set of rule codes applied in
every file, measured as one version of the project. Nothing is written until validation has
finished: the original and each candidate rewrite run in scratch mirrors of the checkout
(:mod:`gpuperf_rewrite.validate.run.workspace`) that hold the version's copy of every changed file,
so sibling files and imports resolve as they would and the runs' own writes stay out of it. Only
the final step touches the working tree, through
:func:`gpuperf_rewrite.validate.record.commit.commit_files` (or an atomic write of the set of files
outside git / with --no-commit).
Before any A/B, one profile run of the original decides the plan (:mod:`gpuperf_rewrite.validate.plan`):
the validation device (fixes that gain only on CUDA are not tried elsewhere, but listed as needing
a GPU), the order of the candidates (what the diagnosis names first) and the time estimates behind
``--budget`` and the ETA. Which fixes are kept, with the false-commit rate of the whole run at most
alpha, is :mod:`gpuperf_rewrite.validate.judge.search`.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from gpuperf_rewrite.validate.changeset import (ChangeSet, ProjectFile, Rewriter, RewriterFor, collect,
                                                script_only)
from gpuperf_rewrite.validate.judge.abtest import ABConfig, ABError, ABResult, run_ab, unmeasured
from gpuperf_rewrite.validate.console import format_table
from gpuperf_rewrite.validate.run.lifetime import exit_code, returns_on_interrupt
from gpuperf_rewrite.validate.record.notes import check_notes_ref, note_record
from gpuperf_rewrite.validate.judge.records import first_fingerprint
from gpuperf_rewrite.validate.plan import (NEEDS_GPU, NOT_MEASURABLE, Clock, GainsOnOf, Plan, fit_budget, fix_units,
                                           make_plan, rule_gains_on, smallest_runs, with_units)
from gpuperf_rewrite.validate.run.runs import Runner, measured_run
from gpuperf_rewrite.validate.rewriting import ApplyError, engine_rewriters
from gpuperf_rewrite.validate.judge.search import (CONFIRMATION, Outcome, alpha_plan, choose_units,
                                                  phase_config)

if TYPE_CHECKING:
    from git import Repo

    from gpuperf_rewrite.lint.api import Settings
    from gpuperf_rewrite.lint.fixes import FixMode
    from gpuperf_rewrite.validate.judge.abtest import Progress
    from gpuperf_rewrite.validate.run.workspace import Workspace

Echo = Callable[..., None]


@dataclass(frozen=True)
class ApplyOptions:
    """What --apply may do: which fixes, whether to measure, whether to commit."""

    level: FixMode = "unsafe"  # --safe-only: "safe"
    no_commit: bool = False
    no_validate: bool = False
    allow_dirty: bool = False
    json_out: bool = False
    budget_s: float | None = None  # --budget: start no A/B that cannot finish within it
    # Receives the JSON report (what --json prints) once it is final: --html renders it.
    report_sink: Callable[[dict[str, Any]], None] | None = None


def _echo(message: str = "", err: bool = False) -> None:
    print(message, file=sys.stderr if err else sys.stdout, flush=True)


@returns_on_interrupt  # SIGTERM like Ctrl-C: same cleanup, exit 143 (130 for Ctrl-C), nothing committed
def run_apply(path: str, *, settings: Settings | None = None, script_args: Sequence[str] = (),
              config: ABConfig | None = None, options: ApplyOptions = ApplyOptions(),
              runner: Runner | None = None, rewriter: Rewriter | None = None,
              progress: Progress | None = None, echo: Echo = _echo,
              gains_on: GainsOnOf | None = None, module: tuple[str, Path] | None = None,
              rewriter_for: RewriterFor | None = None, modules: Sequence[Path] | None = None) -> int:
    """The --apply pipeline; returns the exit code (0 applied, 1 nothing passed, 2 error/refused).
    With ``module`` (name, sys.path root), ``path`` is its file and every run is ``python -m name``.
    ``rewriter`` (the script's only) or ``rewriter_for`` (per file and entry) replace the engine's
    fixes, ``modules`` the import walk that finds the project's modules (tests)."""
    from gpuperf_rewrite.lint.sourceio import unified_diff

    from gpuperf_rewrite.validate.record.checkout import CheckoutRefused, apply_lock, script_target

    cfg = config or ABConfig()
    if not Path(path).is_file():
        raise ApplyError(f"{path}: not a file (--apply takes one training script)")
    try:
        target = script_target(path)  # a symbolic link: its target, if git and the write agree on it
    except CheckoutRefused as exc:
        raise ApplyError(str(exc)) from None
    original = target.read_bytes()
    if runner is None and not options.no_validate:
        _prestart(target, cfg)
    json_out = options.json_out
    if rewriter_for is None:
        rewriter_for = script_only(rewriter, target) if rewriter else engine_rewriters(settings, options.level, echo)
    where = _git_preflight(target, options, echo)
    if isinstance(where, int):
        return where
    repo, rel, head = where
    rel = rel or str(path)

    rewrite = rewriter_for(target, target)
    fixed, applied = rewrite(original, None)
    project = collect(ProjectFile(target, rel, original, rewrite, dict(applied) if fixed is not None else {}),
                      rewriter_for, repo=repo, allow_dirty=options.allow_dirty, modules=modules)
    for f in project.files:
        if f.found:
            echo(f"{path if f is project.entry else f.rel}: {sum(f.found.values())} fix(es) from "
                 f"{', '.join(f'{c} x{n}' for c, n in sorted(f.found.items()))}", err=json_out)
    for other, why in project.skipped.items():
        echo(f"{other}: {why}", err=True)
    codes = project.codes
    if not codes:
        which = "safe fixes only" if options.level == "safe" else "safe and unsafe fixes"
        echo(f"{path}: no fixes to apply ({which}).")
        return 0
    if options.no_validate:
        if not json_out:
            for f, new in project.changed(codes):
                echo(unified_diff(f.rel, f.original, new))
        return _write_unvalidated(project, codes, json_out, echo)
    # Before the profile run: at the least strict level the plan can give (only fixes that gain on
    # CUDA can drop out, on a CPU); the plan's own level is checked again once it is known.
    _check_decidable(cfg, sum((gains_on or rule_gains_on)(c) != "cuda" for c in codes))

    from gpuperf_rewrite.validate.judge import abtest
    from gpuperf_rewrite.validate.run.workspace import Workspace, WorkspaceError

    with contextlib.ExitStack() as stack:
        try:
            if repo is not None:
                stack.enter_context(apply_lock(repo))  # one --apply per repository at a time
        except CheckoutRefused as exc:
            echo(f"refused: {exc}", err=True)
            return 2
        ws = stack.enter_context(Workspace(prefix="gpuperf-apply-",  # every run in a scratch mirror
                                           warn=lambda m: echo(f"warning: {m}", err=True)))
        try:
            ctx = _Context(target, rel, project, cfg, tuple(script_args),
                           ws.runner(runner or abtest.default_runner()), progress, repo, head, options, echo,
                           gains_on or rule_gains_on, module=module, workspace=ws)
            return _validate_and_write(ctx, ws)
        except WorkspaceError as exc:
            echo(f"error: {exc}", err=True)
            return 2
        except KeyboardInterrupt as exc:  # SIGTERM too (lifetime.Terminated)
            echo("Interrupted: nothing was changed.", err=True)
            return exit_code(exc)


def _prestart(target: Path, cfg: ABConfig) -> None:
    """Real runs ahead: their warm interpreter imports torch while the tool lints and plans."""
    from gpuperf_rewrite.validate.run.profiling import prestart

    prestart(target, launcher=cfg.launcher)


def _git_preflight(target: Path, options: ApplyOptions,
                   echo: Echo) -> tuple[Repo | None, str | None, str | None] | int:
    """(repo, path in the repo, HEAD) when the result will be committed, (None, None, None) when
    not; an exit code when the repository's state is refused."""
    if options.no_commit or options.no_validate:
        return None, None, None
    from gpuperf_rewrite.validate.record import gitops

    repo = gitops.find_repo(target)
    if repo is None:
        return None, None, None
    from gpuperf_rewrite.validate.record.commit import recover_interrupted

    done = recover_interrupted(repo)  # what an --apply killed in its commit left, undone
    if done:
        echo(f"Put back {', '.join(done)}, left rewritten by an --apply killed before its commit existed.", err=True)
    try:
        rel = gitops.preflight(repo, target, allow_dirty=options.allow_dirty)
        check_notes_ref(repo)  # the commit's note goes there: a broken ref would fail after measuring
    except gitops.GitRefused as exc:
        echo(f"refused: {exc}", err=True)
        return 2
    return repo, rel, gitops.head_sha(repo)


def _check_decidable(cfg: ABConfig, n_codes: int) -> None:
    """Refuse before measuring when an A/B that can commit (at its share of alpha) can never decide."""
    from gpuperf_rewrite.validate.judge.stats import undecidable_reason

    level = min(alpha_plan(cfg.alpha, n_codes).values())
    why = undecidable_reason(cfg, alpha=level)
    if why:
        share = "" if level == cfg.alpha else f" (--apply gives alpha/2 = {level:g} to each A/B that can commit)"
        raise ApplyError(why + share)


def _write_unvalidated(project: ChangeSet, codes: tuple[str, ...], json_out: bool, echo: Echo) -> int:
    changed = project.changed(codes)
    if not project.write(codes, echo):
        return 2
    echo(f"Wrote {', '.join(str(f.path) for f, _ in changed)} without validation: nothing was measured, "
         f"nothing committed.", err=json_out)
    if json_out:
        echo(json.dumps({"status": "written_unvalidated", "rules": list(codes), "files": project.to_json(codes)},
                        indent=2))
    return 0


@dataclass
class _Context:
    """Everything one --apply validation needs once the fixes are known."""

    target: Path
    rel: str
    project: ChangeSet  # the script and the modules it runs that have fixes (entry first)
    cfg: ABConfig
    script_args: tuple[str, ...]
    runner: Runner  # already wrapped to run in the workspace's mirrors
    progress: Progress | None
    repo: Repo | None  # None: the result is not committed
    head: str | None
    options: ApplyOptions
    echo: Echo
    gains_on: GainsOnOf = rule_gains_on
    plan: Plan | None = None
    module: tuple[str, Path] | None = None  # run as `python -m` (name, sys.path root)
    workspace: Workspace | None = None  # where the runs ran: their phases, for the report's `overhead`
    run_time: dict[str, Any] | None = None  # what the profile run added and ruled out (validate/runfixes.py)

    @property
    def codes(self) -> tuple[str, ...]:
        return self.project.codes

    @property
    def unchanged(self) -> str:
        """What a run that writes nothing leaves as it was, for its closing line."""
        files = self.project.files
        return f"{self.target} is unchanged" if len(files) == 1 else f"{', '.join(f.rel for f in files)} are unchanged"

    def say(self, message: str) -> None:
        """Human-readable status: stdout normally, stderr when stdout carries the JSON report."""
        self.echo(message, err=self.options.json_out)


def _validate_and_write(ctx: _Context, ws: Workspace) -> int:
    cfg, project = ctx.cfg, ctx.project
    script_args, runner, progress, echo = ctx.script_args, ctx.runner, ctx.progress, ctx.echo
    json_out = ctx.options.json_out
    a = project.version((), ctx.module)  # every module as read: A runs exactly what B is compared with
    a_path = ws.add(a)
    setup_s = ws.prepare(a_path)  # the mirror, once: not in the profile run's time, which stands for every run
    build = project.source_key  # every file of a version, as one key: identical versions compare equal
    original = build(())
    clock = _profile_and_plan(ctx, a_path, setup_s, build)
    if isinstance(clock, int):
        return clock
    original = build(())  # the profile run may have added files (a config the run read)
    plan = clock.plan
    if not plan.codes:
        return _nothing_measurable(ctx, plan)
    _check_decidable(cfg, len(plan.search_units))
    timed_progress = clock.wrap(progress)

    if not json_out:  # the diff of what will be tried; fixes that need a GPU are only listed (plan)
        from gpuperf_rewrite.lint.sourceio import unified_diff

        for f, new in project.changed(plan.codes):
            echo(unified_diff(f.rel, f.original, new))

    def evaluate(subset: tuple[str, ...], cfg: ABConfig = cfg, phase: str = "") -> ABResult:
        b = project.version(subset, ctx.module)
        b_path = ws.add(b)
        echo(f"== A/B {clock.abs_started} ({phase}): original vs rewrite with {', '.join(subset)}", err=True)
        res = run_ab(a_path, b_path, script_args, config=cfg, runner=runner, progress=timed_progress,
                     source_a=a.text, source_b=b.text, may_extend=clock.may_extend)
        if not json_out:
            echo(format_table(res))
        else:
            echo(f"   {res.verdict}: {res.reason}", err=True)
        return res

    measured: dict[bytes, tuple[tuple[str, ...], ABResult]] = {}  # the screening's results, by source

    def evaluate_in_time(subset: tuple[str, ...], alpha: float, phase: str) -> ABResult:
        data = build(subset)
        if data == original:  # never an A/B of the original against itself
            return unmeasured(cfg, f"the rewrite with {', '.join(subset)} is the original, byte for byte: "
                                   f"nothing to measure")
        if phase != CONFIRMATION and data in measured:  # the confirmation alone measures again, by design
            codes, res = measured[data]
            return replace(res, reason=f"{res.reason} (the rewrite with {', '.join(subset)} is the same source as "
                                       f"with {', '.join(codes)}: that A/B's result, not measured again)")
        clock.before_ab(subset, phase)  # OutOfBudget: the search stops and says what was not tried
        res = evaluate(subset, phase_config(cfg, alpha, phase, plan.runs_per_side, plan.max_runs_per_side), phase)
        if phase != CONFIRMATION:
            measured[data] = (subset, res)
        return res

    try:
        outcome = choose_units(plan.search_units, evaluate_in_time, cfg.alpha, lead=plan.lead)
    except ABError as exc:
        echo(f"error: {exc}", err=True)
        if exc.partial is not None and exc.partial.a:
            tail = exc.partial.a[-1].stderr_tail.strip()
            if tail:
                echo(tail[-2000:], err=True)
        return 2
    return _conclude(ctx, outcome)


def _nothing_measurable(ctx: _Context, plan: Plan) -> int:
    """Every fix needs a GPU, several processes, or changes nothing: exit 1, nothing changed."""
    why = [f"{c} ({NEEDS_GPU})" for c in plan.needs_gpu]
    why += [f"{c} ({reason})" for c, reason in {**plan.not_measurable, **plan.inert}.items()]
    ctx.say(f"Nothing can be validated here ({NOT_MEASURABLE}): {'; '.join(why)}. "
            f"{ctx.unchanged} and nothing was committed.")
    status = "needs_gpu" if not plan.not_measurable and not plan.inert else "not_measurable"
    return _emit(ctx, {**_report_base(ctx, Outcome(kept=())), "status": status}, 1)


def _profile_and_plan(ctx: _Context, a_path: Path, setup_s: float = 0.0,
                      build: Callable[[tuple[str, ...]], bytes] | None = None) -> Clock | int:
    """One profile run of the original (same mirror, steps, warmup and timeout as the A/B runs),
    then the plan (what is measured together found with ``build``), printed; an exit code when
    the original cannot even be profiled."""
    from gpuperf_rewrite.validate import plan as planning
    from gpuperf_rewrite.validate.judge.records import describe_failure, record_from_doc, too_short

    cfg = ctx.cfg
    ctx.echo("== profiling the original (one run) to plan the validation", err=True)
    t0 = planning.now()
    doc = ctx.runner(measured_run(a_path, ctx.script_args, cfg, cfg.seed))
    # The warm interpreter's own start (run/warmstart.py) is paid by this first run only: not per run.
    run_s = max(0.0, planning.now() - t0 - float((doc.get("phases") or {}).get("server_start_s") or 0.0))
    rec = record_from_doc("A", 0, doc, seed=cfg.seed)
    if not rec.ok:
        ctx.echo(f"error: the original script (A) failed its profile run, nothing to compare against: "
                 f"{describe_failure(rec)}", err=True)
        tail = str(doc.get("stderr_tail") or "").strip()
        if tail:
            ctx.echo(tail[-2000:], err=True)
        return 2
    short = too_short(rec, cfg.warmup)  # every A/B run would end there too: nothing could be judged
    if short:
        ctx.say(f"No A/B can judge this script: {short}. {ctx.unchanged} and nothing was committed.")
        return _emit(ctx, {**_report_base(ctx, Outcome(kept=())), "status": "too_short", "reason": short}, 1)
    _learn_from_run(ctx, doc)
    plan = make_plan(doc, run_s, ctx.codes, cfg.runs, gains_on=ctx.gains_on, budget_s=ctx.options.budget_s,
                     max_runs_per_side=cfg.max_runs, setup_s=setup_s, files=ctx.project.where())
    if build is not None and plan.codes:  # building the rewrites takes time too: before the budget fit
        plan = with_units(plan, fix_units(plan.codes, build, build(())))
    level = min(alpha_plan(cfg.alpha, len(plan.search_units)).values())  # the strictest A/B the search runs
    plan = fit_budget(plan, smallest_runs(cfg, level), spent_s=planning.now() - t0)
    ctx.plan = plan
    for line in plan.describe():
        ctx.say(line)
    return Clock(plan, start=t0)


def _learn_from_run(ctx: _Context, doc: Mapping[str, Any]) -> None:
    """Run-time findings (the shim's ``observed``): settings written into the config file the run
    read become candidates; static fixes the run disproved are taken out (validate/runfixes.py)."""
    from gpuperf_rewrite.validate.runfixes import run_time_fixes

    ctx.run_time = run_time_fixes(ctx.project, doc, ctx.target, repo=ctx.repo,
                                  allow_dirty=ctx.options.allow_dirty, echo=ctx.echo)


def _conclude(ctx: _Context, outcome: Outcome) -> int:
    """Report, then write or commit the passing subset (or nothing)."""
    report = _report_base(ctx, outcome)
    for c, why in outcome.dropped.items():
        ctx.say(f"dropped {c}: {why}")
    for c, why in outcome.not_tried.items():
        ctx.say(f"not decided {c}: {why}")
    plan = ctx.plan
    if plan is not None and plan.needs_gpu:
        ctx.say(f"{NEEDS_GPU} (not tried on {plan.device}, not applied): {', '.join(plan.needs_gpu)}; "
                f"run --apply where the script trains on CUDA to validate them")
    for c, why in ({**plan.not_measurable, **plan.inert} if plan is not None else {}).items():
        ctx.say(f"{NOT_MEASURABLE} (not tried, not applied) {c}: {why}")
    if outcome.stopped:
        ctx.say(outcome.stopped)
    if not outcome.kept or outcome.decision is None:
        if outcome.stopped:
            report["status"] = "budget_exhausted"
            ctx.say(f"The time budget ran out before anything passed; {ctx.unchanged} and nothing "
                    f"was committed (what was not decided is listed above, not judged).")
        else:
            ctx.say(f"Nothing passed validation; {ctx.unchanged} and nothing was committed.")
        report["validation"] = outcome.attempts[-1].result.to_json() if outcome.attempts else None
        return _emit(ctx, report, 1)
    res = outcome.decision.result
    report["validation"] = res.to_json()
    report["files"] = ctx.project.to_json(outcome.kept)
    changed = ctx.project.changed(outcome.kept)
    from gpuperf_rewrite.lint.sourceio import unified_diff

    report["diff"] = "".join(unified_diff(f.rel, f.original, new) for f, new in changed)  # written or committed
    if ctx.repo is not None and ctx.head is not None and not ctx.options.no_commit:
        return _commit(ctx, outcome, res, changed, report)
    if not ctx.project.write(outcome.kept, ctx.echo):
        return 2
    report["status"] = "written"
    why = "--no-commit" if ctx.options.no_commit else "not inside a git repository"
    shown = str(ctx.target) if len(changed) == 1 else ", ".join(f.rel for f, _ in changed)
    ctx.say(f"Wrote {shown} ({', '.join(outcome.kept)}, {res.stats.speedup:.3f}x); "  # type: ignore[union-attr]
            f"not committed ({why}).")
    for line in ctx.project.describe(outcome.kept):
        ctx.say(line)
    return _emit(ctx, report, 0)


def _report_base(ctx: _Context, outcome: Outcome) -> dict[str, Any]:
    plan = ctx.plan
    return {
        "status": "rejected", "script": ctx.rel, "rules_tried": list(plan.codes if plan else ctx.codes),
        "rules_applied": list(outcome.kept), "dropped": outcome.dropped,
        "needs_gpu": list(plan.needs_gpu) if plan else [], "not_tried": outcome.not_tried,
        "not_measurable": plan.to_json()["not_measurable"] if plan else {},
        "stopped_by_budget": bool(outcome.stopped), "device": plan.device if plan else None,
        "plan": plan.to_json() if plan else None,
        "attempts": [a.to_json() for a in outcome.attempts], "alpha": ctx.cfg.alpha,
        "launcher": ctx.cfg.launch, "commit": None, "validation": None, "diff": None,
        "files": ctx.project.to_json(), "run_time": ctx.run_time,
    }


def _extra_lines(ctx: _Context, outcome: Outcome) -> list[str]:
    """Commit-message lines for what was not judged (fixes needing a GPU, fixes not tried) and
    how the runs were launched."""
    from gpuperf_rewrite.validate.run.launchers import describe_launch

    out = [f"Every run launched with {describe_launch(ctx.cfg.launch)}"] if ctx.cfg.launcher else []
    if ctx.plan is not None and ctx.plan.needs_gpu:
        out.append(f"Not applied, {NEEDS_GPU} (validated on {ctx.plan.device}): {', '.join(ctx.plan.needs_gpu)}")
    if ctx.plan is not None and (ctx.plan.not_measurable or ctx.plan.inert):
        out.append(f"Not applied, {NOT_MEASURABLE}: {', '.join({**ctx.plan.not_measurable, **ctx.plan.inert})}")
    if outcome.not_tried:
        out.append("Not tried: " + ", ".join(outcome.not_tried))
    for rel, why in ctx.project.skipped.items():
        out.append(f"Not rewritten: {rel} ({why})")
    return out


def _commit(ctx: _Context, outcome: Outcome, res: ABResult, changed: list[tuple[ProjectFile, bytes]],
            report: dict[str, Any]) -> int:
    from gpuperf_rewrite.lint.sourceio import WriteRefused
    from gpuperf_rewrite.validate.record import commit, gitops

    decision = outcome.decision
    assert decision is not None
    applied = ctx.project.applied_in(outcome.kept)
    files = {f.rel: applied[f.rel] for f, _ in changed}
    record = note_record(ctx.rel, "apply", samples=res.samples("B"), unit=res.unit,
                         fingerprint=first_fingerprint(res.b) or res.fingerprint, config=res.config,
                         script_args=ctx.script_args, rules=list(outcome.kept), ab=res.to_json(),
                         search={"decided_by": decision.phase, "alpha": ctx.cfg.alpha,
                                 "attempts": [a.to_json() for a in outcome.attempts],
                                 "plan": ctx.plan.to_json() if ctx.plan else None,
                                 "needs_gpu": report["needs_gpu"], "not_tried": outcome.not_tried,
                                 "not_measurable": report["not_measurable"]},
                         files=[{"path": rel, "rules": list(codes)} for rel, codes in files.items()])
    message = commit.commit_message(ctx.rel, outcome.kept, decision, outcome.dropped, ctx.cfg.alpha,
                             _extra_lines(ctx, outcome), files=files if len(files) > 1 or ctx.rel not in files else None)
    try:
        done = commit.commit_files(ctx.repo, [commit.FileChange(f.rel, new, f.original) for f, new in changed],
                                   message, record, expected_head=ctx.head)
    except (gitops.GitRefused, WriteRefused) as exc:
        ctx.echo(f"refused: {exc}", err=True)
        return 2
    report.update(status="committed", commit=done.commit)
    ctx.say(f"Committed {done.commit[:12]} on {done.branch}: {', '.join(outcome.kept)} "
            f"({res.stats.speedup:.3f}x); note under {gitops.NOTES_REF}.")  # type: ignore[union-attr]
    for line in ctx.project.describe(outcome.kept):
        ctx.say(line)
    if done.exit_code:
        ctx.echo("Interrupted, after the commit had completed (commit and note are in place).", err=True)
        return _emit(ctx, report, done.exit_code)
    return _emit(ctx, report, 0)


def _emit(ctx: _Context, report: dict[str, Any], code: int) -> int:
    if ctx.workspace is not None:  # where the time went, every run of this --apply (judge/overhead.py)
        from gpuperf_rewrite.validate.judge import overhead

        ws = ctx.workspace
        report["overhead"] = overhead.summary([overhead.run_phases({"phases": p}) for p in ws.run_phases],
                                              time.monotonic() - ws.started)
        ctx.say(f"Time: {overhead.describe(report['overhead'])}")
    if ctx.options.report_sink is not None:
        ctx.options.report_sink(report)
    if ctx.options.json_out:
        ctx.echo(json.dumps(report, indent=2))
    return code
