#!/usr/bin/env bash
# `make demo`: lint a bundled slow training script, show the patch, and check the patch still runs.
set -euo pipefail
BIN="${1:-.venv/bin}"
FIXTURE="${DEMO_FIXTURE:-fixtures/cnn_item_logging.py}"
echo "== Findings in $FIXTURE"
"$BIN/gpuperf-rewrite" "$FIXTURE" --select ALL || true
echo
echo "== The patch (safe and unsafe fixes): gpuperf-rewrite $FIXTURE --diff --unsafe-fixes"
"$BIN/gpuperf-rewrite" "$FIXTURE" --diff --unsafe-fixes || true
