"""Smoke tests so the benchmark scripts cannot rot: lint speed on a three-file corpus, the real-corpus
scorer's per-rule figures (benchmarks/realcorpus/score.py, with a mirror made here), and the
rewrite-gains plumbing (rewrite, A/B call, table) with the A/B run replaced by a canned result
(a real A/B of a fixture takes minutes; docs/benchmarks.md has the real numbers)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lint_speed_runs_every_contender_on_a_small_corpus(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.py").write_text("import torch\nfor x, y in loader:\n    print(x.item())\n")
    (corpus / "model.py").write_text("import torch.nn as nn\nclass M(nn.Module):\n    pass\n")
    (corpus / "util.py").write_text("def f(a):\n    return a + 1\n")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "lint_speed.py"), "--corpus", str(corpus),
                          "--repeat", "1", "--no-torchfix", "--json", str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    assert "3 files, 8 lines; 2 mention `torch`" in out.stdout
    for name in ("gpuperf-rewrite -j 2", "gpuperf-rewrite -j 1", "bare LibCST parse, 2 processes",
                 "bare LibCST parse, 1 process"):
        assert f"| {name} |" in out.stdout
    assert "Memory vs file count" in out.stdout
    assert "(target: within 2x)" in out.stdout


@pytest.mark.slow
def test_lint_speed_mixed_mode_on_a_sample(tmp_path):
    """The mixed-tree mode end to end on 3 files of each corpus: every contender, both corpora,
    start-up, and ours giving the same report cold, warm and with one process."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "lint_speed.py"), "--mixed", "--sample", "3",
                          "--repeat", "1", "--no-torchfix", "--startup-rounds", "1", "--json", str(tmp_path / "m.json")],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    assert "Start-up, `gpuperf-rewrite train.py`" in out.stdout
    for corpus in ("### stdlib:", "### torch:"):
        assert corpus in out.stdout
    for name in ("gpuperf-rewrite, cold cache, -j 2", "gpuperf-rewrite, warm cache, -j 2",
                 "gpuperf-rewrite, cold cache, -j 1", "bare LibCST parse, 2 processes"):
        assert out.stdout.count(f"| {name} |") == 2, name
    if shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff"):  # the bench extra
        assert out.stdout.count("| ruff check --select ALL --no-cache |") == 2
    else:
        assert "ruff not found" in out.stderr
    assert out.stdout.count("reports identical") == 2


def test_bare_parse_counts_rejected_files(tmp_path):
    good, bad = tmp_path / "a.py", tmp_path / "b.py"
    good.write_text("x = 1\n")
    bad.write_text("def (:\n")
    listing = tmp_path / "files.txt"
    listing.write_text(f"{good}\n{bad}\n")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bare_parse.py"), str(listing)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0
    assert "parsed 1 files, 1 rejected" in out.stderr


def test_rewrite_gains_table_from_ab_results(monkeypatch, capsys, tmp_path):
    gains = _load("rewrite_gains")
    calls = []

    def fake_ab(a: Path, b: Path, args) -> dict:
        calls.append((a.name, b.read_text()))
        return {"verdict": "faster", "speedup": 3.0, "ci95": [2.5, 3.5], "p_value": 0.004,
                "a": {"median": 100.0}, "b": {"median": 300.0}, "runs": {"a": 5, "b": 5},
                "fingerprint": {"device": "cpu"}, "loss_check": {"status": "passed"},
                "memory": {"a_peak_bytes": 300 * 2**20, "b_peak_bytes": 350 * 2**20}}

    monkeypatch.setattr(gains, "run_ab", fake_ab)
    assert gains.main(["--fixtures", "input_bound", "--ablation", "--json", str(tmp_path / "g.json")]) == 0
    out = capsys.readouterr().out
    # The rewrite really is the engine's: workers for the num_workers=0 loader.
    assert calls[0][0] == "input_bound.py" and "num_workers=min(8, os.cpu_count() or 1)" in calls[0][1]
    assert "| `input_bound` | GP" in out and "| 3.00x | 2.50-3.50 | 0.004 | **faster** | 300 | 350 | passed | 5+5 |" in out
    assert "Geometric-mean speedup over 1 fixtures: 3.00x" in out
    assert "GP201 alone" in out  # the ablation ran each applied rule's fix on its own
    assert len(calls) == 1 + out.count(" alone |")


@pytest.mark.parametrize("name", ["cnn_item_logging", "resnet_no_amp", "gpt_fp32", "input_bound",
                                  "loss_accumulation", "ddp_train"])
def test_every_benchmark_fixture_gets_a_rewrite_that_parses(name):
    gains = _load("rewrite_gains")
    path = ROOT / "fixtures" / f"{name}.py"
    fixed, applied = gains.rewrite(path.read_bytes(), str(path))
    assert applied and fixed != path.read_bytes()
    compile(fixed, str(path), "exec")


def test_ab_aa_rate_passes_options_after_the_separator_to_the_script(monkeypatch):
    """`real SCRIPT --trials N -- --size small`: the options after `--` are the script's own
    (argparse alone refused them), the ones before are the tool's."""
    spec = importlib.util.spec_from_file_location("ab_aa_rate", ROOT / "scripts" / "ab_aa_rate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seen = {}
    monkeypatch.setitem(module.main.__globals__, "cmd_real", lambda o: seen.update(vars(o)))
    assert module.main(["real", "train.py", "--trials", "3", "--", "--size", "small", "--device", "cpu"]) == 0
    assert seen["script"] == "train.py" and seen["trials"] == 3
    assert seen["args"] == ["--size", "small", "--device", "cpu"]


def test_startup_benchmark_runs_every_case_once(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "startup.py"), "--runs", "1", "--warmup", "0",
                          "--no-hyperfine", "--json", str(tmp_path / "s.json")],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    rows = {line.split(" | ")[0].lstrip("| "): line for line in out.stdout.splitlines() if line.startswith("| ")}
    assert rows["non-torch file"].endswith("| no |") and rows["training script, no cache"].endswith("| yes |")
    assert "training script, warm cache" in rows and "python -c pass (floor)" in rows


# benchmarks/realcorpus/score.py
_spec = importlib.util.spec_from_file_location("realcorpus_score", ROOT / "benchmarks" / "realcorpus" / "score.py")
score = sys.modules["realcorpus_score"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(score)

HEADER = "local_file\tline\tlabel\tguarded\tconfidence\tnote\n"
ROWS = [  # local_file, line, label, guarded, confidence
    ("o__r/train.py", "10", "SYNC_ITEM", "no", "high"),
    ("o__r/train.py", "12", "SYNC_ITEM", "no", "high"),
    ("o__r/train.py", "20", "SYNC_ITEM", "yes", "high"),      # guarded: a negative row
    ("o__r/train.py", "30", "TO_BLOCKING", "na", "high"),
    ("o__r/train.py", "31", "TO_BLOCKING", "na", "low"),      # low: neither positive nor negative
    ("o__r/train.py", "-", "CLEAN_NO_AMP", "na", "high"),
    ("o__r/train.py", "40", "NA_TENSOR_CREATE_THEN_MOVE", "na", "high"),
    ("o__r/data.py", "5", "NA_DL_NO_PERSISTENT", "na", "high"),
    ("o__r/data.py", "7", "SOMETHING_ELSE", "na", "high"),   # no rule: ignored
]
LISTING = """\
false alarm GP101 o__r/train.py:20 (SYNC_ITEM: guarded)
false alarm GP301 o__r/train.py:- (CLEAN_NO_AMP: autocast)
miss GP101 o__r/train.py:12 (every step)
unlabeled GP104 o__r/train.py:77
unlabeled GP104 o__r/data.py:3
unlabeled GP305 o__r/train.py:50
o__r/model.py: exit 2, unreadable output
per rule recall: GP101 1/2, GP104 1/1
real corpus (2 files, in place): recall 67% (2/3), 2 false alarms on 4 negative rows, 3 unlabeled findings
"""


def _rows():
    return [dict(zip(("local_file", "line", "label", "guarded", "confidence"), r), note="") for r in ROWS]


def test_aggregate_regroups_the_listing_per_rule():
    per, unreadable = score.aggregate(_rows(), LISTING)
    assert unreadable == 1
    assert per["GP101"] == score.RuleScore(hits=1, positives=2, false_alarms=1, negatives=1, unlabeled=0)
    assert per["GP104"] == score.RuleScore(hits=1, positives=1, false_alarms=0, negatives=0, unlabeled=2)
    assert per["GP301"] == score.RuleScore(false_alarms=1, negatives=1)
    assert per["GP105"].negatives == 1 and per["GP203"].negatives == 1
    assert per["GP305"].unlabeled == 1
    t = score.total(per)
    assert (t.hits, t.positives, t.false_alarms, t.negatives, t.unlabeled) == (2, 3, 2, 4, 3)


def test_table_prints_every_rule_and_the_total():
    per, unreadable = score.aggregate(_rows(), LISTING)
    text = score.table("corpusX", per, 2, unreadable)
    assert "| GP101 | 1/2 | 50% | 1/1 | 0 |" in text
    assert "| GP301 | 0/0 | - | 1/1 | 0 |" in text
    assert "| **total** | **2/3** | **67%** | **2/4** | **3** |" in text
    assert "1 file(s) gave no readable output" in text


def test_held_out_sets_are_scored_only_when_named(tmp_path):
    for name in ("dev1", "dev2", "heldout"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "LABELS.tsv").write_text(HEADER)
    (tmp_path / "heldout" / "HELD_OUT").write_text("scored only by name\n")
    (tmp_path / "notes").mkdir()  # no LABELS.tsv: not a set
    assert score.default_sets(tmp_path) == ["dev1", "dev2"]
    for held_out in ("corpus3", "corpus4", "corpus5", "corpus6", "corpus7", "corpus8", "corpus9", "corpus10", "corpus11", "corpus12", "corpus13", "corpus14", "corpus15", "corpus16", "corpus17", "corpus18", "corpus19", "corpus20", "corpus21", "corpus22", "corpus23", "corpus24",
                     "corpus25", "corpus26", "corpus27", "corpus28", "corpus29", "corpus30",
                     "corpus31", "corpus32", "corpus33", "corpus34", "corpus35", "corpus36", "corpus37", "corpus38",
                     "corpus39", "corpus40", "corpus41", "corpus42", "corpus43", "corpus44"):
        assert held_out not in score.default_sets(ROOT / "benchmarks" / "realcorpus")
        assert (ROOT / "benchmarks" / "realcorpus" / held_out / "LABELS.tsv").is_file()


def _mirror(tmp_path: Path) -> tuple[Path, str]:
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "train.py").write_text("import pkg.data\n")
    (work / "pkg" / "data.py").write_text("loader = None\n")
    (work / "cfg.yaml").write_text("a: 1\n")
    (work / "README.md").write_text("not copied\n")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    mirrors = tmp_path / "mirrors"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirrors / "o+r" / "repo")], check=True)
    return mirrors, commit


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a mirror")
def test_build_writes_the_kept_files_once(tmp_path):
    mirrors, commit = _mirror(tmp_path)
    out = tmp_path / "trees"
    sources = [{"repo": "o/r", "commit": commit}]
    score.build(sources, out, mirrors)
    tree = out / "o__r"
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()) == \
        ["cfg.yaml", "pkg/data.py", "train.py"]
    (tree / "train.py").write_text("changed\n")
    score.build(sources, out, mirrors)  # same commit: left as it is
    assert (tree / "train.py").read_text() == "changed\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a mirror")
def test_build_skips_blobs_the_mirror_lacks(tmp_path):
    """Fetched mirrors can lack blobs (git archive then fails): the other files are still written."""
    mirrors, commit = _mirror(tmp_path)
    git = mirrors / "o+r" / "repo"
    blob = subprocess.run(["git", "--git-dir", str(git), "rev-parse", f"{commit}:cfg.yaml"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (git / "objects" / blob[:2] / blob[2:]).unlink()
    score.build([{"repo": "o/r", "commit": commit}], tmp_path / "trees", mirrors)
    tree = tmp_path / "trees" / "o__r"
    assert (tree / "train.py").read_text() == "import pkg.data\n" and (tree / "pkg" / "data.py").is_file()
    assert not (tree / "cfg.yaml").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a mirror")
def test_main_builds_runs_the_scorer_and_writes_json(tmp_path, capsys):
    mirrors, commit = _mirror(tmp_path)
    labels = tmp_path / "setA"
    labels.mkdir()
    (labels / "SOURCES.tsv").write_text(f"local_file\trepo\tpath\tcommit\tlines\no__r/train.py\to/r\ttrain.py\t{commit}\t1\n")
    (labels / "LABELS.tsv").write_text(HEADER + "".join("\t".join(r) + "\tn\n" for r in ROWS))
    scorer = tmp_path / "scorer.py"  # stands in for the shared scorer: checks its arguments, prints a listing
    scorer.write_text("import sys, os, pathlib\n"
                      "gpr, tree, labels, sources = sys.argv[1:]\n"
                      "assert pathlib.Path(tree, 'o__r', 'train.py').is_file() and os.environ['SHOW_MISSES'] == '1'\n"
                      f"print({LISTING!r})\n")
    gpr = tmp_path / "gpr"  # stands in for gpuperf-rewrite: the first lint must share the scorer's cache
    gpr.write_text(f"#!{sys.executable}\nimport os, sys\n"
                   f"open({str(tmp_path / 'linted')!r}, 'a').write(sys.argv[1] + ' ' + os.environ['GPUPERF_CACHE_DIR'])\n")
    gpr.chmod(0o755)
    out = tmp_path / "r.json"
    assert score.main(["--sets", str(labels), "--trees", str(tmp_path / "trees"), "--mirrors", str(mirrors),
                       "--scorer", str(scorer), "--gpr", str(gpr), "--json", str(out)]) == 0
    assert (tmp_path / "linted").read_text() == \
        f"{tmp_path / 'trees' / 'setA' / 'o__r' / 'train.py'} {tmp_path / 'trees' / '.gpuperf_cache'}"
    printed = capsys.readouterr().out
    assert "### setA: 2 files, linted in place" in printed and "| **total** | **2/3** |" in printed
    report = json.loads(out.read_text())
    assert report["setA"]["total"]["false_alarms"] == 2 and report["setA"]["rules"]["GP104"]["unlabeled"] == 2
    scorer.write_text("import sys\nsys.exit('Traceback: TimeoutExpired')\n")  # a crashed scorer is no score
    assert score.main(["--sets", str(labels), "--trees", str(tmp_path / "trees"), "--mirrors", str(mirrors),
                       "--scorer", str(scorer), "--gpr", str(gpr)]) == 2
    assert "the shared scorer failed" in capsys.readouterr().out
