"""``python -m gpuperf_rewrite.runtime [options] (SCRIPT | -m MODULE [FILE]) [-- SCRIPT_ARGS...]``

The child side of ``gpuperf-rewrite profile``; also usable by hand. argparse only: this must
run where click and libcst are not installed. ``-m MODULE`` runs a module as ``python -m MODULE``
does (package-relative imports work); with FILE, the module must be that file, and the directory
it is imported from (FILE's package root) goes first on ``sys.path``: how a scratch copy of a
package is run instead of the checkout's.
"""

from __future__ import annotations

import argparse
import os
import sys


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    script_args: list[str] = []
    if "--" in argv:  # everything after the first -- belongs to the script, untouched
        i = argv.index("--")
        argv, script_args = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(prog="python -m gpuperf_rewrite.runtime")
    p.add_argument("script", nargs="?", default=None,
                   help="the script; with -m, the module's file (optional)")
    p.add_argument("-m", "--module", default=None, help="run this module as `python -m` does")
    p.add_argument("--out", required=True, help="where to write the JSON document")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", default=None, help="directory for a torch.profiler trace")
    p.add_argument("--rank-suffix", action="store_true",
                   help="write OUT.rank{RANK}.json (set by the runner under torchrun)")
    ns = p.parse_args(argv)
    if ns.steps < 1 or ns.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    if ns.script is None and ns.module is None:
        p.error("give a SCRIPT or -m MODULE")
    return ns, script_args


def main(argv: list[str] | None = None) -> int:
    ns, script_args = parse(sys.argv[1:] if argv is None else argv)
    out = os.path.abspath(ns.out)  # the script may chdir; the result still goes where asked
    if ns.rank_suffix:
        out = f"{out}.rank{os.environ.get('RANK', '0')}.json"
    from .process.session import run  # imports torch: after argument errors are reported

    return run(ns.script, script_args, out=out, steps=ns.steps, warmup=ns.warmup,
               seed=ns.seed, trace_dir=ns.trace, module=ns.module)


if __name__ == "__main__":
    from .process.session import exit_soon

    exit_soon(main())
