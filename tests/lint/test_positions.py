"""Finding positions (gpuperf_rewrite/lint/positions.py) are LibCST's PositionProvider ranges,
for every node of the lint corpus (scripts/lint_snapshot.py's files) and for the layouts that
make positions hard (CRLF and lone CR newlines, tabs, no trailing newline, decorators, comments,
semicolons)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gpuperf_rewrite.lint.positions import call_lines, node_spans, start_lines
from tests.helpers.paths import ROOT

SOURCES = sorted(p for d in ("fixtures", "tests/rules/data", "tests/lint/data")
                 for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)
LAYOUTS = {
    "crlf": "import torch\r\n\r\n@dec\r\ndef f(x):  # c\r\n    return (x +\r\n            1)\r\n",
    "lone-cr": "import torch\rx = [1,\r  2]; y = 3\r",
    "no-trailing-newline": "import torch\nif x:\n\tprint(torch.ones(1)\n\t      .item())",
    "empty": "",
    "comments-only": "# a\n\n# b\n",
    "strings": 's = """a\nb\r\nc""" + f"{x!r}\\n"\nt = (\'\'\'\n\'\'\')\n',
}


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    nodes: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    module.visit(Collect())
    return nodes


def _check(text: str) -> int:
    module = cst.parse_module(text)
    nodes = _all_nodes(module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    got = node_spans(module, nodes)
    lines = start_lines(module)  # every node's first line, in one generation: the same lines
    for node in nodes:
        rng = expected[node]
        assert got[node] == (rng.start.line, rng.start.column, rng.end.line, rng.end.column), \
            module.code_for_node(node)
        assert lines[node] == rng.start.line, module.code_for_node(node)
    return len(nodes)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layouts_match_position_provider(name: str) -> None:
    assert _check(LAYOUTS[name])


def test_every_corpus_node_matches_position_provider() -> None:
    assert len(SOURCES) > 10
    assert sum(_check(path.read_text(encoding="utf-8")) for path in SOURCES) > 10_000


def test_only_the_nodes_asked_for_and_each_once() -> None:
    module = cst.parse_module("import torch\nx = torch.ones(1)\nprint(x.item())\n")
    call = module.body[2].body[0].value
    assert node_spans(module, [call, call]) == {call: (3, 0, 3, 15)}
    assert node_spans(module, []) == {}


@pytest.mark.parametrize("name", ["crlf", "no-trailing-newline", "strings"])
def test_a_few_nodes_asked_alone_match_position_provider(name: str) -> None:
    # Generation stops once the nodes asked about are done: each node alone (an early one, a
    # statement whose range is hoisted from its body, the last one) still gets its full range.
    module = cst.parse_module(LAYOUTS[name])
    nodes = _all_nodes(module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for node in nodes:
        rng = expected[node]
        assert node_spans(module, [node])[node] == (rng.start.line, rng.start.column, rng.end.line,
                                                   rng.end.column), module.code_for_node(node)


def test_generation_stops_after_the_last_node_asked_about(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuperf_rewrite.lint import positions

    module = cst.parse_module("import torch\nx = torch.ones(1)\n" + "y = 1\n" * 200)
    first = module.body[0]
    generated: list[int] = []
    real = positions._positions_at
    monkeypatch.setattr(positions, "_positions_at", lambda toks, idx: (generated.append(len(toks)), real(toks, idx))[1])
    assert node_spans(module, [first])[first] == (1, 0, 1, 12)
    assert generated and generated[0] < 20  # the tokens of the first line, not of the 200 after it


def test_call_lines_match_position_provider_on_every_corpus_call() -> None:
    # The facts' lines of calls come from Python's parser, matched to LibCST's calls in source order.
    from gpuperf_rewrite.rules.analysis.syntax.tree import index

    matched = 0
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        module = cst.parse_module(text)
        calls = index(module)[1].get(cst.Call, [])
        got = call_lines(text, calls)
        if got is None:
            continue
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        assert all(got[c] == expected[c].start.line for c in calls), path
        matched += len(calls)
    assert matched > 2_000


def test_call_lines_give_up_where_they_could_be_wrong() -> None:
    # A lone carriage return (Python's parser and LibCST count its lines apart): the caller generates code.
    from gpuperf_rewrite.rules.analysis.syntax.tree import index

    module = cst.parse_module("x = f(1)\rg()\r")
    assert call_lines(module.code, index(module)[1][cst.Call]) is None
    # A count or a name apart (the calls handed are not the module's): None, never a shifted line.
    other = cst.parse_module("h(1)\nk(2)\n")
    assert call_lines("f(1)\ng(2)\n", index(other)[1][cst.Call]) is None
    assert call_lines("f(1)\n", index(other)[1][cst.Call]) is None


def test_call_lines_place_calls_in_f_strings_and_chains() -> None:
    from gpuperf_rewrite.rules.analysis.syntax.tree import index

    text = "print(f'{g(1)}',\n      a(2).b(\n  c()))\n@dec(3)\ndef f(x=h()):\n    return (\n        k(x))\n"
    module = cst.parse_module(text)
    calls = index(module)[1][cst.Call]
    got = call_lines(text, calls)
    assert got is not None and len(got) == 8
    assert got == {c: start_lines(module)[c] for c in calls}
