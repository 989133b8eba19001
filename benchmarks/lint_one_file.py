"""One file of a large first-party package linted alone, cold, as the pre-commit hook or an
editor lints it (issue 34): CPU time, and how many of the user's modules the run read (imports
scanned, ``project_index.READS``) and analysed for their facts (``project_facts.COMPUTED``,
each (module, reading) once): counts that do not depend on the machine's load.

    python benchmarks/lint_one_file.py /work/trees/candidates/huggingface__diffusers/examples/text_to_image/train_text_to_image.py

Runs ``gpuperf-rewrite check --no-cache -j 1 FILE`` in this process from the file's folder;
the findings go to ``--output`` (JSON) to compare two trees' runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--output", help="where the JSON findings go (default: a temporary file)")
    args = ap.parse_args()
    from gpuperf_rewrite.cli import main as cli
    from gpuperf_rewrite.lint import project_facts, project_index

    path = os.path.abspath(args.file)
    output = os.path.abspath(args.output) if args.output else os.path.join(tempfile.mkdtemp(), "findings.json")
    os.chdir(os.path.dirname(path))
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        cli(["check", "--no-cache", "-j", "1", "--output-format", "json", "-o", output, path])
    except SystemExit as exc:
        rc = exc.code
    else:
        rc = 0
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{path}: CPU {cpu:.1f} s, wall {wall:.1f} s (load {os.getloadavg()[0]:.1f}), peak {peak:.0f} MB, rc {rc}; "
          f"modules read {len(project_index.READS)}, facts computed {sum(project_facts.COMPUTED.values())} "
          f"for {len(project_facts.COMPUTED)} modules", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
