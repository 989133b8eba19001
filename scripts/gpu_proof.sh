#!/usr/bin/env bash
# `make gpu-proof`: run scripts/gpu_proof.py with a Python that can import the project.
#
# A Python that has it (a dev venv, or `pip install -e ".[validate]"` into the environment that
# has a CUDA torch) runs the proof as is. One that lacks it, like the lent GPU machines (torch,
# scipy, click and pyyaml, but no libcst, GitPython or project, and no network), gets it from the
# wheels in .whl/ that `make gpu-wheels` fetched and built: installed with pip --no-index into a
# private folder on PYTHONPATH, never from an index, leaving the environment itself untouched.
#   PYTHON=python3 bash scripts/gpu_proof.sh --out bench-results/gpu-proof [--time-limit 540]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
case "$PY" in /*) ;; */*) PY="$PWD/$PY" ;; esac  # still valid after the cd / below
# GitPython refuses to import without a git binary unless told to be quiet; without git the proof
# runs --apply with --no-commit (gpu_proof_stages._scratch_repo).
export GIT_PYTHON_REFRESH="${GIT_PYTHON_REFRESH:-quiet}"
NEEDS="import gpuperf_rewrite.validate.apply, gpuperf_rewrite.runtime, libcst, git, scipy, torch"

# From /: in the repository root the source folder gpuperf_rewrite/ (without runtime/ and rules/)
# would shadow an installed package.
importable() { (cd / && "$PY" -c "$NEEDS") 2>"${1:-/dev/null}"; }

if ! importable; then
    shopt -s nullglob
    wheels=(.whl/gpuperf_rewrite-*.whl .whl/libcst-*.whl .whl/gitpython-*.whl .whl/gitdb-*.whl .whl/smmap-*.whl)
    if [ "${#wheels[@]}" -eq 0 ]; then
        echo "error: $PY cannot import the project and .whl/ holds no wheels: run 'make gpu-wheels' where pip" \
             "can reach PyPI and bring .whl/ here, or 'pip install -e \".[validate]\"' into this environment" >&2
        exit 2
    fi
    site="${TMPDIR:-/tmp}/gpu-proof-site"
    rm -rf "$site"
    echo "installing ${wheels[*]} into $site (pip --no-index)" >&2
    "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --target "$site" "${wheels[@]}"
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    if ! importable /dev/stderr; then
        echo "error: $PY still cannot import what the proof needs (above), with $site on PYTHONPATH" >&2
        exit 2
    fi
fi
exec "$PY" scripts/gpu_proof.py "$@"
