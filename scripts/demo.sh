#!/usr/bin/env bash
# `make demo`: lint a bundled slow training script and show the patch; then the whole product on
# CPU: rewrite the input-bound fixture in a temporary git repository with --apply (A/B table,
# verdict) and show the resulting commit and its git note.
set -euo pipefail
BIN="$(cd "${1:-.venv/bin}" && pwd)"
FIXTURE="${DEMO_FIXTURE:-fixtures/cnn_item_logging.py}"
echo "== Findings in $FIXTURE"
"$BIN/gpuperf-rewrite" "$FIXTURE" --select ALL || true
echo
echo "== The patch (safe and unsafe fixes): gpuperf-rewrite $FIXTURE --diff --unsafe-fixes"
"$BIN/gpuperf-rewrite" "$FIXTURE" --diff --unsafe-fixes || true

# --- --apply: needs torch, scipy and GitPython (make test installs them) --------------------
if ! "$BIN/python" -c "import torch, scipy, git" 2>/dev/null; then
    echo
    echo "== Skipping the --apply demo: it needs torch, scipy and GitPython (run \`make test\` once)."
    exit 0
fi
APPLY_FIXTURE="$(pwd)/fixtures/input_bound.py"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpuperf-demo.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
cp "$APPLY_FIXTURE" train.py
git init -q
git config user.name "gpuperf demo"
git config user.email "demo@example.invalid"
git config commit.gpgsign false
git add train.py
git commit -q -m "Input-bound training script"
echo
echo "== In a temporary repository ($WORK): findings in train.py"
"$BIN/gpuperf-rewrite" train.py || true
echo
echo "== gpuperf-rewrite train.py --apply (rewrite, A/B-validate on CPU, commit if faster)"
set +e
"$BIN/gpuperf-rewrite" train.py --apply --select GP201,GP202 ${DEMO_AB_OPTS:---runs 6 --steps 12 --warmup 2} \
    -- --size small --device cpu
rc=$?
set -e
echo
echo "== git log"
git log --stat -n 2 | cat
if [ "$rc" -eq 0 ]; then
    echo
    echo "== The note on the new commit: git notes --ref gpuperf show HEAD (summary)"
    git notes --ref gpuperf show HEAD | "$BIN/python" -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    ab = r["ab"]
    print(json.dumps({"key": r["key"], "rules": r["rules"], "verdict": ab["verdict"],
                      "speedup": round(ab["speedup"], 3), "ci95": [round(x, 3) for x in ab["ci95"]],
                      "p_value": ab["p_value"], "a_samples": ab["a"]["samples"],
                      "b_samples": ab["b"]["samples"], "loss_check": ab["loss_check"]["status"],
                      "device": r["fingerprint"]["device_name"]}, indent=2))'
else
    echo "(--apply exited $rc: the rewrite was not committed; on a busy machine the gain can drown in noise)"
fi
