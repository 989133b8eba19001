"""``--update-snapshots``: rewrite the rule fixtures' snapshots (tests/rules/test_rule_fixtures.py)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-snapshots", action="store_true", default=False,
                     help="rewrite tests/rules/fixtures/*/*.snap from the rules' current output")
