"""The ``--apply`` page: what happened (committed, written, rejected...), each subset of fixes the
search tried and its verdict, the decision per rule, the diff, then the deciding A/B's charts."""

from __future__ import annotations

from typing import Any, Mapping

from gpuperf_rewrite.report import ab
from gpuperf_rewrite.report.page import Page, esc, key_values, missing, pre, table

Doc = Mapping[str, Any]
STATUS_WORDS = {
    "committed": "committed", "written": "written (not committed)", "rejected": "nothing passed validation",
    "budget_exhausted": "the time budget ran out before anything passed", "needs_gpu": "every fix needs a GPU",
    "too_short": "the script is too short to judge", "written_unvalidated": "written without validation",
}


def render(page: Page, doc: Doc) -> None:
    status = str(doc.get("status"))
    applied = [str(c) for c in doc.get("rules_applied") or []]
    val = doc.get("validation") if isinstance(doc.get("validation"), Mapping) else None
    commit = str(doc.get("commit") or "")
    head = f"--apply {doc.get('script', '')}: {STATUS_WORDS.get(status, status)}"
    if applied:
        head += f": {', '.join(applied)}"
    if commit:
        head += f" as {commit[:12]}"
    if val is not None and val.get("reason"):
        head += f". Deciding A/B: {str(val.get('verdict')).upper()}: {val['reason']}"
    elif doc.get("reason"):
        head += f". {doc['reason']}"
    page.verdict(head, "good" if status in ("committed", "written") else "neutral", {
        "rules tried": str(len(doc.get("rules_tried") or [])), "rules applied": str(len(applied)),
        "A/Bs run": str(len(doc.get("attempts") or [])), "device": str(doc.get("device") or "n/a"),
    })
    page.section("attempts", "Subsets of fixes tried", _attempts(doc))
    page.section("decisions", "The decision for each rule", _decisions(doc, applied))
    diff = doc.get("diff")
    page.section("diff", "The diff " + ("committed" if commit else "written" if status == "written" else ""),
                 pre(str(diff), "diff-text") if diff else missing("No diff: nothing was written or committed."))
    run_time = doc.get("run_time")
    if isinstance(run_time, Mapping) and run_time.get("observed"):
        page.section("run-time", "What the profile run saw (run-time findings)", _run_time(run_time))
    if isinstance(doc.get("plan"), Mapping):
        page.section("plan", "The plan (from one profile run of the original)", key_values(doc["plan"], "plan-table"))
    if val is not None:
        ab.sections(page, val, prefix="")


def _run_time(run_time: Mapping[str, Any]) -> str:
    """The run's findings, the config files they were written into, what the run ruled out."""
    rows = []
    for f in run_time.get("findings") or []:
        if not isinstance(f, Mapping):
            continue
        cfg = f.get("config") if isinstance(f.get("config"), Mapping) else None
        rows.append((f"{f.get('path')}:{f.get('line')}", str(f.get("code")), str(f.get("message")),
                     f"{cfg.get('key')} in {cfg.get('file')}" if cfg else ""))
    out = table(("where", "rule", "seen at run time", "config"), rows, "run-time-findings") if rows else \
        missing("The run found nothing the lint had not.")
    files = [str(f) for f in run_time.get("config_files") or []]
    if files:
        out += f'<p class="note">Config files made candidates: {esc(", ".join(files))}</p>'
    ruled = run_time.get("ruled_out") if isinstance(run_time.get("ruled_out"), Mapping) else {}
    if ruled:
        out += table(("rule", "ruled out by the run"), ((str(c), str(why)) for c, why in ruled.items()), "run-time-ruled-out")
    return out


def _attempts(doc: Doc) -> str:
    attempts = [a for a in doc.get("attempts") or [] if isinstance(a, Mapping)]
    if not attempts:
        return missing("No A/B was run.")
    return table(("#", "rules", "phase", "alpha", "verdict", "reason"),
                 ((str(i), ", ".join(map(str, a.get("rules") or [])), a.get("phase", ""), a.get("alpha", ""),
                   a.get("verdict", ""), a.get("reason", "")) for i, a in enumerate(attempts, 1)), "attempts-table")


def _decisions(doc: Doc, applied: list[str]) -> str:
    rows = [(c, "applied", "") for c in applied]
    for key, word in (("dropped", "dropped"), ("not_tried", "not decided")):
        got = doc.get(key)
        rows += [(str(c), word, str(why)) for c, why in (got.items() if isinstance(got, Mapping) else [])]
    rows += [(str(c), "needs a GPU", "gains only on CUDA: not tried here") for c in doc.get("needs_gpu") or []]
    done = {r[0] for r in rows}
    rows += [(str(c), "not applied", "") for c in doc.get("rules_tried") or [] if str(c) not in done]
    return table(("rule", "decision", "why"), rows, "decisions-table") if rows else missing("No rule was tried.")
