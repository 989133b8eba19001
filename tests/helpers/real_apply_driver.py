"""Run --apply on SCRIPT with the real runtime shim (for the process-lifetime tests).

usage: python tests/helpers/real_apply_driver.py SCRIPT

The rewrite only appends a comment; runs are long (many steps), so the test can kill the driver
while a training run is in progress. Prints ``RUN k`` on stderr as each run starts.
"""

import sys

from gpuperf_rewrite.validate.judge.abtest import ABConfig
from gpuperf_rewrite.validate.apply import run_apply


def rewrite(data: bytes, codes):
    return data + b"\n# rewritten\n", {"GPX": 1}


def progress(ev) -> None:
    if ev.phase == "start":
        print(f"RUN {ev.run}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    cfg = ABConfig(runs=5, max_runs=5, steps=100000, warmup=1, timeout=300)
    sys.exit(run_apply(sys.argv[1], rewriter=rewrite, config=cfg, progress=progress))
