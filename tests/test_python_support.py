"""One supported Python range, said once and held: pyproject's ``requires-python`` is what the
README says, every module of the package parses as that oldest version's grammar, and a module
new in a later standard library is imported only with its fallback declared as a dependency."""

from __future__ import annotations

import ast
import re
import tomllib

from tests.helpers.paths import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCES = [ROOT / "gpuperf_rewrite", ROOT / "rules", ROOT / "runtime"]
# standard-library modules newer than 3.10 -> the PyPI package that stands in for it there
NEWER_STDLIB = {"tomllib": "tomli"}


def _oldest() -> tuple[int, int]:
    spec = PYPROJECT["project"]["requires-python"]
    major, minor = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec).groups()
    return int(major), int(minor)


def test_readme_says_what_pyproject_requires():
    major, minor = _oldest()
    readme = (ROOT / "README.md").read_text()
    said = set(re.findall(r"Python (\d+\.\d+)\+", readme))
    assert said == {f"{major}.{minor}"}, said


def test_every_module_parses_as_the_oldest_supported_python():
    oldest = _oldest()
    bad = []
    for src in SOURCES:
        for path in sorted(src.rglob("*.py")):
            try:
                ast.parse(path.read_text(), str(path), feature_version=oldest)
            except SyntaxError as exc:
                bad.append(f"{path.relative_to(ROOT)}:{exc.lineno}: {exc.msg}")
    assert not bad, "\n".join(bad)


def test_newer_stdlib_modules_have_their_fallback_declared():
    deps = PYPROJECT["project"]["dependencies"]
    for src in SOURCES:
        for path in sorted(src.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
                for name in names:
                    if name in NEWER_STDLIB:
                        fallback = NEWER_STDLIB[name]
                        assert any(d.startswith(fallback) and "python_version < '3.11'" in d for d in deps), \
                            f"{path.relative_to(ROOT)} imports {name}: declare {fallback} for Python < 3.11"
