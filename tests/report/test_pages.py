"""The HTML report on real documents of every command (built in-process with fake runs): each
chart is there with one point per run or per step, the verdict says what the text report says,
and hostile data (NaN/inf losses, a crashed run, one run per side, 100,000 steps, HTML in a
path or message) neither breaks the page nor bloats it. Then each kind of page opened in headless
Chromium, as a person would open it from disk: no console error, every chart in the DOM the
browser built with its points, the verdict as the JSON says, and a screenshot. Chromium is
Debian's ``chromium`` package, installed by ``make test`` (its ``browser`` step) where it can be;
those tests are skipped, saying so, where no browser exists. One module: the documents are built
once (tests/report/conftest.py; tests/conftest.py keeps the module on one worker)."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("scipy")
pytest.importorskip("git")

from click.testing import CliRunner  # noqa: E402

from gpuperf_rewrite.cli import cli  # noqa: E402
from gpuperf_rewrite.report.charts import MAX_POINTS  # noqa: E402
from gpuperf_rewrite.report.errors import MissingExtra, ReportError  # noqa: E402
from gpuperf_rewrite.report.render import kind_of, render_html, write_html  # noqa: E402
from gpuperf_rewrite.validate.console import format_ab  # noqa: E402
from tests.helpers import reportdocs  # noqa: E402
from tests.helpers.htmlpage import Dom  # noqa: E402


# render_html of one document, once per module: matplotlib draws each chart in ~0.5 s of CPU and
# several tests read the same page (the shared documents; each real GPU document's page twice).
# Keyed by the document's content, so a test's edited copy gets a page of its own; a page is a
# function of its document alone.
_PAGES: dict[str, str] = {}


def page_of(doc) -> str:
    key = json.dumps(doc, sort_keys=True)
    if key not in _PAGES:
        _PAGES[key] = render_html(doc)
    return _PAGES[key]



def test_every_document_kind_is_recognised(docs) -> None:
    assert {kind: kind_of(doc) for kind, doc in docs.items()} == {k: k for k in docs}
    with pytest.raises(ReportError, match="not a document"):
        kind_of({"something": "else"})


def test_ab_page_draws_every_run_and_step_and_says_the_verdict(docs) -> None:
    from gpuperf_rewrite.validate.console import format_ab, verdict_line

    doc = docs["ab"]
    dom = Dom(page_of(doc))
    assert dom.text("verdict") == verdict_line(doc).replace("verdict   ", "")
    assert dom.text("verdict").startswith("FASTER: B is ")
    assert dom.text("num-speedup") == f"{doc['speedup']:.3f}x"
    assert dom.text("num-loss-check") == doc["loss_check"]["status"] == "passed"
    assert dom.text("text-report") == " ".join(format_ab(doc).split())
    for side in "ab":
        assert dom.points(f"throughput-{side}") == len(doc[side]["samples"]) == doc["runs"][side]
        assert f"median-{side}" in dom.ids
        for run in doc[side]["runs"]:
            i = run["index"]
            assert dom.points(f"steps-{side}-{i}") == reportdocs.WARMUP + reportdocs.STEPS
            assert dom.points(f"loss-{side}-{i}") == len(run["loss"])
            assert dom.points(f"mem-{side}-{i}") == reportdocs.STEPS
    assert {"ci-band", "min-speedup", "warmup", "loss-tolerance", "loss-b-end"} <= set(dom.ids)


def test_ab_page_on_cuda_draws_device_memory_and_its_peaks(docs) -> None:
    doc = copy.deepcopy(docs["ab"])
    for side in "ab":
        for run in doc[side]["runs"]:
            run["memory"].update(peak_allocated_bytes=200 << 20, peak_reserved_bytes=300 << 20,
                                 allocated_per_step=[150 << 20, None] * (reportdocs.STEPS // 2),
                                 sample_stride={"allocated": 2})
    dom = Dom(render_html(doc))
    assert {"allocated-a", "reserved-a", "allocated-b", "reserved-b"} <= set(dom.ids)
    assert dom.points("mem-a-0") == reportdocs.STEPS  # every second step read, carried over between reads
    assert "device allocated" in dom.text("chart-memory")


def test_apply_page_lists_subsets_decisions_and_the_escaped_diff(docs) -> None:
    doc = docs["apply"]
    assert doc["status"] == "committed" and doc["diff"]
    html = page_of(doc)
    dom = Dom(html)
    assert "committed: X1 as " in dom.text("verdict")
    rows = [n for n in dom.ids["attempts-table"].walk() if n.tag == "tr"]
    assert len(rows) == 1 + len(doc["attempts"])
    decisions = dom.text("decisions-table")
    assert "X1 applied" in decisions and "SLOW dropped" in decisions
    assert "print('<b>hi</b>')" in dom.text("diff-text") and "<b>hi</b>" not in html  # shown, not rendered
    assert dom.points("throughput-b") == doc["validation"]["runs"]["b"]


def test_notes_keep_no_per_step_series(docs) -> None:
    """The page's series are in --json, not in refs/notes/gpuperf (a note stays small)."""
    from gpuperf_rewrite.validate.record.gitops import merge_note

    rec = docs["baseline"]
    assert rec["runs"][0]["step_times_s"]  # what --json and the page get
    (stored,) = [json.loads(line) for line in merge_note("", rec).splitlines()]
    assert stored["runs"] and not any(k in run for run in stored["runs"]
                                      for k in ("step_times_s", "warmup_step_times_s", "memory"))
    assert stored["samples"] == rec["samples"] and stored["runs"][0]["loss"] == rec["runs"][0]["loss"]


def test_regress_and_baseline_pages_draw_the_history_over_commits(docs) -> None:
    regress = docs["regress"]
    dom = Dom(page_of(regress))
    assert dom.text("verdict").startswith("REGRESSION: train.py -")
    # three baselines on a line; regress's side-by-side re-measurement of the nearest apart from it
    assert dom.points("history-0") == 3 and len(regress["history"]) == 4
    assert "history-remeasured" in dom.ids and regress["comparison"] == "side_by_side"
    assert dom.points("current") == 1 and dom.points("current-runs") == len(regress["current"])
    assert "threshold" in dom.ids and dom.points("steps-a-0") == reportdocs.WARMUP + reportdocs.STEPS
    base = Dom(page_of(docs["baseline"]))
    assert base.text("verdict").startswith("Baseline for train.py on ")
    assert base.points("history-0") == 3
    rows = Dom(page_of(docs["history"]))
    assert rows.points("history-0") == 3 and "current" not in rows.ids


def test_profile_page_links_each_finding_to_its_rules_documented_in_the_page(docs) -> None:
    doc = docs["profile"]
    html = page_of(doc)
    dom = Dom(html)
    kinds = [f["kind"] for f in doc["diagnosis"]]
    assert "input_bound" in kinds and dom.text("verdict").startswith("step_limit: ")
    for finding in doc["diagnosis"]:
        for code in finding["rules"]:
            assert f'href="#rule-{code}"' in html and f"rule-{code}" in dom.ids
    assert "GP201" in dom.text("rule-GP201") and "num_workers" in dom.text("rule-GP201")
    assert dom.points("steps") == reportdocs.STEPS and dom.points("steps-warmup") == 3
    assert dom.points("loss") == len(doc["loss"]) and dom.points("mem-rss") == reportdocs.STEPS
    assert "GROWING" in dom.text("memory-diagnosis")
    assert dom.text("batch-probe-text").startswith("Batch-size probe (--batch-size, from 32; stopped: memory)")


def test_proof_page_has_one_bar_per_fixture(docs) -> None:
    dom = Dom(page_of(docs["proof"]))
    assert dom.with_prefix("speedup-") == ["speedup-0", "speedup-1", "speedup-2"]
    assert dom.text("verdict") == "2 of 3 fixtures faster after --apply on NVIDIA H100 80GB HBM3"


def test_nothing_is_fetched_and_no_script_runs(docs) -> None:
    for doc in docs.values():
        html = page_of(doc)
        assert "<script" not in html and "default-src 'none'" in html and "@import" not in html
        links = [v for n in Dom(html).root.walk() for k, v in n.attrs.items() if k in ("src", "href", "xlink:href")]
        assert links and all(v.startswith("#") for v in links), links  # in-page anchors and SVG defs only


PROOF = sorted(p for p in (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu-proof").glob("*/*.json")
               if p.name not in ("env.json", "sessions.json", "shim-overhead.json"))  # results, not bookkeeping or benchmarks


@pytest.mark.parametrize("path", PROOF, ids=[p.name for p in PROOF])
def test_the_gpu_proof_results_render(path) -> None:
    """The real GPU documents in the repository: the H100's A/Bs (an older shape: no per-step
    times) and summary, the H200's --apply reports (fixtures and harmful-fix classes), profiles
    and summary."""
    from gpuperf_rewrite.report.render import load

    doc = load(path)
    kind = kind_of(doc)
    dom = Dom(page_of(doc))
    if kind == "ab":
        assert dom.text("verdict").startswith(doc["verdict"].upper())
        assert dom.points("throughput-b") == len(doc["b"]["samples"])
        assert "no per-step times" in dom.text("step-times")
    elif kind == "proof":
        assert len(dom.with_prefix("speedup-")) == len(doc["fixtures"])
    else:
        assert kind == ("apply" if path.name.startswith(("apply-", "harmful-")) else "profile")
        assert dom.with_prefix("") and "Traceback" not in page_of(doc)


# -- hostile data -------------------------------------------------------------------------------

def test_nan_and_inf_losses_are_gaps_not_errors(docs) -> None:
    doc = copy.deepcopy(docs["ab"])
    run = doc["b"]["runs"][0]
    run["loss"][2], run["loss"][3], run["loss"][4] = math.nan, math.inf, None
    dom = Dom(render_html(json.loads(json.dumps(doc))))  # NaN/Infinity survive Python's json
    assert dom.points("loss-b-0") == len(run["loss"]) - 3
    assert "B run 1: 3" in dom.root.text()


def test_a_crashed_run_is_marked_and_listed(docs) -> None:
    doc = copy.deepcopy(docs["ab"])
    crashed = doc["b"]["runs"][1]
    crashed.update(status="crashed", throughput=None, error="RuntimeError: <oops> & 'boom'", loss=[], step_times_s=[])
    doc["b"]["samples"] = [r["throughput"] for r in doc["b"]["runs"] if r["throughput"]]
    html = render_html(doc)
    dom = Dom(html)
    assert dom.points("throughput-b") == len(doc["b"]["runs"]) - 1 and dom.points("failed-b") == 1
    assert "RuntimeError: <oops> & 'boom'" in dom.text("failed-runs") and "<oops>" not in html


def test_a_crashed_profile_says_so_and_escapes_its_stderr() -> None:
    from gpuperf_rewrite.runtime.schema import empty_document

    doc = empty_document("<b>train</b>.py", [], "crashed")
    doc.update(exit_code=1, error="RuntimeError: <i>CUDA</i> out of memory", stderr_tail="<script>x</script>\nboom")
    html = render_html(doc)
    dom = Dom(html)
    assert dom.text("verdict") == "crashed: RuntimeError: <i>CUDA</i> out of memory"
    assert "<script>x</script>" in dom.text("text-report") and "<script" not in html and "<b>train" not in html
    assert "No step was measured." in dom.text("step-times")


def test_one_run_per_side_still_draws(docs) -> None:
    doc = copy.deepcopy(docs["ab"])  # as an A/B stopped after one pair (B broken) would save it
    for side in "ab":
        doc[side]["runs"] = doc[side]["runs"][:1]
        doc[side]["samples"] = doc[side]["samples"][:1]
    doc.update(speedup=None, ci95=None, p_value=None, p_values=None)
    dom = Dom(render_html(doc))
    assert dom.points("throughput-a") == dom.points("throughput-b") == 1
    assert dom.text("num-speedup") == "n/a"


def test_many_runs_per_side_are_drawn_as_their_median(docs) -> None:
    from gpuperf_rewrite.report.ab import MAX_RUN_LINES

    doc = copy.deepcopy(docs["ab"])
    for side in "ab":
        runs = doc[side]["runs"]
        doc[side]["runs"] = [{**runs[i % len(runs)], "index": i} for i in range(MAX_RUN_LINES + 2)]
    dom = Dom(render_html(doc))
    assert dom.points("throughput-a") == MAX_RUN_LINES + 2  # every run is still a point
    assert dom.points("steps-a-median") == reportdocs.WARMUP + reportdocs.STEPS and "steps-a-0" not in dom.ids
    assert dom.points("loss-b-median") == len(doc["b"]["runs"][0]["loss"])


def test_100000_steps_are_down_sampled_into_a_small_page(docs) -> None:
    doc = copy.deepcopy(docs["ab"])
    n = 100_000
    for side in "ab":
        for run in doc[side]["runs"]:
            run["step_times_s"] = [0.01 + (i % 7) * 1e-4 for i in range(n)]
            run["loss"] = [2.0 / (1 + i / 1000) for i in range(n)]
            run["memory"]["rss_per_step"] = [(100 << 20) + i for i in range(n)]
    html = render_html(doc)
    assert len(html.encode()) < 2_000_000, len(html)
    dom = Dom(html)
    assert dom.points("steps-a-0") <= MAX_POINTS and dom.points("loss-b-0") == MAX_POINTS
    assert "steps-a-0-band" in dom.ids  # the min-max range of each bin is drawn behind the mean


def test_html_in_paths_and_messages_is_escaped(docs) -> None:
    doc = copy.deepcopy(docs["ab"])
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    doc["scripts"] = {"a": f"/tmp/{evil}/a.py", "b": f"/tmp/{evil}.py"}
    doc["reason"] += evil
    doc["warnings"] = [evil]
    doc["overhead"] = {evil: evil, "setup_s": 1.5}  # another branch's key: shown, never trusted
    html = render_html(doc)
    assert "<script" not in html and "<img" not in html
    dom = Dom(html)
    assert dom.text("verdict").endswith(evil) and evil in dom.text("overhead-table")


def test_a_garbled_document_is_a_report_error_not_a_traceback(docs) -> None:
    doc = copy.deepcopy(docs["ab"])
    doc.update(loss_check="x", runs=3, ci95="zz", memory=[1], warnings=7)
    doc["a"]["runs"] = "zz"
    try:
        Dom(render_html(doc))
    except ReportError as exc:
        assert "ab document" in str(exc)


# -- the commands -------------------------------------------------------------------------------

def test_report_command_renders_a_saved_document_and_refuses_others(docs, tmp_path) -> None:
    saved = tmp_path / "result.json"
    saved.write_text(json.dumps(docs["regress"]))
    res = CliRunner().invoke(cli, ["report", str(saved)])
    assert res.exit_code == 0, res.output
    page = tmp_path / "result.html"
    assert Dom(page.read_text()).text("verdict").startswith("REGRESSION")
    (tmp_path / "x.json").write_text('{"nothing": 1}')
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "x.json"), "-o", str(tmp_path / "x.html")])
    assert res.exit_code == 2 and "not a document" in res.output and not (tmp_path / "x.html").exists()
    (tmp_path / "y.json").write_text("{not json")
    assert CliRunner().invoke(cli, ["report", str(tmp_path / "y.json")]).exit_code == 2
    same = tmp_path / "result.html"  # a document saved as .html: never rendered over itself
    same.write_text(json.dumps(docs["regress"]))
    res = CliRunner().invoke(cli, ["report", str(same)])
    assert res.exit_code == 2 and "give -o PATH" in res.output and json.loads(same.read_text())


def test_a_failed_render_keeps_the_previous_page(docs, tmp_path, monkeypatch) -> None:
    from gpuperf_rewrite.report import render

    saved, page = tmp_path / "r.json", tmp_path / "r.html"
    saved.write_text(json.dumps(docs["history"]))
    page.write_text("old page")

    def broken(doc):
        raise ReportError("cannot draw")

    monkeypatch.setattr(render, "render_html", broken)
    res = CliRunner().invoke(cli, ["report", str(saved), "-o", str(page)])
    assert res.exit_code == 2 and page.read_text() == "old page"


def test_missing_extra_is_a_usage_error_naming_the_pip_command(docs, tmp_path, monkeypatch) -> None:
    from gpuperf_rewrite.report import charts

    def no_matplotlib():
        raise MissingExtra()

    monkeypatch.setattr(charts, "pyplot", no_matplotlib)
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps(docs["history"]))
    res = CliRunner().invoke(cli, ["report", str(saved)])
    assert res.exit_code == 2 and 'pip install "gpuperf-rewrite[report]"' in res.output


def test_html_flag_on_ab_profile_baseline_and_apply(docs, tmp_path, monkeypatch) -> None:
    """The real commands, on fake runs (each run in the command's own scratch mirror)."""
    from gpuperf_rewrite.cli import profile as profile_cmd
    from gpuperf_rewrite.validate import apply as apply_mod
    from gpuperf_rewrite.validate.judge import abtest
    from tests.helpers.abfakes import fake_script, git_repo

    monkeypatch.setattr(abtest, "default_runner", lambda: reportdocs.SeriesRunner())
    monkeypatch.chdir(tmp_path)
    fake_script(tmp_path / "a.py", speed=100, noise=0.01)
    fake_script(tmp_path / "b.py", speed=150, noise=0.01)
    small = ["--runs", "4", "--max-runs", "4", "--steps", "12", "--warmup", "3"]
    res = CliRunner().invoke(cli, ["ab", "a.py", "b.py", *small, "--html", "ab.html", "--json", "ab.json"])
    assert res.exit_code == 0, res.output
    dom = Dom((tmp_path / "ab.html").read_text())
    assert dom.text("verdict").startswith("FASTER") and dom.points("throughput-b") == 4
    assert dom.text("text-report") == " ".join(format_ab(json.loads((tmp_path / "ab.json").read_text())).split())

    monkeypatch.setattr(profile_cmd, "profile_runner", lambda request: reportdocs.profile_doc())
    res = CliRunner().invoke(cli, ["profile", "a.py", "--html", "p.html"])
    assert res.exit_code == 0, res.output
    assert Dom((tmp_path / "p.html").read_text()).points("steps") == reportdocs.STEPS

    repo = tmp_path / "repo"
    repo.mkdir()
    git_repo(repo, {"train.py": "# fake: speed=100 noise=0.01\n"})
    monkeypatch.chdir(repo)
    res = CliRunner().invoke(cli, ["baseline", "train.py", *small[:2], *small[4:], "--html", "b.html",
                                   "--json", "b.json"])
    assert res.exit_code == 0, res.output
    assert json.loads((repo / "b.json").read_text())["history"][0]["runs"] == 4  # the page's data, in --json
    assert Dom((repo / "b.html").read_text()).points("history-0") == 1

    def fake_apply(path, *, options, **kw):  # what run_apply hands --html: its --json report
        options.report_sink(docs["apply"])
        return 0

    monkeypatch.setattr(apply_mod, "run_apply", fake_apply)
    res = CliRunner().invoke(cli, ["train.py", "--apply", "--html", "apply.html"])
    assert res.exit_code == 0, res.output
    assert "committed" in Dom((repo / "apply.html").read_text()).text("verdict")
    res = CliRunner().invoke(cli, ["train.py", "--html", "x.html"])
    assert res.exit_code == 2 and "only used with --apply" in res.output


def test_regress_history_html_flag(docs, tmp_path, monkeypatch) -> None:
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()
    baseline, _, _ = reportdocs.regress_docs(repo_dir)
    monkeypatch.chdir(repo_dir)
    res = CliRunner().invoke(cli, ["regress", "train.py", "--history", "--html", "h.html"])
    assert res.exit_code == 0, res.output
    assert Dom((repo_dir / "h.html").read_text()).points("history-0") == 3


# -- in a browser --------------------------------------------------------------------------------

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (make test installs "
                                                           "Debian's chromium package when it runs as root: make browser)")
FLAGS = ["--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
         "--no-first-run", "--disable-extensions", "--disable-background-networking", "--mute-audio"]


def open_page(path: Path, *action: str, tmp: Path) -> tuple[str, list[str]]:
    """(stdout, the console messages) of one headless Chromium run on ``path``."""
    env = {**os.environ, "HOME": str(tmp)}  # its profile and crash reports go there, not to ~
    out = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *action, path.as_uri()],
                         capture_output=True, text=True, timeout=120, env=env)
    console = [ln for ln in out.stderr.splitlines() if ":CONSOLE" in ln]
    return out.stdout, console


@pytest.fixture(scope="module")
def pages(docs, tmp_path_factory) -> dict:
    from gpuperf_rewrite.report import render

    tmp = tmp_path_factory.mktemp("pages")
    out = {}
    with pytest.MonkeyPatch.context() as mp:  # write_html's own write, the pages the tests above read
        mp.setattr(render, "render_html", page_of)
        for kind, doc in docs.items():
            write_html(tmp / f"{kind}.html", doc)
            out[kind] = (tmp / f"{kind}.html", doc)
    return out


@needs_browser
def test_the_console_check_sees_an_error(tmp_path) -> None:
    """The check below can fail: a page that logs an error is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><p id="x">hi</p><script>console.error("boom-control")</script>')
    dom, console = open_page(page, "--dump-dom", tmp=tmp_path)
    assert Dom(dom).text("x") == "hi" and any("boom-control" in c for c in console)


@needs_browser
@pytest.mark.parametrize("kind", ["ab", "apply", "baseline", "regress", "history", "profile", "proof"])
def test_page_renders_in_chromium(pages, kind, tmp_path) -> None:
    path, doc = pages[kind]
    dumped, console = open_page(path, "--dump-dom", tmp=tmp_path)
    assert not console, console
    dom = Dom(dumped)
    assert dom.root.walk() and "verdict" in dom.ids
    charts = dom.with_prefix("chart-")
    assert charts, "no chart on the page"
    if kind == "ab":
        from gpuperf_rewrite.validate.console import verdict_line

        assert dom.text("verdict") == verdict_line(doc).replace("verdict   ", "")
        for side in "ab":
            assert dom.points(f"throughput-{side}") == len(doc[side]["samples"])
            assert dom.points(f"loss-{side}-0") == len(doc[side]["runs"][0]["loss"])
        assert {"chart-throughput", "chart-step-times", "chart-loss", "chart-memory"} <= set(charts)
    elif kind in ("regress", "baseline", "history"):
        rows = doc if kind == "history" else doc["history"]
        # regress's side-by-side re-measurements are drawn apart from the baselines' line
        assert dom.points("history-0") == len([r for r in rows if r.get("kind") != "remeasured"])
    elif kind == "apply":
        assert doc["rules_applied"][0] in dom.text("verdict") and dom.points("throughput-b") == doc["validation"]["runs"]["b"]
    elif kind == "profile":
        assert dom.points("steps") == doc["measured_steps"]
    else:
        assert len(dom.with_prefix("speedup-")) == len(doc["fixtures"])


@needs_browser
def test_screenshot_of_the_ab_page(pages, tmp_path) -> None:
    path, _ = pages["ab"]
    shot = tmp_path / "ab.png"
    _, console = open_page(path, f"--screenshot={shot}", "--window-size=1100,1800", tmp=tmp_path)
    assert not console and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_profile_page_lists_findings_with_their_config_key_and_what_the_run_ruled_out(docs) -> None:
    doc = copy.deepcopy(docs["profile"])
    doc["findings"] = [{"path": "data.py", "line": 30, "column": 12, "code": "GP201", "name": "dataloader-workers",
                        "message": "DataLoader loads batches in the training process <0>", "origin": "run",
                        "observed": {"num_workers": 0, "pin_memory": False},
                        "config": {"file": "config.yaml", "key": "loader.num_workers", "present": False, "value": None},
                        "fix": None}]
    doc["findings_dropped"] = [{"path": "eval.py", "line": 4, "column": 12, "code": "GP202",
                                "reason": "no DataLoader was built at this line during the run"}]
    html = render_html(doc)
    dom = Dom(html)
    table = dom.text("findings-table")
    assert "data.py:30:12" in table and "GP201" in table and "seen at run time" in table
    assert "loader.num_workers missing in config.yaml" in table and "num_workers=0" in table
    assert "<0>" in table and "<0>" not in html  # escaped
    assert "eval.py:4" in dom.text("findings-dropped") and "was built at this line" in dom.text("findings-dropped")
    assert "findings-table" not in page_of(docs["profile"])  # a document without findings: no section


def test_apply_page_shows_what_the_profile_run_saw(docs) -> None:
    doc = copy.deepcopy(docs["apply"])
    doc["run_time"] = {"observed": True, "config_files": ["<cfg>.yaml"], "ruled_out": {"GP203": "eval.py:4: no loader"},
                       "findings": [{"path": "data.py", "line": 30, "code": "GP201", "message": "num_workers=0",
                                     "config": {"file": "config.yaml", "key": "loader.num_workers"}}]}
    html = render_html(doc)
    dom = Dom(html)
    assert "data.py:30" in dom.text("run-time-findings") and "loader.num_workers in config.yaml" in dom.text("run-time-findings")
    assert "GP203" in dom.text("run-time-ruled-out") and "<cfg>" not in html
    assert "run-time-findings" not in page_of(docs["apply"])
