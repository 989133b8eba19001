"""Rewrite the rule fixtures' snapshots (tests/rules/fixtures/<CODE>/*.snap) from the rules'
current output, for review with ``git diff``: the same as
``python -m pytest tests/rules/test_rule_fixtures.py --update-snapshots``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "tests/rules/test_rule_fixtures.py",
                              "-k", "snapshot", "--update-snapshots", *sys.argv[1:]], cwd=ROOT))
