"""A fake runner for A/B tests: the script's ``# fake:`` line says how it behaves.

    # fake: speed=100 noise=0.02 loss=1.0 status=completed sleep=0

speed is samples/s; each run draws speed * (1 + noise * N(0, 1)) from a seeded generator, so a
test is deterministic. loss scales the loss trajectory (1.0 = the reference trajectory);
lossnoise=0.05 moves each run's trajectory by a factor drawn from the run's *seed* (so the A and
B of one pair, which share a seed, draw the same factor). stop=N ends the script by itself after N
measured steps; nobatch=1 reports no batch size (steps/s only); noloss=1 records no loss;
skip=3,4 marks those steps as skipped by GradScaler (their loss is non-finite). modules=engine,utils
reads the ``# fake:`` line of each named module beside the script (in the run's mirror, so the
version under test): its speed (over 100) multiplies the script's, its loss scales the loss.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from gpuperf_rewrite.validate.run.runs import RunRequest

FP = {"device": "cpu", "device_name": "fake", "torch": "x", "cuda": None, "python": "3", "cpu_count": 2,
      "platform": "test", "env_hash": "e" * 64}


def spec(path: str | Path) -> dict[str, str]:
    for line in Path(path).read_text().splitlines():
        if line.startswith("# fake:"):
            s = dict(kv.split("=", 1) for kv in line[len("# fake:"):].split())
            for name in filter(None, s.get("modules", "").split(",")):
                m = spec(Path(path).with_name(f"{name}.py"))
                s["speed"] = str(float(s.get("speed", 100)) * float(m.get("speed", 100)) / 100)
                s["loss"] = str(float(s.get("loss", 1.0)) * float(m.get("loss", 1.0)))
            return s
    return {}


def fake_loss(s: dict[str, str], seed: int, steps: int, warmup: int) -> list[float | None]:
    scale = float(s.get("loss", 1.0))
    noise = float(s.get("lossnoise", 0.0))
    rng = random.Random(seed)
    factor = 1 + noise * rng.gauss(0, 1)
    loss: list[float | None] = [2.0 * 0.95 ** i * scale * factor * (1 + noise * rng.gauss(0, 1))
                                for i in range(warmup + steps)]
    for i in skipped(s):
        if i < len(loss):
            loss[i] = None  # the shim writes a non-finite loss as null (and lists it)
    return loss


def skipped(s: dict[str, str]) -> list[int]:
    return [int(v) for v in s["skip"].split(",")] if s.get("skip") else []


class FakeRunner:
    def __init__(self, seed: int = 0, env_hash: str = "e" * 64) -> None:
        self.rng = random.Random(seed)
        self.calls: list[str] = []
        self.seeds: list[int] = []
        self.env_hash = env_hash
        self.counts: dict[str, int] = {}

    def __call__(self, request: RunRequest) -> dict[str, Any]:
        script, steps, warmup, seed = request.script, request.steps, request.warmup, request.seed
        s = spec(script)
        self.calls.append(str(script))
        self.seeds.append(seed)
        if float(s.get("sleep", 0)):
            time.sleep(float(s["sleep"]))
        status = s.get("status", "step_limit")
        speed = float(s.get("speed", 100)) * (1 + float(s.get("noise", 0.02)) * self.rng.gauss(0, 1))
        if "fast_if" in s:  # a real rewrite (by the engine) made this text appear (or a module's): 1.5x faster
            files = [Path(script)] + [Path(script).with_name(f"{m}.py") for m in filter(None, s.get("modules", "").split(","))]
            body = "".join(ln for f in files for ln in f.read_text().splitlines(True) if not ln.startswith("# fake:"))
            speed *= 1.5 if s["fast_if"] in body else 1.0
        if "seq" in s:  # explicit throughputs, cycled: seq=100,102,98
            seq = [float(v) for v in s["seq"].split(",")]
            k = self.counts.get(str(script), 0)
            self.counts[str(script)] = k + 1
            speed = seq[k % len(seq)]
        measured = steps
        if "stop" in s:  # the script ends by itself after this many measured steps
            measured, status = min(steps, int(s["stop"])), "completed"
        ok = status in ("completed", "step_limit")
        loss = fake_loss(s, seed, measured, warmup) if ok and not s.get("noloss") else []
        batch = None if s.get("nobatch") else 32
        return {
            "status": status, "exit_code": 0 if ok else 1, "stderr_tail": "" if ok else "RuntimeError: boom",
            "error": None if ok else "boom", "measured_steps": measured if ok else 0, "batch_size": batch,
            "ended_early": status != "step_limit" and measured < steps,
            "samples_per_s": speed if ok and batch else None, "steps_per_s": speed / 32 if ok else None,
            "wall_time_s": measured * 32 / speed, "memory": {"peak_allocated_bytes": None,
                                                             "peak_rss_bytes": 100 << 20},
            "loss": loss, "loss_nonfinite_steps": [i for i in skipped(s) if i < len(loss)],
            "amp": {"gradscaler": bool(skipped(s)), "skipped_steps": [i for i in skipped(s) if i < len(loss)]},
            "fingerprint": {**FP, "env_hash": self.env_hash, "script_sha256": "s" * 64},
        }


def fake_script(path: Path, **kv: Any) -> Path:
    path.write_text("# fake: " + " ".join(f"{k}={v}" for k, v in kv.items()) + "\nprint('hi')\n")
    return path


# -- --apply helpers ----------------------------------------------------------------------------

# Fake "rules" for --apply tests: each rewrites the `# fake:` line of a script (None: nothing to fix).
FAKE_FIXES = {
    "X1": lambda s: {**s, "speed": str(float(s.get("speed", 100)) * 1.5)},  # a real speedup
    "X2": lambda s: {**s, "speed": str(float(s.get("speed", 100)) * 1.0)},  # neutral
    "SLOW": lambda s: {**s, "speed": str(float(s.get("speed", 100)) * 0.6)},  # e.g. a sleep in the loop
    "LOSS": lambda s: {**s, "loss": "1.5"},  # changes what the model learns
}
NOOPS = tuple(f"N{i}" for i in range(1, 7))  # six fixes that change nothing measurable
FAKE_FIXES.update({c: (lambda s: dict(s)) for c in NOOPS})


def fake_rewriter(available: tuple[str, ...]):
    def rewrite(data: bytes, codes):
        chosen = [c for c in available if codes is None or c in codes]
        lines = data.decode().splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.startswith("# fake:"):
                s = dict(kv.split("=", 1) for kv in line[len("# fake:"):].split())
                acted: list[str] = []
                while True:  # as the engine: passes until none acts (a fix may need another's change)
                    before = len(acted)
                    for c in chosen:  # a fix returning None finds nothing to fix (yet)
                        fixed = None if c in acted else FAKE_FIXES[c](s)
                        if fixed is not None:
                            s = fixed
                            acted.append(c)
                    if len(acted) == before:
                        break
                chosen = [c for c in chosen if c in acted]
                lines[i] = "# fake: " + " ".join(f"{k}={v}" for k, v in s.items()) + "\n"
        new = "".join(lines).encode()
        if chosen:
            new += ("# fixed by " + ",".join(chosen) + "\n").encode()
        return (new if new != data else None), {c: 1 for c in chosen}

    return rewrite


def project_rewriters(per_file: dict[str, tuple[str, ...]]):
    """``rewriter_for`` for ``run_apply``: each file (by name) gets :func:`fake_rewriter` with its
    own fixes; a file not named has none."""
    def rewriter_for(file: Path, entry: Path):
        return fake_rewriter(per_file.get(Path(file).name, ()))

    return rewriter_for


def git_repo(path: Path, files: dict[str, str]) -> Any:
    """A repository with ``files`` committed, and a test identity."""
    import git

    repo = git.Repo.init(path)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Test")
        cw.set_value("user", "email", "test@example.com")
        cw.set_value("commit", "gpgsign", "false")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    repo.index.add(list(files))
    repo.index.commit("initial")
    return repo


def lose_object(repo: Any, commit: str, rel: str) -> None:
    """Delete the object of ``rel`` at ``commit`` (as in a partial or pruned clone): that
    commit's version of the file cannot be checked out any more."""
    import os

    sha = repo.git.rev_parse(f"{commit}:{rel}")
    obj = Path(repo.git_dir) / "objects" / sha[:2] / sha[2:]
    os.chmod(obj, 0o644)
    obj.unlink()


def repo_state(repo: Any) -> dict[str, Any]:
    """Everything --apply may touch: HEAD, refs, notes, index, status, working files."""
    root = Path(repo.working_tree_dir)
    return {
        "head": repo.git.rev_parse("HEAD"),
        "refs": repo.git.for_each_ref(),
        "index": repo.git.ls_files("-s"),
        "status": repo.git.status("--porcelain", "--untracked-files=all"),
        "files": {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
                  if p.is_file() and ".git" not in p.relative_to(root).parts},
    }


def apply_with_fakes(path: Path, codes: tuple[str, ...] | dict[str, tuple[str, ...]], *, runner: Any = None,
                     config: Any = None, progress: Any = None, gains_on: Any = None, **options: Any) -> tuple[int, str]:
    """``run_apply`` on a :class:`FakeRunner` (or ``runner``) and :func:`fake_rewriter` (``codes``
    per file name: :func:`project_rewriters`), with a small fast A/B configuration unless ``config``
    is given; ``options`` are ``ApplyOptions`` fields. Returns the exit code and everything it printed."""
    from gpuperf_rewrite.validate.judge.abtest import ABConfig
    from gpuperf_rewrite.validate.apply import ApplyOptions, run_apply

    out: list[str] = []
    config = config or ABConfig(runs=6, max_runs=6, min_runs=4, steps=5, warmup=1, bootstrap_resamples=300)
    fixes = {"rewriter_for": project_rewriters(codes)} if isinstance(codes, dict) else {"rewriter": fake_rewriter(codes)}
    rc = run_apply(str(path), runner=runner or FakeRunner(), config=config, progress=progress, gains_on=gains_on,
                   echo=lambda msg="", err=False, **_: out.append(str(msg)), options=ApplyOptions(**options), **fixes)
    return rc, "\n".join(out)


# A training script whose step time is dominated by a 5 ms sleep: steady enough for a few runs
# per side to decide on a busy machine (tests/validate/test_ab_e2e.py, test_regress_paired.py).
SLEEPY_TRAIN = """import time
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(1000):
    time.sleep(0.005)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
