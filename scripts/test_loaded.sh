#!/usr/bin/env bash
# `make test-loaded`: the suite on a busy machine, as a CI runner shared by several jobs is.
# BUSY processes spin (default 4, twice the cores of the 2-core CI machine) for as long as the
# command runs; they are ended with it, whatever way it ends (exit, failure, Ctrl-C).
#   scripts/test_loaded.sh [COMMAND...]      (default: make test)
set -u
BUSY=${BUSY:-4}
PY=${PYTHON:-python3}
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq "$BUSY"); do
  "$PY" -c "while True: pass" &
  pids+=("$!")
done
echo "test-loaded: $BUSY busy processes (${pids[*]}); load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >&2
if [ "$#" -eq 0 ]; then set -- make test; fi
"$@"
rc=$?
echo "test-loaded: exit $rc; load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >&2
exit "$rc"
