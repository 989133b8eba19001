"""Where the nodes that findings point at are in the file: the ranges LibCST's
``PositionProvider`` gives (syntactic start and end; 1-based lines, 0-based columns), for a
fraction of its cost.

``PositionProvider`` builds two position objects per node and splits every token on newlines
while it generates the module's code; on a training script that is the largest cost after
LibCST's import and the rules. Here the code generation records each node's span as token
indexes (two ints), and only the spans asked about become lines and columns, in one pass over the
tokens that stops at the last one needed. The rules of the original are kept exactly: a node's
range may be hoisted from its children's (``record_syntactic_position``), the first range
recorded for a node wins, and a token's newlines are counted token by token
(``\\r\\n``, ``\\r`` or ``\\n``). tests/lint/test_positions.py compares every node of the corpus
with ``PositionProvider``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState

Span = tuple[int, int, int, int]  # line, column, end line, end column
_NEWLINE = re.compile(r"\r\n?|\n")


class _AllFound(Exception):
    """Every node asked about has its range: code generation stops here."""


@dataclass
class _SpanState(CodegenState):
    """Code generation that records ``node -> (first token, end token)`` indexes."""

    spans: dict[cst.CSTNode, tuple[int, int]] = field(default_factory=dict)
    starts: list[int] = field(default_factory=list)
    # The nodes asked about not generated yet: once none is left, the rest of the module's code
    # is not generated (a node's range is final when its own generation ends: LibCST records a
    # syntactic range only for the node being generated). Empty: the whole module.
    pending: set[int] = field(default_factory=set)  # their ids: a node's hash is a Python call
    done: bool = False

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        if node not in self.spans:  # a syntactic range recorded inside wins
            self.spans[node] = (start, len(self.tokens))
        if id(node) in self.pending:
            self.pending.discard(id(node))
            if not self.pending:
                self.done = True
                raise _AllFound

    def pop_trailing_newline(self) -> None:
        # PositionProvider's state drops the token but not the position it reached: keep the
        # token so that the module's own end is counted the same way.
        pass

    @contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> Iterator[None]:
        start = len(self.tokens)
        try:
            yield
        finally:
            if not self.done:  # once generation stops early, the ranges still open are not needed
                end = len(self.tokens)
                if start_node is not None:
                    start = self.spans[start_node][0]
                if end_node is not None:
                    end = self.spans[end_node][1]
                self.spans[node] = (start, end)


def node_spans(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, Span]:
    """``node -> (line, column, end line, end column)`` for each of ``nodes`` (nodes of
    ``module``), as ``PositionProvider`` would give them. The last module's spans are kept: a
    file's last fix pass (for its noqa comments) and its report ask for the same findings'."""
    nodes = list(nodes)
    last, known = _LAST
    if last is module and all(node in known for node in nodes):
        return {node: known[node] for node in nodes}
    spans = _node_spans(module, nodes)
    _LAST[:] = [module, spans]
    return spans


_LAST: list = [None, {}]  # the module node_spans read last, and the spans it found


def forget_spans() -> None:
    """Drop the kept spans (the lint driver calls this before each file's check: no tree of a
    file checked before stays referenced)."""
    _LAST[:] = [None, {}]


def _node_spans(module: cst.Module, nodes: list[cst.CSTNode]) -> dict[cst.CSTNode, Span]:
    state = _SpanState(default_indent=module.default_indent, default_newline=module.default_newline,
                       pending={id(node) for node in nodes})
    try:
        module._codegen(state)
    except _AllFound:
        pass
    wanted = {node: state.spans[node] for node in nodes}
    at = _positions_at(state.tokens, {i for span in wanted.values() for i in span})
    return {node: (*at[start], *at[end]) for node, (start, end) in wanted.items()}


def start_lines(module: cst.Module) -> dict[cst.CSTNode, int]:
    """The first line of every node of ``module`` (as :func:`node_spans` gives it), from one code
    generation: for facts that ask the lines of many nodes of a module none of whose findings is
    reported (a module read for its importers)."""
    state = _SpanState(default_indent=module.default_indent, default_newline=module.default_newline)
    module._codegen(state)
    at = _positions_at(state.tokens, {start for start, _ in state.spans.values()})
    return {node: at[start][0] for node, (start, _) in state.spans.items()}


def call_lines(text: str, calls: list[cst.Call]) -> dict[cst.CSTNode, int] | None:
    """The first line of each of ``calls`` (the module's every call, in source order) from
    Python's parser instead of a code generation (a tenth of its cost): its calls sorted by
    position, matched one to one, each pair checked by the name called. None where they do not
    match (syntax this Python does not parse, a lone ``\\r`` line end, a count or a name apart)."""
    if "\r" in text:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    if len(found) != len(calls):
        return None
    out: dict[cst.CSTNode, int] = {}
    for ours, theirs in zip(calls, found):
        if _called_name(ours.func) != _ast_called_name(theirs.func):
            return None
        out[ours] = theirs.lineno
    return out


def _called_name(func: cst.BaseExpression) -> str:
    return func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""


def _ast_called_name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _positions_at(tokens: list[str], indexes: set[int]) -> dict[int, tuple[int, int]]:
    """(line, column) reached after the first ``i`` tokens, for each ``i`` in ``indexes``."""
    out: dict[int, tuple[int, int]] = {}
    todo = sorted(indexes)
    line, column, k = 1, 0, 0
    for i, token in enumerate(tokens):
        while k < len(todo) and todo[k] == i:
            out[i] = (line, column)
            k += 1
        if k == len(todo):
            return out
        if "\n" in token or "\r" in token:
            segments = _NEWLINE.split(token)
            line += len(segments) - 1
            column = len(segments[-1])
        else:
            column += len(token)
    for i in todo[k:]:  # the end of the last token
        out[i] = (line, column)
    return out
