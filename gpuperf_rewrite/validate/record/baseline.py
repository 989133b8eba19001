"""``baseline`` (measure HEAD's script, store the record in HEAD's note) and ``regress`` (measure
the working tree's script against the nearest ancestor with a comparable record)."""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from gpuperf_rewrite.validate.judge.metric import AUTO, CPU, WALL, Load
from gpuperf_rewrite.validate.judge.pairdecision import UNDECIDED, brief, compound_decision, paired_decision
from gpuperf_rewrite.validate.run.config import ABConfig
from gpuperf_rewrite.validate.record.notes import check_notes_ref, note_record
from gpuperf_rewrite.validate.record.sidebyside import REMEASURED
from gpuperf_rewrite.validate.judge.records import common_unit, first_fingerprint, values
from gpuperf_rewrite.validate.run.runs import Runner, ScriptVersion

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.judge.abtest import Progress
    from gpuperf_rewrite.validate.judge.metric import MetricPlan

Echo = Callable[..., None]


Warn = Callable[[str], None]


def _echo(message: str = "", err: bool = False) -> None:
    print(message, file=sys.stderr if err else sys.stdout, flush=True)


def _warn(message: str) -> None:
    _echo(f"warning: {message}", err=True)


def once(warn: Warn) -> Warn:
    """``warn`` that says each message once (the notes are read more than once per command)."""
    seen: set[str] = set()

    def say(message: str) -> None:
        if message not in seen:
            seen.add(message)
            warn(message)

    return say


class BaselineError(Exception):
    """No measurement or no comparable baseline: exit 2."""


def repo_and_rel(script: str) -> tuple[Any, str]:
    from gpuperf_rewrite.validate.record import gitops

    repo = gitops.find_repo(script)
    if repo is None:
        raise BaselineError(f"{script} is not inside a git repository (notes live in git)")
    rel = gitops.relpath(repo, script)
    if gitops.head_sha(repo) is None:
        raise BaselineError("the repository has no commits yet")
    return repo, rel


def record_baseline(script: str, script_args: Sequence[str] = (), *, config: ABConfig | None = None,
                    runner: Runner | None = None, progress: Progress | None = None, echo: Echo = _echo,
                    module: tuple[str, Path] | None = None) -> dict[str, Any]:
    """Measure the script as committed at HEAD and store the record in HEAD's note. With ``module``
    (name, sys.path root), ``script`` is that module's file and runs as ``python -m name``."""
    from gpuperf_rewrite.validate.record import gitops
    from gpuperf_rewrite.validate.judge.abtest import default_runner, measure
    from gpuperf_rewrite.validate.run.profiling import prestart
    from gpuperf_rewrite.validate.run.workspace import Workspace

    cfg = config or ABConfig()
    if runner is None:  # the runs' warm interpreter imports torch while git is read
        prestart(script, launcher=cfg.launcher)
    repo, rel = repo_and_rel(script)
    gitops.check_identity(repo)  # the note is a commit: know who writes it before measuring
    check_notes_ref(repo)
    head = gitops.head_sha(repo)
    try:  # the exact bytes: GitPython would strip the final newline
        committed = repo.git.show(f"{head}:{rel}", stdout_as_string=False, strip_newline_in_stdout=False)
    except Exception as exc:
        raise BaselineError(f"{rel} is not committed at HEAD; commit it first") from exc
    target = Path(script)
    if target.read_bytes() != committed:  # measure HEAD's version, not the edited working copy
        echo(f"note: {rel} differs from HEAD; measuring the committed version", err=True)
    with Workspace(prefix="gpuperf-baseline-") as ws:  # runs in a scratch mirror of the checkout
        runs = measure(ws.add(ScriptVersion(target, committed, module)), script_args, config=cfg,
                       runner=ws.runner(runner or default_runner()), progress=progress, side="A")
    unit = common_unit(runs)
    rec = note_record(rel, "baseline", samples=values(runs, unit), unit=unit,
                      fingerprint=first_fingerprint(runs), config=cfg, script_args=script_args,
                      runs=[r.to_json() for r in runs], start=start_path(runs))
    rec["commit"] = head
    gitops.store_note(repo, head, rec)
    return rec


def start_path(runs: Sequence[Any]) -> str:
    """How the runs were started: "fork" (from the warm interpreter), "fresh" or "mixed". A
    tiny, Python-bound step can measure ~10% slower forked (docs/benchmarks.md), so regress
    measures the way its baseline was measured."""
    paths = {(r.phases or {}).get("start") or "fresh" for r in runs}
    return paths.pop() if len(paths) == 1 else "mixed"


def nearest_comparable(repo: Any, rel: str, cfg: ABConfig, script_args: Sequence[str],
                       warn: Warn = _warn) -> dict[str, Any] | None:
    """The nearest record (HEAD first, then ancestors) measured the same way, or None: what
    ``regress`` needs, found before it measures (the environment and unit are known only after)."""
    found = _nearest(repo, rel, cfg, script_args, warn)
    return found[1] if found is not None else None


def samples_of(rec: dict[str, Any]) -> list[float]:
    return [float(x) for x in rec.get("samples") or [] if x]


def same_measurement(rec: dict[str, Any], rel: str, cfg: ABConfig, script_args: Sequence[str], *,
                     launch: bool = True) -> bool:
    """Measured the same way: script path, --steps/--warmup, script arguments, at least 2 samples,
    and (unless ``launch`` is False) the same launcher, processes per node and launcher flags. A
    re-measurement that ``regress`` recorded is history, never a baseline."""
    return (rec.get("kind") != REMEASURED and rec.get("script") == rel and rec.get("steps") == cfg.steps
            and rec.get("warmup") == cfg.warmup
            and list(rec.get("args") or []) == list(script_args) and len(samples_of(rec)) >= 2
            and (not launch or same_launch(rec.get("launcher"), cfg.launch)))


def same_launch(recorded: Any, wanted: dict[str, Any] | None) -> bool:
    """A record's launcher (missing or null: plain python) is the one asked for."""
    if not recorded or not wanted:
        return not recorded and not wanted
    return (recorded.get("name"), recorded.get("nproc_per_node"), list(recorded.get("args") or [])) == (
        wanted["name"], wanted["nproc_per_node"], list(wanted["args"]))


def comparable(rec: dict[str, Any], rel: str, env_hash: str | None, cfg: ABConfig,
               script_args: Sequence[str], unit: str) -> bool:
    """Same measurement, same environment fingerprint and the same unit (samples/s is never
    compared with steps/s)."""
    fp = rec.get("fingerprint") or {}
    return (same_measurement(rec, rel, cfg, script_args) and env_hash is not None
            and fp.get("env_hash") == env_hash and rec.get("unit") == unit)


def find_baseline(repo: Any, rel: str, env_hash: str | None, cfg: ABConfig, script_args: Sequence[str],
                  unit: str, warn: Warn = _warn) -> tuple[Any, dict[str, Any]] | None:
    from gpuperf_rewrite.validate.record.gitops import latest_by_key
    from gpuperf_rewrite.validate.record.notes import ancestors_with_notes

    for commit, records in ancestors_with_notes(repo, warn=warn):
        for rec in latest_by_key(records).values():
            if comparable(rec, rel, env_hash, cfg, script_args, unit):
                return commit, rec
    return None


def has_comparable_baseline(repo: Any, rel: str, cfg: ABConfig, script_args: Sequence[str],
                            warn: Warn = _warn) -> bool:
    """Whether HEAD or an ancestor has a note measured the same way (:func:`nearest_comparable`)."""
    return nearest_comparable(repo, rel, cfg, script_args, warn) is not None


def _refuse_other_launch(repo: Any, rel: str, cfg: ABConfig, script_args: Sequence[str], warn: Warn) -> None:
    """A baseline measured the same way but under another launcher (or none, or another process
    count) is no baseline for this run: say which, so the user can compare like with like."""
    from gpuperf_rewrite.validate.run.launchers import describe_launch
    from gpuperf_rewrite.validate.record.notes import ancestors_with_notes

    for commit, records in ancestors_with_notes(repo, warn=warn):
        for rec in records:
            if same_measurement(rec, rel, cfg, script_args, launch=False):
                raise BaselineError(
                    f"no comparable baseline for {rel}: the baseline on {commit.hexsha[:12]} was measured "
                    f"with {describe_launch(rec.get('launcher'))}, this run with {describe_launch(cfg.launch)}; "
                    f"per-step times under another launcher or process count are not comparable. Run regress "
                    f"as the baseline was, or record a baseline this way. Nothing was measured.")


@contextlib.contextmanager
def _fresh_interpreters(on: bool) -> Iterator[None]:
    """Every run in a fresh interpreter while ``on`` (the warm interpreter's switch, run/warmstart.py)."""
    from gpuperf_rewrite.validate.run.warmstart import FORK_ENV

    old = os.environ.get(FORK_ENV)
    if on:
        os.environ[FORK_ENV] = "0"
    try:
        yield
    finally:
        if on:
            if old is None:
                os.environ.pop(FORK_ENV, None)
            else:
                os.environ[FORK_ENV] = old


def _no_baseline(rel: str, why: str) -> BaselineError:
    return BaselineError(
        f"no comparable baseline for {rel}: no ancestor commit has a gpuperf note for this script "
        f"with {why}. Record one with `gpuperf-rewrite baseline {rel}`.")


def check_regression(script: str, script_args: Sequence[str] = (), *, threshold: float = 0.05,
                     config: ABConfig | None = None, runner: Runner | None = None, progress: Progress | None = None,
                     module: tuple[str, Path] | None = None, warn: Warn = _warn, metric: str = AUTO,
                     load: Load | None = None) -> dict[str, Any]:
    """Compare the working tree's script with the nearest ancestor commit that has a comparable
    baseline note (with ``module``, run as ``python -m``, as :func:`record_baseline`).

    Side by side when that commit can be laid out here: its version and the working tree's are
    measured alternately in this invocation (record/sidebyside.py), and the re-measurement is
    added to the commit's note as a ``remeasured`` record (never a baseline). Otherwise the
    working tree is compared with the stored samples, across time and machine state, and the
    threshold is widened by the stored samples' noise. Corrupted note records are skipped, each
    with a warning naming its commit.

    ``metric`` (``auto``, ``wall``, ``cpu``; judge/metric.py): side by side on a busy machine
    (``load``: default the 1-minute load average now) or with ``cpu``, both sides run with
    ``OMP_WAIT_POLICY=PASSIVE`` (unless the user set it) and a CPU-only run is decided on CPU
    time per step with wall time beside it. The stored-note fallback is always wall time."""
    from dataclasses import replace

    from gpuperf_rewrite.validate.judge.abtest import default_runner
    from gpuperf_rewrite.validate.judge.metric import decided_on, plan_metric
    from gpuperf_rewrite.validate.judge.stats import paired_undecidable_reason
    from gpuperf_rewrite.validate.record.sidebyside import baseline_checkout, measure_side_by_side, settles
    from gpuperf_rewrite.validate.run.workspace import Workspace

    cfg = config or ABConfig()
    warn = once(warn)
    plan = plan_metric(metric, load)  # the load before this command adds its own runs
    repo, rel = repo_and_rel(script)
    check_notes_ref(repo)
    nearest = _nearest(repo, rel, cfg, script_args, warn)  # before spending time on measuring
    if nearest is None:
        _refuse_other_launch(repo, rel, cfg, script_args, warn)
        raise _no_baseline(rel, "the same --steps/--warmup and script arguments; nothing was measured")
    commit, note = nearest
    # Measured the way the baseline was: records older than forked runs say nothing (they ran fresh).
    fresh = note.get("start", "fresh") != "fork"
    checkout = baseline_checkout(repo, commit.hexsha, rel, Path(script), module)
    failed = checkout.why_not or None
    base_runs: list[Any] = []
    with Workspace(prefix="gpuperf-regress-") as ws, _fresh_interpreters(fresh):  # like the baseline
        run = ws.runner(runner or default_runner())
        if checkout.version is not None:  # first: the mirror's plan makes the companions' directories real
            unsettled = paired_undecidable_reason(cfg)
            halved = paired_undecidable_reason(replace(cfg, alpha=cfg.alpha / 2)) if plan.wants_cpu else None
            if halved and plan.asked == CPU:
                unsettled = f"{halved} (--metric cpu: CPU time and wall time each get half of alpha)"
            elif halved:  # auto on a busy machine: too few pairs for two intervals; decide on wall time
                plan = plan.on_wall(f"--max-runs {cfg.max_runs} pairs are too few for CPU time and wall time "
                                    f"at half of alpha each")
            if unsettled:
                raise BaselineError(f"{unsettled}. Nothing was measured.")
            a = ws.add(checkout.version)
            b = ws.add(ScriptVersion.read(script, module))
            on = (lambda measured: decided_on(plan, measured, cfg.launcher is not None)[0])
            base_runs, runs, failed = measure_side_by_side(str(a), str(b), script_args, cfg, run, progress, name=rel,
                                                           settled=settles(cfg, threshold, on), env=plan.run_env())
        else:
            from gpuperf_rewrite.validate.judge.abtest import measure

            target = ws.add(ScriptVersion.read(script, module)) if module is not None else script
            runs = measure(target, script_args, config=cfg, runner=run, progress=progress)
    if failed is None:
        return _side_by_side(repo, rel, commit, note, checkout, base_runs, runs, cfg, script_args, threshold, warn,
                             plan)
    if plan.asked == CPU:
        warn("--metric cpu needs both versions measured here; compared with the stored note on wall time")
    res = _against_stored(repo, rel, runs, cfg, script_args, threshold, failed, warn)
    passive = checkout.version is not None and plan.passive  # the working tree's runs had it
    res.update(metric=WALL, metric_asked=plan.asked, load=plan.to_json(),
               omp_wait_policy=plan.policy() if passive or plan.user_policy else None,
               metric_reason=(f"wall time per step: compared with a stored note, which holds wall time only "
                              f"({plan.load.describe()})"))
    return res


def _nearest(repo: Any, rel: str, cfg: ABConfig, script_args: Sequence[str],
             warn: Warn) -> tuple[Any, dict[str, Any]] | None:
    """(commit, record) of :func:`nearest_comparable`."""
    from gpuperf_rewrite.validate.record.notes import ancestors_with_notes

    return next(((commit, rec) for commit, records in ancestors_with_notes(repo, warn=warn) for rec in records
                 if same_measurement(rec, rel, cfg, script_args)), None)


def _result(repo: Any, rel: str, commit: Any, base: list[float], current: list[float], unit: str, cfg: ABConfig,
            threshold: float, limit: float, runs: Sequence[Any], warn: Warn, paired: dict[str, Any] | None = None,
            **extra: Any) -> dict[str, Any]:
    """The verdict and the JSON document. Side by side (``paired``: :func:`paired_decision`) the
    verdict is the paired one; against a stored note it is ``ab``'s ``slower`` (both tests at
    alpha, and the 95% interval of the ratio below 1) with a drop beyond ``limit`` (the threshold
    widened by the note's noise)."""
    from gpuperf_rewrite.validate.judge.stats import compare, decide

    s = compare(base, current, resamples=cfg.bootstrap_resamples, seed=cfg.seed)  # type: ignore[arg-type]
    if paired is None:
        change = s.speedup - 1.0
        regressed: bool | None = decide(s, cfg.alpha, 1.0) == "slower" and change < -limit
        verdict = "regressed" if regressed else "ok"
        ci95, p = list(s.ci95), s.p_slower
    else:
        verdict, change, ci95, p = paired["verdict"], paired["ratio"] - 1.0, paired["ci95"], paired["p_slower"]
        regressed = None if verdict == UNDECIDED else verdict == "regressed"
    return {
        "regressed": regressed, "verdict": verdict, "baseline_commit": commit.hexsha,
        "baseline_summary": commit.summary, "script": rel, "unit": unit, "baseline_median": s.median_a,
        "current_median": s.median_b, "change": change, "ci95": ci95, "p_value": p,
        **({"paired": paired} if paired is not None else {}),
        "threshold": threshold, "effective_threshold": limit, "alpha": cfg.alpha, "baseline": base,
        "current": current, "fingerprint": first_fingerprint(runs) or {}, "launcher": cfg.launch,
        "stats": asdict(s), "start": start_path(runs),
        "runs": [r.to_json() for r in runs],  # per-step times, losses and memory for --html
        **extra,
        "history": history(repo, rel, warn),  # the recorded medians over commits, nearest first
    }


def _side_by_side(repo: Any, rel: str, commit: Any, note: dict[str, Any], checkout: Any, base_runs: list[Any],
                  runs: list[Any], cfg: ABConfig, script_args: Sequence[str], threshold: float,
                  warn: Warn, plan: MetricPlan) -> dict[str, Any]:
    from gpuperf_rewrite.validate.judge.metric import CPU_UNIT, cpu_values, decided_on

    unit = common_unit(base_runs + runs)  # one unit for both sides (steps/s when either lacks a batch size)
    recorded = _record_remeasurement(repo, rel, commit.hexsha, note, base_runs, cfg, script_args, warn)
    base, current = values(base_runs, unit), values(runs, unit)
    metric, why = decided_on(plan, base_runs + runs, cfg.launcher is not None)
    extra: dict[str, Any] = {}
    if metric == CPU:
        base_cpu, current_cpu = cpu_values(base_runs) or [], cpu_values(runs) or []
        paired = compound_decision(base, current, base_cpu, current_cpu, cfg, threshold)
        wall = paired["wall"]
        extra = {"cpu_unit": CPU_UNIT, "baseline_cpu": base_cpu, "current_cpu": current_cpu,
                 "cpu_result": brief(paired["cpu"]), "decided_by": paired["decided_by"]}
    else:
        paired = wall = paired_decision(base, current, cfg, threshold)
    return _result(repo, rel, commit, base, current, unit, cfg, threshold,
                   threshold, runs, warn, paired=paired, metric=metric, metric_asked=plan.asked,
                   metric_reason=why, load=plan.to_json(), omp_wait_policy=plan.policy(),
                   wall_result=brief(wall), **extra,
                   comparison="side_by_side", baseline_start=start_path(base_runs),
                   baseline_note_start=note.get("start"), baseline_checkout=checkout.to_json(),
                   baseline_runs=[r.to_json() for r in base_runs], remeasurement_recorded=recorded)


def _against_stored(repo: Any, rel: str, runs: list[Any], cfg: ABConfig, script_args: Sequence[str],
                    threshold: float, why: str, warn: Warn) -> dict[str, Any]:
    """The fallback: the working tree's runs against the stored samples of the nearest record of
    the same environment and unit, with the threshold widened by those samples' spread."""
    from gpuperf_rewrite.validate.judge.stats import cv

    fp = first_fingerprint(runs) or {}
    unit = common_unit(runs)
    found = find_baseline(repo, rel, fp.get("env_hash"), cfg, script_args, unit, warn)
    if found is None:
        raise _no_baseline(rel, f"the same environment fingerprint, --steps/--warmup, script arguments "
                                f"and unit ({unit}) (the baseline commit could not be measured again: {why})")
    commit, rec = found
    base = samples_of(rec)
    noise = cv(base)
    warn(f"compared with the note stored on {commit.hexsha[:12]} ({rec.get('recorded_at') or 'undated'}), not "
         f"measured side by side ({why}): across time and machine state, so the threshold is widened by "
         f"the note's noise ({noise:.1%})")
    return _result(repo, rel, commit, base, values(runs, unit), unit, cfg, threshold, threshold + noise, runs,
                   warn, comparison="stored_note", stored_reason=why, baseline_noise=noise,
                   baseline_recorded_at=rec.get("recorded_at"), baseline_start=rec.get("start"))


def _record_remeasurement(repo: Any, rel: str, commit: str, note: dict[str, Any], runs: list[Any],
                          cfg: ABConfig, script_args: Sequence[str], warn: Warn) -> bool:
    """Add the baseline commit's re-measurement to its note (kind ``remeasured``, its own key:
    the baseline record stays as it was). A note that cannot be written is a warning, not a
    failed check."""
    from gpuperf_rewrite.validate.record import gitops
    from gpuperf_rewrite.validate.record.notes import launch_key

    unit = common_unit(runs)
    fp = first_fingerprint(runs)
    rec = note_record(rel, REMEASURED, samples=values(runs, unit), unit=unit, fingerprint=fp, config=cfg,
                      script_args=script_args, runs=[r.to_json() for r in runs], start=start_path(runs),
                      commit=commit, beside=gitops.head_sha(repo), baseline_key=note.get("key"))
    rec["key"] = gitops.record_key(rel, dict(fp or {})) + launch_key(cfg.launch) + "#" + REMEASURED
    try:
        gitops.check_identity(repo)
        gitops.store_note(repo, commit, rec)
    except Exception as exc:  # noqa: BLE001 - the verdict stands without the record
        warn(f"the re-measurement of {commit[:12]} was not recorded in {gitops.NOTES_REF}: {exc}")
        return False
    return True


def describe_regression(res: dict[str, Any]) -> str:
    """``regress``'s one-line verdict (the text report and the HTML page say it the same way)."""
    verdict = res.get("verdict") or ("regressed" if res["regressed"] else "ok")
    verb = {"regressed": "REGRESSION", UNDECIDED: "CANNOT JUDGE"}.get(verdict, "ok")
    stored = res.get("comparison") == "stored_note"
    how = ("stored note, across time and machine state" if stored
           else "measured side by side" if res.get("comparison") == "side_by_side" else "")
    limit = res.get("effective_threshold", res["threshold"])
    bar = (f"threshold -{res['threshold']:.0%} widened by the note's noise to -{limit:.1%}"
           if stored else f"threshold -{res['threshold']:.0%}")
    paired = res.get("paired")
    on_cpu = res.get("metric") == "cpu"
    if paired:
        ci = paired.get("decision_ci")
        where = (f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "none yet")
        ratio = (f"ratio per pair {1 + res['change']:.3f} over {paired['pairs']} pairs, interval {where} "
                 f"(each end at {paired['level']:.2g}) vs {1 - res['threshold']:.3f}")
        if on_cpu and paired.get("cpu") and paired.get("wall"):
            ratio = "; ".join(f"{name} time: ratio per pair {p['ratio']:.3f}, interval {_interval(p)}"
                              for name, p in (("CPU", paired["cpu"]), ("wall", paired["wall"])))
            ratio += (f", over {paired['pairs']} pairs (each end at {paired['level']:.2g}) vs "
                      f"{1 - res['threshold']:.3f}")
    else:
        ci = res.get("ci95")
        ratio = (f"95% CI of ratio {ci[0]:.3f}-{ci[1]:.3f}, p={res['p_value']:.3g}" if ci
                 else f"p={res['p_value']:.3g}")
    text = (f"{verb}: {res['script']} {res['change']:+.1%} vs baseline {res['baseline_commit'][:12]} "
            f"({res['baseline_summary'][:60]}){f' [{how}]' if how else ''}: median {res['current_median']:,.2f} vs "
            f"{res['baseline_median']:,.2f} {res['unit']}, {ratio} ({bar}, alpha {res['alpha']:g})")
    load = res.get("load") or {}
    if on_cpu or load.get("busy") or res.get("metric_asked") not in (None, AUTO):
        text += f". Decided on {res.get('metric_reason')}"
    if res.get("decided_by") == WALL and (res.get("cpu_result") or {}).get("verdict") != "regressed":
        text += "; the regression shows in wall time only (CPU time per step did not rise beyond the threshold)"
    if verdict == UNDECIDED:
        need = (paired or {}).get("pairs_needed")
        more = f" (about {need} pairs would settle it at this noise)" if need else ""
        text += (f"; the interval still contains the threshold after --max-runs: neither a pass nor a "
                 f"regression. Raise --max-runs{more}, use more --steps, a quieter machine, or a "
                 f"threshold this noise allows")
    return text


def _interval(paired: dict[str, Any]) -> str:
    ci = paired.get("decision_ci")
    return f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "none yet"


def describe_baseline(rec: dict[str, Any]) -> str:
    """``baseline``'s one-line summary of the record it stored."""
    return (f"Baseline for {rec['script']} on {rec['commit'][:12]}: median {rec['median']:,.2f} "
            f"{rec['unit']} over {len(rec['samples'])} runs (stored in refs/notes/gpuperf).")


def history(repo: Any, rel: str, warn: Warn = _warn) -> list[dict[str, Any]]:
    """One row per noted commit and environment, nearest first (corrupted records skipped with a warning)."""
    from gpuperf_rewrite.validate.record.gitops import latest_by_key
    from gpuperf_rewrite.validate.record.notes import ancestors_with_notes

    check_notes_ref(repo)
    rows = []
    for commit, records in ancestors_with_notes(repo, warn=warn):
        for rec in latest_by_key(records).values():
            if rec.get("script") != rel or not samples_of(rec):
                continue
            samples = samples_of(rec)
            rows.append({"commit": commit.hexsha, "date": commit.committed_datetime.isoformat(),
                         "summary": commit.summary, "kind": rec.get("kind"), "median": statistics.median(samples),
                         "runs": len(samples), "unit": rec.get("unit"),
                         "env": str((rec.get("fingerprint") or {}).get("env_hash", ""))[:8],
                         "device": (rec.get("fingerprint") or {}).get("device_name"),
                         "launcher": rec.get("launcher")})
    return rows


def plot_history(rows: list[dict[str, Any]], path: str, echo: Echo = _echo) -> None:
    """A PNG of the median per commit, one line per environment (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        echo("matplotlib is not installed; no plot written (pip install matplotlib)", err=True)
        return
    ordered = list(reversed(rows))
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for env in sorted({r["env"] for r in ordered}):
        pts = [(i, r["median"]) for i, r in enumerate(ordered) if r["env"] == env]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"env {env}")
    ax.set_xticks(range(len(ordered)), [r["commit"][:7] for r in ordered], rotation=45, fontsize=7)
    ax.set_ylabel(ordered[0]["unit"] if ordered else "")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    echo(f"Wrote {path}", err=True)
