#!/usr/bin/env bash
# `make gpu-proof`: run scripts/gpu_proof.py with a Python that can import the project.
#
# A Python that has it (a dev venv, or `pip install -e ".[validate]"` into the environment that
# has a CUDA torch) runs the proof as is. One that lacks it, like the lent GPU machines (torch,
# scipy, click and pyyaml, but no libcst, GitPython or project, and no network), gets it from the
# wheels in .whl/ that `make gpu-wheels` fetched and built: installed with pip --no-index into a
# private folder on PYTHONPATH, never from an index, leaving the environment itself untouched.
#   PYTHON=python3 bash scripts/gpu_proof.sh --out bench-results/gpu-proof [--budget 510]
#   PYTHON=python3 bash scripts/gpu_proof.sh --install-only      # the install and import check alone
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
case "$PY" in /*) ;; */*) PY="$PWD/$PY" ;; esac  # still valid after the cd / below
# GitPython refuses to import without a git binary unless told to be quiet; without git the proof
# runs --apply with --no-commit (gpu_proof_stages._scratch_repo).
export GIT_PYTHON_REFRESH="${GIT_PYTHON_REFRESH:-quiet}"
# What the wheels must provide (torch is the machine's own: gpu_proof.py says so if it is missing).
NEEDS="import gpuperf_rewrite.validate.apply, gpuperf_rewrite.runtime, libcst, git, scipy"
# The wheels, by name: with --find-links pip takes the one version of each that .whl/ holds.
WHEELS="gpuperf-rewrite libcst GitPython gitdb smmap"
INSTALL_ONLY=0
if [ "${1:-}" = "--install-only" ]; then INSTALL_ONLY=1; shift; fi

# From /: in the repository root the source folder gpuperf_rewrite/ (without runtime/ and rules/)
# would shadow an installed package.
importable() { (cd / && "$PY" -c "$NEEDS") 2>"${1:-/dev/null}"; }

if ! importable; then
    if ! ls .whl/gpuperf_rewrite-*.whl >/dev/null 2>&1; then
        echo "error: $PY cannot import the project and .whl/ holds no project wheel: run 'make gpu-wheels'" \
             "where pip can reach PyPI and bring .whl/ here, or 'pip install -e \".[validate]\"' into this environment" >&2
        exit 2
    fi
    site="${TMPDIR:-/tmp}/gpu-proof-site"
    rm -rf "$site"
    t0=$(date +%s.%N)
    # Offline: --no-index, only .whl/; --no-deps: the rest (click, pyyaml, scipy, numpy) is the machine's.
    "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links .whl --no-deps --no-compile \
        --target "$site" $WHEELS
    export GPU_PROOF_INSTALL_S
    GPU_PROOF_INSTALL_S=$(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $t0}")
    echo "installed $WHEELS from .whl/ into $site in ${GPU_PROOF_INSTALL_S} s (pip --no-index)" >&2
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    if ! importable /dev/stderr; then
        echo "error: $PY still cannot import what the proof needs (above), with $site on PYTHONPATH" >&2
        exit 2
    fi
fi
if [ "$INSTALL_ONLY" = 1 ]; then
    (cd / && "$PY" -c "import gpuperf_rewrite, libcst, git; print('importable:', gpuperf_rewrite.__file__, 'libcst', libcst.__version__ if hasattr(libcst, '__version__') else '?', 'GitPython', git.__version__)")
    exit 0
fi
exec "$PY" scripts/gpu_proof.py "$@"
