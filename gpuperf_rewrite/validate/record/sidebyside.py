"""``regress`` side by side: the baseline commit measured again, interleaved with the working
tree, in one invocation (the way asv's ``continuous`` and pyperf's ``compare_to`` on CI do).

A number stored on a quiet machine and one taken later under other load cannot tell a slower
commit from a busier machine (issue 36: an unchanged script measured -41% beside four busy
processes). Runs of both versions, alternated in one invocation, share the machine's state:
same launcher, steps, warmup, start path and pair order as ``ab``
(:func:`~gpuperf_rewrite.validate.judge.abtest.pair_orders`). The two runs of a pair, seconds
apart, also share the load of that moment, so they are compared pair by pair, and pairs are
added until the comparison is settled (:func:`settles`, judge/stats.py ``compare_paired``).

The baseline version is laid out in the same scratch mirror of the checkout that ``--apply``
runs use (``run/workspace.py``): the script's bytes at the baseline commit, and every other
tracked file that differs between that commit and the working tree as a companion with its bytes
at the commit. Untracked files (data, checkpoints) are shared by both sides, as in the checkout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from gpuperf_rewrite.validate.run.runs import ScriptVersion

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.judge.abtest import Progress
    from gpuperf_rewrite.validate.judge.records import RunRecord
    from gpuperf_rewrite.validate.run.config import ABConfig
    from gpuperf_rewrite.validate.run.runs import Runner

REMEASURED = "remeasured"  # the kind of a note record that re-measured a baseline (never a baseline itself)
MAX_COMPANION_BYTES = 4 << 20  # a changed tracked file bigger than this is not restored (named in the JSON)
MAX_COMPANIONS = 500  # changed files restored at most; beyond, the baseline is compared as stored


# Asked after every pair with both sides' runs so far: True once the comparison is settled.
Settled = Callable[[list["RunRecord"], list["RunRecord"]], bool]


@dataclass
class BaselineCheckout:
    """The baseline commit's version of the script, or why it cannot be laid out."""

    commit: str
    version: ScriptVersion | None
    why_not: str = ""  # set when ``version`` is None
    restored: list[str] = field(default_factory=list)  # other files put back to the commit's bytes
    not_restored: dict[str, str] = field(default_factory=dict)  # path -> why it is as in the working tree

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "restored": self.restored, "not_restored": self.not_restored}


def baseline_checkout(repo: Any, commit: str, rel: str, script: Path,
                      module: tuple[str, Path] | None = None) -> BaselineCheckout:
    """The version of ``script`` (the repository's ``rel``) at ``commit``, with every other
    tracked file that changed since then as a companion holding the commit's bytes. ``version``
    is None when the commit's files cannot be read here (objects missing: a partial or pruned
    clone, a commit rewritten away)."""
    from gpuperf_rewrite.validate.record.gitops import _git_module

    git = _git_module()
    try:
        tree = repo.commit(commit).tree
        source = tree[rel].data_stream.read()
    except Exception as exc:  # noqa: BLE001 - any object git cannot give us: not here to check out
        return BaselineCheckout(commit, None, f"{rel} cannot be read at {commit[:12]} here "
                                              f"({type(exc).__name__}: {str(exc).strip()[:120]})")
    try:
        out = repo.git.diff("--no-renames", "--name-status", "-z", commit, "--")
    except git.GitCommandError as exc:
        return BaselineCheckout(commit, None, f"git cannot compare {commit[:12]} with the working tree "
                                              f"({str(exc.stderr).strip()[:120]})")
    fields = out.split("\0")
    changed = [(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]
    root = Path(repo.working_tree_dir)
    found = BaselineCheckout(commit, None)
    companions: list[tuple[Path, bytes]] = []
    for status, path in changed:
        if path == rel:
            continue
        if status.startswith("A"):
            found.not_restored[path] = "added since the baseline: both sides see it"
            continue
        where = root / path
        if not where.is_file() or where.is_symlink():
            found.not_restored[path] = "not in the working tree: the baseline's runs do not see it"
            continue
        try:
            blob = tree[path]
        except KeyError:
            continue
        if getattr(blob, "type", "") != "blob" or blob.mode & 0o170000 != 0o100000:
            found.not_restored[path] = "not a regular file at the baseline"
            continue
        if blob.size > MAX_COMPANION_BYTES or len(companions) >= MAX_COMPANIONS:
            found.not_restored[path] = "too big (or too many changed files) to restore: as in the working tree"
            continue
        try:
            companions.append((where, blob.data_stream.read()))
        except Exception as exc:  # noqa: BLE001 - as above
            return BaselineCheckout(commit, None, f"{path} cannot be read at {commit[:12]} here ({exc})")
        found.restored.append(path)
    found.version = ScriptVersion(script, source, module, tuple(companions))
    return found


def measure_side_by_side(baseline: str, current: str, script_args: Sequence[str], cfg: ABConfig,
                         runner: Runner, progress: Progress | None = None, *, name: str = "",
                         settled: Settled | None = None, env: Mapping[str, str] | None = None,
                         ) -> tuple[list[RunRecord], list[RunRecord], str | None]:
    """Runs of each version, alternated in pairs as ``ab`` orders them (the two runs of a pair
    share a seed): (baseline's runs, current's runs, why the baseline could not be measured or
    None). Without ``settled``, ``cfg.runs`` pairs; with it, pairs until ``settled`` (asked
    after every pair) says the comparison is settled, at most ``cfg.max_runs``. A failed baseline
    run stops its side and the current one is measured to ``cfg.runs`` alone (the caller falls
    back to the stored note); a failed or too short current run raises ABError, as a plain
    measurement does. ``env`` (None: the tool's) is every run's environment, both sides alike
    (``regress`` on a busy machine: ``OMP_WAIT_POLICY=PASSIVE``, judge/metric.py)."""
    from gpuperf_rewrite.validate.judge.abtest import ABError, ProgressEvent, pair_orders
    from gpuperf_rewrite.validate.judge.records import describe_failure, record_from_doc, too_short
    from gpuperf_rewrite.validate.run.runs import measured_run

    runs: dict[str, list[RunRecord]] = {"A": [], "B": []}
    scripts = {"A": baseline, "B": current}
    failed: str | None = None
    total, done = 2 * cfg.runs, 0
    k = 0
    most = cfg.max_runs if settled is not None else cfg.runs
    orders = iter(pair_orders(most, cfg.seed))
    while len(runs["B"]) < (most if failed is None else cfg.runs):
        if failed is None and len(runs["B"]) >= cfg.runs:  # past the plan: up to --max-runs
            total = 2 * most
        order = next(orders, ("B",)) if failed is None else ("B",)
        if failed is not None:
            total = done + cfg.runs - len(runs["B"])
        for side in order:
            done += 1
            if progress:
                progress(ProgressEvent(done, total, side, None, "start"))
            doc = runner(measured_run(scripts[side], script_args, cfg, cfg.seed + k, cwd=None, env=env))
            rec = record_from_doc(side, len(runs[side]), doc, seed=cfg.seed + k)
            runs[side].append(rec)
            if progress:
                progress(ProgressEvent(done, total, side, None, "done", rec))
            short = too_short(rec, cfg.warmup) if rec.ok else None
            why = describe_failure(rec) if not rec.ok else (f"measured too few steps: {short}" if short else None)
            if why and side == "B":
                raise ABError(f"run {rec.index + 1} of {name or current} {why}" if not short else
                              f"{name or current}: too few steps to measure, no comparison rests on it: {short}")
            if why:
                failed = f"run {rec.index + 1} of the baseline commit's version {why}"
                runs["A"].pop()
                break
        k += 1
        if failed is None and settled is not None and settled(runs["A"], runs["B"]):
            break
    return runs["A"], runs["B"], failed


def settles(cfg: ABConfig, threshold: float,
            metric: Callable[[list[RunRecord]], str] | None = None) -> Settled:
    """``regress``'s stop rule: at each look of :func:`~gpuperf_rewrite.validate.judge.stats.paired_looks`,
    settled once the paired interval of B/A lies wholly below or wholly above 1 - ``threshold``.
    When ``metric`` (asked with all runs so far) says ``cpu``: the compound rule on CPU time with
    wall time beside it, each at half of alpha (judge/metric.py :func:`compound_verdict`)."""
    from dataclasses import replace

    from gpuperf_rewrite.validate.judge.metric import CPU, compound_verdict, cpu_values
    from gpuperf_rewrite.validate.judge.records import common_unit, values
    from gpuperf_rewrite.validate.judge.stats import compare_paired, paired_looks, paired_verdict

    looks = paired_looks(cfg)
    half_looks = paired_looks(replace(cfg, alpha=cfg.alpha / 2))

    def settled(a: list[RunRecord], b: list[RunRecord]) -> bool:
        on_cpu = metric is not None and metric(a + b) == CPU
        at = half_looks if on_cpu else looks
        if len(a) not in at:
            return False
        unit = common_unit(a + b)
        wall = compare_paired(values(a, unit), values(b, unit), at[len(a)])
        if not on_cpu:
            return paired_verdict(wall, 1.0 - threshold) is not None
        cpu = compare_paired(cpu_values(a) or [], cpu_values(b) or [], at[len(a)])
        return compound_verdict(cpu, wall, 1.0 - threshold) is not None

    return settled
