"""Run --apply with the fake runner and rewriter in a subprocess (for SIGINT/SIGKILL tests).

usage: PYTHONPATH=<repository root> python tests/helpers/apply_driver.py SCRIPT CODES [RUNS]

CODES is ``X1,X2`` (every file) or ``main.py=X2;engine.py=X1`` (per file of a project).
"""

import sys

from gpuperf_rewrite.validate.judge.abtest import ABConfig
from gpuperf_rewrite.validate.apply import run_apply
from tests.helpers.abfakes import FakeRunner, fake_rewriter, project_rewriters


def main() -> int:
    script = sys.argv[1]
    if "=" in sys.argv[2]:
        per_file = dict(part.split("=", 1) for part in sys.argv[2].split(";"))
        fixes = {"rewriter_for": project_rewriters({f: tuple(c.split(",")) for f, c in per_file.items()})}
    else:
        fixes = {"rewriter": fake_rewriter(tuple(sys.argv[2].split(",")))}
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    cfg = ABConfig(runs=runs, max_runs=runs, min_runs=runs, steps=5, warmup=1, bootstrap_resamples=200)

    def progress(ev):
        if ev.phase == "start":
            print(f"RUN {ev.run}", file=sys.stderr, flush=True)

    return run_apply(script, script_args=[], config=cfg, runner=FakeRunner(), progress=progress, **fixes)


if __name__ == "__main__":
    sys.exit(main())
