"""The PR bot against a fake GitHub API (a real HTTP server on 127.0.0.1, tests/helpers/fakegithub.py):
the exact review it posts, its suggestions, update-not-duplicate on re-runs, validation, and
bad input (missing token, closed PR, deleted files, 403/422/5xx) failing clearly with nothing
half-posted and the token never printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuperf_rewrite.cli import cli
from gpuperf_rewrite.integrations.github import bot as prbot
from gpuperf_rewrite.integrations.github.diff import parse_diff
from gpuperf_rewrite.integrations.github.report import Measurement
from gpuperf_rewrite.integrations.github.review import SUMMARY_MARKER, UPDATE_MARKER, fix_marker
from tests.helpers.fakegithub import FakeGitHub
from tests.helpers.prbot import BASE_TRAIN, GP202_LINE, SLOW_TRAIN, TOKEN, actions_env, commit, git, make_repo
from tests.helpers.paths import ROOT


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    return make_repo(tmp_path, monkeypatch)


@pytest.fixture
def gh(repo, monkeypatch):
    head, base = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "main")
    with FakeGitHub(head_sha=head, base_sha=base) as fake:
        actions_env(monkeypatch, repo, fake)
        yield fake


def _bot(*args: str):
    res = CliRunner().invoke(cli, ["pr-bot", "--write-interval", "0", "--retry-backoff", "0", *args])
    assert TOKEN not in res.output
    return res


def _gp202_comment(head_note: str = "") -> dict:
    return {
        "path": "train.py",
        "line": 7,
        "side": "RIGHT",
        "body": "\n".join([
            next(iter(_keys("GP202"))),
            "**GP202** `dataloader-pin-memory`: DataLoader does not pin host memory: every host-to-GPU copy "
            "goes through a staging buffer and cannot overlap compute; set pin_memory",
            "",
            "Fix (safe): set pin_memory=torch.cuda.is_available(). Nothing was measured (no `--validate`): "
            "this is a safe fix, behaviour is unchanged.",
            "",
            "```suggestion",
            GP202_LINE,
            "```",
        ]),
    }


def _keys(code: str) -> list[str]:
    from gpuperf_rewrite.lint.engine import RuleSet
    from gpuperf_rewrite.lint.patches import finding_patches
    from gpuperf_rewrite.lint.registry import all_rules

    return [fix_marker(p.key) for p in finding_patches(SLOW_TRAIN.encode(), "train.py",
                                                            RuleSet(tuple(all_rules())), "unsafe") if p.code == code]


# ------------------------------------------------------------------------------------------------
def test_first_run_posts_one_review_with_a_suggestion(gh):
    res = _bot()
    assert res.exit_code == 0, res.output
    assert gh.writes() == [("POST", "/repos/octo/proj/pulls/7/reviews", gh.writes()[0][2])]
    body = gh.writes()[0][2]
    assert body["commit_id"] == gh.pr["head"] and body["event"] == "COMMENT"
    assert body["comments"] == [_gp202_comment()]
    summary = body["body"]
    assert summary.startswith(SUMMARY_MARKER)
    assert "| rule | location | finding | fix |" in summary
    assert "| GP202 `dataloader-pin-memory` | `train.py:7` |" in summary and "suggested below |" in summary
    assert "| GP201 `dataloader-workers` | `train.py:7` |" in summary
    assert "| GP101 `sync-in-loop` | `train.py:14` |" in summary
    assert "unsafe fix: proposed only with `--validate`" in summary
    assert "Nothing was measured" in summary
    assert "helper.py" not in summary  # deleted in the PR: nothing to lint, no error
    # Authenticated with the token from the environment on every request.
    assert set(gh.auth_headers) == {f"token {TOKEN}"} or set(gh.auth_headers) == {f"Bearer {TOKEN}"}


def test_rerun_on_the_same_head_updates_in_place(gh):
    assert _bot().exit_code == 0
    gh.requests.clear()
    res = _bot()
    assert res.exit_code == 0, res.output
    (review,) = gh.reviews
    assert gh.writes() == [("PUT", f"/repos/octo/proj/pulls/7/reviews/{review['id']}", {"body": review["body"]})]
    assert len(gh.comments) == 1
    assert "kept 1 earlier suggestion" in res.output


def test_new_push_edits_summary_adds_new_and_deletes_stale(gh, repo, monkeypatch):
    assert _bot().exit_code == 0
    (first,) = gh.reviews
    (old_comment,) = gh.comments
    # The author accepts the suggestion and adds a second, unpinned loader.
    second = SLOW_TRAIN.replace(
        "    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)\n",
        GP202_LINE + "\n")
    second += "val_loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))\n"
    head2 = commit(repo, {"train.py": second}, "accept suggestion, add validation loader")
    gh.push(head2, moved={old_comment["id"]: None})  # the commented line changed: outdated
    actions_env(monkeypatch, repo, gh)
    gh.requests.clear()

    res = _bot()
    assert res.exit_code == 0, res.output
    writes = gh.writes()
    assert [(m, p) for m, p, _ in writes] == [
        ("POST", "/repos/octo/proj/pulls/7/reviews"),
        ("PUT", f"/repos/octo/proj/pulls/7/reviews/{first['id']}"),
        ("DELETE", f"/repos/octo/proj/pulls/comments/{old_comment['id']}"),
    ]
    post = writes[0][2]
    assert post["body"].startswith(UPDATE_MARKER) and SUMMARY_MARKER not in post["body"]
    (new_comment,) = post["comments"]
    assert new_comment["path"] == "train.py" and new_comment["line"] == 16 and new_comment["side"] == "RIGHT"
    assert "val_loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), " \
           "pin_memory=torch.cuda.is_available())\n```" in new_comment["body"]
    assert head2[:12] in writes[1][2]["body"]
    # Still exactly one summary review on the PR, and one live suggestion.
    assert sum(SUMMARY_MARKER in r["body"] for r in gh.reviews) == 1
    assert [c["line"] for c in gh.comments] == [16]


def test_validated_run_proposes_only_passing_fixes_with_measurements(gh, repo):
    seen = {}

    def fake_validator(candidates):
        seen.setdefault("calls", []).append([(c.path, c.patch.code, c.original) for c in candidates])
        out = []
        for c in candidates:
            if c.patch.code == "GP201":
                out.append(Measurement(False, 1.01, 0.97, 1.05, "no_difference: not significant"))
            elif c.patch.code == "GP101":
                out.append(Measurement(True, 1.31, 1.18, 1.44, "faster: p=0.001"))
            else:
                out.append(None)  # GP202: not validated, so not proposed
        return out

    report, plan, result = prbot.run(repo, os.environ, validator=fake_validator, backoff=0, write_interval=0,
                                     echo=lambda s: None, log=lambda s: None)
    # One call for the whole review, with every candidate fix.
    assert seen == {"calls": [[("train.py", code, SLOW_TRAIN) for code in ("GP201", "GP202", "GP101")]]}
    assert {r.diag.code: r.status for r in report.rows} == {"GP201": "rejected", "GP202": "not-validated",
                                                            "GP101": "proposed"}
    (comment,) = gh.writes()[0][2]["comments"]
    # The GP101 fix spans two lines: a multi-line suggestion.
    assert (comment["start_line"], comment["start_side"], comment["line"], comment["side"]) == (14, "RIGHT", 15, "RIGHT")
    assert comment["body"].endswith("```suggestion\n        total += loss.detach()\n"
                                    "    print(\"mean loss\", float(total) / len(loader))\n```")
    assert "Measured on this PR: **1.31x (95% CI 1.18x–1.44x)** faster" in comment["body"]
    summary = gh.writes()[0][2]["body"]
    assert "- GP101 at `train.py:14`: 1.31x (95% CI 1.18x–1.44x), passed" in summary
    assert "- GP201 at `train.py:7`: 1.01x (95% CI 0.97x–1.05x), rejected (no_difference: not significant)" in summary
    assert "Nothing was measured" not in summary
    assert result is not None and result.created_review is not None


def test_dry_run_prints_the_review_and_contacts_nobody(gh, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")
    res = _bot("--dry-run")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["comments"] == [_gp202_comment()] and doc["event"] == "COMMENT"
    assert gh.requests == []


def test_fail_on_findings_exits_1_after_posting(gh):
    res = _bot("--fail-on-findings")
    assert res.exit_code == 1 and len(gh.reviews) == 1


def test_clean_pr_posts_nothing(gh, repo, monkeypatch):
    head = commit(repo, {"train.py": BASE_TRAIN + "print('bye')\n"}, "clean change")
    gh.push(head)
    actions_env(monkeypatch, repo, gh)
    res = _bot()
    assert res.exit_code == 0 and gh.writes() == []
    assert "nothing posted" in res.output


# --- bad input ---------------------------------------------------------------------------------
def test_missing_token(gh, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")
    res = _bot()
    assert res.exit_code == 2
    assert "GITHUB_TOKEN is not set" in res.output
    assert gh.requests == []


def test_closed_pr(gh):
    gh.pr["state"] = "closed"
    res = _bot()
    assert res.exit_code == 2 and "pull request #7 is closed; nothing posted" in res.output
    assert gh.writes() == []


def test_forbidden_403_is_explained_and_nothing_posted(gh):
    gh.fail("POST", r".*/reviews", 403)
    res = _bot()
    assert res.exit_code == 2
    assert "GitHub API error 403: Resource not accessible by integration" in res.output
    assert "pull-requests: write" in res.output
    assert gh.reviews == [] and gh.comments == []


def test_unprocessable_422_is_explained_and_nothing_posted(gh):
    gh.fail("POST", r".*/reviews", 422)
    res = _bot()
    assert res.exit_code == 2
    assert "GitHub API error 422: Unprocessable Entity (Line could not be resolved)" in res.output
    assert gh.reviews == [] and gh.comments == []


def test_transient_5xx_on_reads_is_retried(gh):
    gh.fail("GET", r"/repos/octo/proj/pulls/7", 502, 503)
    res = _bot()
    assert res.exit_code == 0, res.output
    assert [p for m, p, _ in gh.requests if m == "GET"].count("/repos/octo/proj/pulls/7") == 3
    assert len(gh.reviews) == 1


def test_5xx_on_post_is_retried_without_duplicating(gh):
    # The first POST fails before GitHub stores it, the second fails after storing it: the bot
    # must find that review instead of posting a second one.
    gh.fail("POST", r".*/reviews", 502, "store-then-502")
    res = _bot()
    assert res.exit_code == 0, res.output
    assert [m for m, _, _ in gh.writes()] == ["POST", "POST"]
    assert len(gh.reviews) == 1 and len(gh.comments) == 1


def test_persistent_5xx_gives_up_with_a_clear_message(gh):
    gh.fail("GET", r"/repos/octo/proj/pulls/7", *[500] * 10)
    res = _bot("--retries", "2")
    assert res.exit_code == 2
    assert "error: GitHub API error 500" in res.output, res.output
    assert [p for m, p, _ in gh.requests].count("/repos/octo/proj/pulls/7") == 3
    assert gh.writes() == []


def test_token_is_never_printed(gh):
    # An error message that echoes the token (a misbehaving proxy, say) is scrubbed.
    gh.fail("POST", r".*/reviews", (422, f"bad credentials {TOKEN}"))
    res = _bot()  # _bot asserts the token is not in the output
    assert res.exit_code == 2 and "bad credentials ***" in res.output


def test_closed_pr_is_refused_before_any_analysis(gh, monkeypatch):
    gh.pr["state"] = "closed"
    monkeypatch.setattr(prbot, "analyze", lambda *a, **k: pytest.fail("analysed a closed PR"))
    res = _bot()
    assert res.exit_code == 2 and gh.writes() == []


def test_comments_by_others_quoting_the_marker_are_left_alone(gh):
    assert _bot().exit_code == 0
    quoted = dict(gh.comments[0], id=5, user={"login": "alice"}, url=gh.comments[0]["url"].replace(
        str(gh.comments[0]["id"]), "5"), line=3)
    gh.comments.append(quoted)
    gh.requests.clear()
    assert _bot().exit_code == 0
    assert all("/comments/5" not in p for _, p, _ in gh.writes())


def test_not_a_pull_request_context(repo, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    res = _bot("--base", "main", "--repo", "octo/proj")
    assert res.exit_code == 2 and "cannot tell the pull request" in res.output


def test_unknown_base(repo):
    res = _bot("--base", "nope", "--dry-run")
    assert res.exit_code == 2 and "--base 'nope' is not a commit" in res.output


def test_script_args_need_validate(repo):
    res = _bot("--dry-run", "--", "--steps", "3")
    assert res.exit_code == 2 and "need --validate" in res.output


# --- pieces ------------------------------------------------------------------------------------
def test_parse_diff_added_lines_and_hunks():
    diff = textwrap.dedent("""\
        diff --git a/a.py b/a.py
        --- a/a.py
        +++ b/a.py
        @@ -1,3 +1,4 @@
         x = 1
        -y = 2
        +y = 3
        +z = 4
         w = 5
        @@ -10 +11,0 @@
        -gone = 1
        diff --git a/old.py b/old.py
        deleted file mode 100644
        --- a/old.py
        +++ /dev/null
        @@ -1 +0,0 @@
        -print(1)
    """)
    files = parse_diff(diff)
    assert list(files) == ["a.py"]
    assert files["a.py"].added == {2, 3} and files["a.py"].hunks == [(1, 4)]


def test_fix_outside_the_diff_goes_to_the_summary(repo, monkeypatch):
    # The PR only adds the loop; the loader (and its fix) sit on unchanged lines far above, and
    # the GP101 fix touches a line outside the diff hunk.
    head_text = SLOW_TRAIN.replace("        total += loss.item()\n", "")
    base_text = head_text
    git(repo, "checkout", "-q", "main")
    commit(repo, {"train.py": base_text + "\n" * 8 + "# end\n"}, "base loop")
    git(repo, "checkout", "-qb", "small")
    lines = (base_text + "\n" * 8 + "# end\n").replace("        opt.step()\n", "        opt.step()\n        total += loss.item()\n")
    commit(repo, {"train.py": lines}, "accumulate")

    def passing(candidates):
        return [Measurement(True, 1.2, 1.1, 1.3) for _ in candidates]

    report, plan, _ = prbot.run(repo, {}, base="main", dry_run=True, validator=passing,
                                echo=lambda s: None, log=lambda s: None)
    assert [r.diag.code for r in report.rows] == ["GP101"]
    assert report.preexisting == 2  # GP201, GP202 on the untouched loader line
    (row,) = report.rows
    assert row.patch is not None and (row.patch.start_line, row.patch.end_line) == (14, 15)
    assert row.status == "proposed"  # 14..15 lies within the hunk's context


# --- the composite action ------------------------------------------------------------------------
ACTION = ROOT / "action.yml"


def _action_steps() -> dict:
    import yaml

    doc = yaml.safe_load(ACTION.read_text())
    return doc, {s["name"]: s for s in doc["runs"]["steps"]}


def test_action_declares_the_inputs_and_never_pastes_them_into_scripts():
    doc, steps = _action_steps()
    assert doc["runs"]["using"] == "composite"
    assert {"paths", "validate-script", "script-args", "alpha", "fail-on-findings"} <= set(doc["inputs"])
    for step in steps.values():
        # Inputs reach scripts through env only: `${{ inputs.x }}` inside `run` is shell injection.
        assert "${{" not in step.get("run", ""), step["name"]


def _run_step(step: dict, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    import re

    resolved = {k: v for k, v in (step.get("env") or {}).items()}
    resolved.update(env)
    output = cwd / "gh_output"
    resolved.update(GITHUB_OUTPUT=str(output), PYTHON=sys.executable)
    assert not any(isinstance(v, str) and re.search(r"\$\{\{", v) for v in env.values())
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                          env={**os.environ, **resolved}, capture_output=True, text=True, timeout=120)


def test_action_lint_step_prints_annotations(repo, tmp_path):
    _, steps = _action_steps()
    res = _run_step(steps["Lint (annotations)"], {"INPUT_PATHS": "train.py"}, repo)
    assert res.returncode == 0, res.stderr
    assert "::warning file=train.py,line=14,col=18," in res.stdout and "title=GP101::" in res.stdout
    assert "exit-code=1" in (repo / "gh_output").read_text()


def test_action_review_step_posts_through_the_bot(gh, repo):
    _, steps = _action_steps()
    env = {k: os.environ[k] for k in ("GITHUB_REPOSITORY", "GITHUB_EVENT_PATH", "GITHUB_BASE_REF",
                                       "GITHUB_API_URL")}
    env.update(GITHUB_TOKEN=TOKEN, VALIDATE_SCRIPT="", SCRIPT_ARGS="", ALPHA="", FAIL_ON_FINDINGS="true")
    res = _run_step(steps["Review the pull request"], env, repo)
    assert res.returncode == 1, res.stderr  # fail-on-findings, after posting
    assert len(gh.reviews) == 1 and len(gh.comments) == 1
    assert TOKEN not in res.stdout + res.stderr


def test_bot_honours_noqa_and_the_repository_config(repo):
    text = SLOW_TRAIN.replace("batch_size=8)\n", "batch_size=8)  # noqa: GP202\n")
    commit(repo, {"train.py": text, ".gpuperf.yaml": None,
                   "pyproject.toml": '[tool.gpuperf]\nselect = ["GP101", "GP201", "GP202"]\n'
                                     'ignore = ["GP201"]\nexclude = ["exp/"]\n',
                   "exp/old.py": SLOW_TRAIN}, "noqa, config")
    report, plan, _ = prbot.run(repo, {}, base="main", dry_run=True, echo=lambda s: None, log=lambda s: None)
    assert [(r.diag.path, r.diag.code) for r in report.rows] == [("train.py", "GP101")]
    assert plan.comments == []
    assert report.skipped == ["exp/old.py: excluded by configuration"]
