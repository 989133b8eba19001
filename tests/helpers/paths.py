"""Where the tests find the repository's files, wherever the test module sits under tests/."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository root
FIXTURES = ROOT / "fixtures"
HELPERS = Path(__file__).resolve().parent  # tests/helpers: the subprocess drivers live here
