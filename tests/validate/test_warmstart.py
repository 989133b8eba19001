"""Runs forked from a warm interpreter (runtime/process/forkserver.py, validate/run/warmstart.py): when a
run may be forked, and that forked runs share no state with each other or with the server."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from gpuperf_rewrite.validate.run import warmstart
from gpuperf_rewrite.validate.run.profiling import profile_runner
from gpuperf_rewrite.validate.run.runs import ScriptVersion, run_request
from gpuperf_rewrite.validate.run.workspace import Workspace
from gpuperf_rewrite.validate.run.warmstart import fresh_reason

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm interpreter forks: Linux only")


@pytest.fixture(autouse=True)
def _fork_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warmstart.FORK_ENV, raising=False)
    warmstart._SCANNED.clear()


@pytest.mark.parametrize("line, why", [
    ('os.environ["OMP_NUM_THREADS"] = "1"', "environment"),
    ("os.environ.setdefault('CUDA_VISIBLE_DEVICES', '0')", "environment"),
    ("os.environ.update(TORCH_LOGS='+dynamo')", "environment"),
    ("os.putenv('MKL_NUM_THREADS', '1')", "environment"),
    ("del os.environ['PYTORCH_CUDA_ALLOC_CONF']", "environment"),
    ("torch.multiprocessing.set_start_method('spawn')", "start method"),
    ("ctx = multiprocessing.get_context('forkserver')", "start method"),
    ("DataLoader(ds, num_workers=2, multiprocessing_context='spawn')", "start method"),
    ("torch.multiprocessing.spawn(main, nprocs=2)", "start method"),
])
@LINUX
def test_a_script_that_could_behave_differently_forked_gets_a_fresh_interpreter(tmp_path: Path, line: str,
                                                                                  why: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(f"import os\nimport torch\n{line}\n")
    assert why in (fresh_reason(script) or "")


@LINUX
def test_reads_comments_and_other_directories_do_not_count(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import os\n# os.environ['X'] = '1' and spawn in a comment\nx = os.environ['HOME']\n"
                      "y = os.environ.get('RANK') == '0'\nif os.environ['A'] == 'b': pass\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "launch.py").write_text("import torch.multiprocessing as mp\nmp.spawn(f)\n")
    assert fresh_reason(script) is None


@LINUX
def test_a_module_beside_the_script_counts_and_the_launch_decides_first(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text("import helpers\n")
    (tmp_path / "helpers.py").write_text("import os\nos.environ['OMP_NUM_THREADS'] = '1'\n")
    assert "helpers.py" in (fresh_reason(script) or "")
    (tmp_path / "helpers.py").write_text("X = 1\n")
    assert fresh_reason(script) is None
    assert "torchrun" in (fresh_reason(script, launcher="torchrun") or "")
    assert "traced" in (fresh_reason(script, trace=True) or "")
    assert "LD_PRELOAD" in (fresh_reason(script, env={**os.environ, "LD_PRELOAD": "/x.so"}) or "")
    monkeypatch.setenv(warmstart.FORK_ENV, "0")
    assert fresh_reason(script) == f"{warmstart.FORK_ENV}=0"


def test_the_server_is_keyed_by_everything_but_what_the_tool_sets_per_run() -> None:
    env = {"PATH": "/bin", "OMP_NUM_THREADS": "2", "TMPDIR": "/tmp/run1", "GPUPERF_GUARD": "{}",
           "PYTHONHASHSEED": "3", "TORCHINDUCTOR_CACHE_DIR": "/c/1", "PYTHONPATH": "/stage"}
    other_run = {**env, "TMPDIR": "/tmp/run2", "PYTHONHASHSEED": "4", "TORCHINDUCTOR_CACHE_DIR": "/c/2"}
    assert warmstart.server_env(env) == warmstart.server_env(other_run) == {"PATH": "/bin", "OMP_NUM_THREADS": "2"}
    assert warmstart.server_env({**env, "OMP_NUM_THREADS": "1"}) != warmstart.server_env(env)


@LINUX
def test_runs_whose_own_pythonpath_differs_fork_from_different_interpreters(tmp_path: Path) -> None:
    """A warm interpreter's sys.path keeps the user's PYTHONPATH of its start: a run with another
    one must not fork from it (it would not find its modules)."""
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"mod_{name}.py").write_text("X = 1\n")
        (tmp_path / f"use_{name}.py").write_text(f"import mod_{name}\nprint('found', mod_{name}.X)\n")
    docs = [profile_runner(run_request(str(tmp_path / f"use_{name}.py"), cwd=str(tmp_path), steps=2, warmup=0,
                                       timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path / name)}))
            for name in ("one", "two")]
    assert [d["phases"]["start"] for d in docs] == ["fork", "fork"], [d["stderr_tail"] for d in docs]
    assert all("found 1" in str(d["stdout_tail"]) for d in docs), [d["stderr_tail"] for d in docs]


# A script that reports, before it trains, every kind of state a run could inherit from an earlier
# one or from the warm interpreter: a counter on a module the server imported (torch), a counter in
# a module of the project, an environment variable, the seeded RNGs, a file left in the working
# directory; then it leaves each of them changed for the next run to see.
STATE_SCRIPT = '''\
import os, random, sys
import torch
import helper
from lib import leave

state = {
    "torch_counter": getattr(torch, "_gpuperf_test_counter", 0),
    "helper_counter": helper.COUNT,
    "env": os.environ.get("GPUPERF_TEST_LEFT"),
    "file": os.path.exists("left_by_run.txt"),
    "random": random.random(),
    "torch_rand": torch.rand(1).item(),
    "cwd_first_on_path": sys.path[0] == os.path.dirname(os.path.abspath(__file__)),
    "argv": sys.argv[1:],
    "tmpdir": __import__("tempfile").gettempdir() == os.environ.get("TMPDIR"),
    "main": __name__,
    "threads": torch.get_num_threads(),
    "gc": [__import__("gc").isenabled(), list(__import__("gc").get_threshold())],
    "hash": hash("gpuperf"),
}
print("STATE " + __import__("json").dumps(state), flush=True)
torch._gpuperf_test_counter = state["torch_counter"] + 1
helper.COUNT += 1
leave.environment()
open("left_by_run.txt", "w").write("x")
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for _ in range(20):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
'''


def _state(doc: dict) -> dict:
    line = next(ln for ln in str(doc.get("stdout_tail")).splitlines() if ln.startswith("STATE "))
    return json.loads(line[len("STATE "):])


@LINUX
@pytest.mark.slow
def test_forked_runs_share_no_state_and_see_what_a_fresh_interpreter_sees(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(STATE_SCRIPT)
    (project / "helper.py").write_text("COUNT = 0\n")
    # Set in a package below the script's directory, which the fork rule does not read (a script
    # that sets variables itself, or a module beside it, runs in a fresh interpreter).
    (project / "lib").mkdir()
    (project / "lib" / "__init__.py").write_text("")
    (project / "lib" / "leave.py").write_text("import os\n\ndef environment():\n"
                                              "    os.environ['GPUPERF_TEST_LEFT'] = 'yes'\n")
    with Workspace(cwd=project) as ws:
        path = ws.add(ScriptVersion.read(project / "train.py"))
        run = ws.runner(profile_runner)
        docs = [run(run_request(str(path), ["--flag"], steps=3, warmup=1, seed=seed)) for seed in (5, 5, 6)]
        monkeypatch.setenv(warmstart.FORK_ENV, "0")
        fresh = run(run_request(str(path), ["--flag"], steps=3, warmup=1, seed=5))
    assert [d["phases"]["start"] for d in docs] == ["fork"] * 3, [d["stderr_tail"] for d in docs]
    assert fresh["phases"]["start"] == "fresh"
    assert all(d["status"] == "step_limit" for d in [*docs, fresh]), [d["stderr_tail"] for d in docs]
    states = [_state(d) for d in docs]
    for s in states:
        assert s["torch_counter"] == 0 and s["helper_counter"] == 0  # nothing left on imported modules
        assert s["env"] is None and s["file"] is False  # no environment or file of an earlier run
        assert s["cwd_first_on_path"] and s["argv"] == ["--flag"] and s["tmpdir"] and s["main"] == "__main__"
        assert s["gc"][0] is True  # the collector runs in the script (the warm interpreter imports without it)
    assert states[0]["random"] == states[1]["random"] and states[0]["torch_rand"] == states[1]["torch_rand"]
    assert states[2]["torch_rand"] != states[0]["torch_rand"]  # the seed, not the server, decides
    # Every forked run hashes strings alike (the warm interpreter's PYTHONHASHSEED, fixed at its
    # start), so both sides of an A/B still do; a fresh run's follows the pair's seed.
    assert states[0].pop("hash") == states[1].pop("hash") == states[2].pop("hash")
    fresh_state = _state(fresh)
    fresh_state.pop("hash")
    assert fresh_state == states[0]  # otherwise a forked run sees what a fresh interpreter sees
    assert docs[0]["loss"] == docs[1]["loss"] == fresh["loss"]


@LINUX
def test_a_forked_run_is_ended_at_its_timeout_with_its_whole_group(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text("import subprocess, sys, time\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                      "open('child.pid', 'w').write(str(child.pid))\n"
                      "time.sleep(600)\n")
    doc = profile_runner(run_request(str(script), cwd=str(tmp_path), steps=2, warmup=0, timeout=20))
    assert doc["phases"]["start"] == "fork"  # the server is warm after the test above, or started now
    assert doc["status"] == "timeout" or doc["status"] == "crashed"
    pid = int((tmp_path / "child.pid").read_text())
    from tests.validate.test_process_lifetime import _wait_for

    assert _wait_for(lambda: not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2],
                     30), "the run's child outlived it"


@LINUX
def test_ctrl_c_during_a_forked_run_ends_its_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "pid"
    script = tmp_path / "sleep.py"
    script.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")
    real = warmstart._Server.receive
    calls = []

    def interrupted(self, deadline):  # type: ignore[no-untyped-def]
        calls.append(deadline)
        if len(calls) == 2:  # the run has started (the first answer was its pid): Ctrl-C now
            for _ in range(600):
                if pidfile.exists():
                    break
                time.sleep(0.05)
            raise KeyboardInterrupt
        return real(self, deadline)

    profile_runner(run_request(str(script), cwd=str(tmp_path), steps=2, warmup=0, timeout=5))  # warm
    pidfile.unlink(missing_ok=True)
    calls.clear()
    monkeypatch.setattr(warmstart._Server, "receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        profile_runner(run_request(str(script), cwd=str(tmp_path), steps=2, warmup=0, timeout=120))
    from tests.validate.test_process_lifetime import _wait_for

    pid = int(pidfile.read_text())
    assert _wait_for(lambda: not Path(f"/proc/{pid}").exists(), 30), "the forked run outlived Ctrl-C"
    monkeypatch.undo()
    again = profile_runner(run_request(str(script), cwd=str(tmp_path), steps=2, warmup=0, timeout=3))
    assert again["phases"]["start"] == "fork"  # the warm interpreter serves the next run


def test_each_version_has_its_own_compile_caches_shared_by_its_runs(tmp_path: Path, monkeypatch) -> None:
    for key in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):  # the user set none (another test in
        monkeypatch.delenv(key, raising=False)  # this worker may have left one in os.environ)
    (tmp_path / "train.py").write_text("print('a')\n")
    seen: list[dict[str, str]] = []

    def runner(request):  # type: ignore[no-untyped-def]
        seen.append(dict(request.env))
        return {}

    with Workspace(cwd=tmp_path) as ws:
        a = ws.add(ScriptVersion.read(tmp_path / "train.py"))
        b = ws.add(ScriptVersion(tmp_path / "train.py", b"print('b')\n"))
        run = ws.runner(runner)
        for path in (a, b, a, b):
            run(run_request(str(path)))
        run(run_request(str(a), env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": "/mine"}))
    dirs = [(e["TORCHINDUCTOR_CACHE_DIR"], e["TRITON_CACHE_DIR"]) for e in seen]
    assert dirs[0] == dirs[2] and dirs[1] == dirs[3] and dirs[0] != dirs[1]
    assert all(d.startswith(str(ws.root)) for pair in dirs[:4] for d in pair)
    assert dirs[4][0] == "/mine" and dirs[4][1] == dirs[0][1]  # a cache the user set is theirs


@LINUX
def test_a_prestarted_interpreter_is_the_one_the_first_run_forks_from(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuperf_rewrite.validate.run.profiling import prestart

    # A key of its own (servers are kept per environment for the process's lifetime).
    monkeypatch.setenv("GPUPERF_TEST_PRESTART", str(tmp_path))
    (tmp_path / "train.py").write_text("print('hello')\n")
    before = set(map(id, warmstart._SERVERS.values()))
    assert prestart(tmp_path / "train.py")
    started = [s for s in warmstart._SERVERS.values() if id(s) not in before]
    assert len(started) == 1 and not started[0].ready  # started, not waited for
    assert not prestart(tmp_path / "train.py")  # one is enough
    time.sleep(1.0)  # the tool's own work
    with Workspace(cwd=tmp_path) as ws:
        path = ws.add(ScriptVersion.read(tmp_path / "train.py"))
        doc = ws.runner(profile_runner)(run_request(str(path), steps=2, warmup=0, timeout=120))
    assert doc["phases"]["start"] == "fork" and started[0].runs == 1, doc["stderr_tail"]
    assert doc["phases"]["server_hidden_s"] >= 0.9  # the part of its start the tool did not wait for
    started[0].close()


@LINUX
def test_a_wrong_prestart_guess_is_ended_by_the_first_run_and_never_delays_exit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuperf_rewrite.validate.run.profiling import prestart

    (tmp_path / "train.py").write_text("print('hello')\n")
    assert prestart(tmp_path / "train.py", env={**os.environ, "GPUPERF_TEST_GUESS": "wrong"})
    guess = next(s for k, s in warmstart._SERVERS.items() if ("GPUPERF_TEST_GUESS", "wrong") in k[1])
    monkeypatch.setenv("GPUPERF_TEST_PRESTART", "other " + str(tmp_path))
    with Workspace(cwd=tmp_path) as ws:
        path = ws.add(ScriptVersion.read(tmp_path / "train.py"))
        doc = ws.runner(profile_runner)(run_request(str(path), steps=2, warmup=0, timeout=120))
    assert doc["phases"]["start"] == "fork"
    assert guess.proc.poll() is not None and guess not in warmstart._SERVERS.values()  # ended, unused
    # A server still importing torch is killed at exit, not waited for.
    assert prestart(tmp_path / "train.py", env={**os.environ, "GPUPERF_TEST_GUESS": "exit"})
    pending = next(s for k, s in warmstart._SERVERS.items() if ("GPUPERF_TEST_GUESS", "exit") in k[1])
    pending.close()
    assert pending.proc.returncode == -signal.SIGKILL  # killed while importing, not waited for
    warmstart._drop_unused_prestarts()


def test_prestart_does_nothing_when_the_runs_start_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuperf_rewrite.validate.run.profiling import prestart

    (tmp_path / "train.py").write_text("import os\nos.environ['OMP_NUM_THREADS'] = '1'\n")
    count = len(warmstart._SERVERS)
    assert not prestart(tmp_path / "train.py")
    assert not prestart(tmp_path / "train.py", launcher="torchrun")
    (tmp_path / "train.py").write_text("print('hello')\n")
    monkeypatch.setenv(warmstart.FORK_ENV, "0")
    assert not prestart(tmp_path / "train.py")
    assert len(warmstart._SERVERS) == count
