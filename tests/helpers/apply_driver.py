"""Run --apply with the fake runner and rewriter in a subprocess (for SIGINT/SIGKILL tests).

usage: PYTHONPATH=<repository root> python tests/helpers/apply_driver.py SCRIPT CODES [RUNS]
"""

import sys

from gpuperf_rewrite.validate.judge.abtest import ABConfig
from gpuperf_rewrite.validate.apply import run_apply
from tests.helpers.abfakes import FakeRunner, fake_rewriter


def main() -> int:
    script, codes = sys.argv[1], tuple(sys.argv[2].split(","))
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    cfg = ABConfig(runs=runs, max_runs=runs, min_runs=runs, steps=5, warmup=1, bootstrap_resamples=200)

    def progress(ev):
        if ev.phase == "start":
            print(f"RUN {ev.run}", file=sys.stderr, flush=True)

    return run_apply(script, script_args=[], config=cfg, runner=FakeRunner(), rewriter=fake_rewriter(codes),
                     progress=progress)


if __name__ == "__main__":
    sys.exit(main())
