"""Parsing one file, safely: CPython's own parser as a fast gate, then LibCST.

The gate refuses what would crash or stall LibCST (NUL bytes, absurd nesting) and reports
syntax errors with CPython's messages; anything LibCST still rejects becomes an E999 too.
"""

from __future__ import annotations

import ast

import libcst as cst

from gpuperf_rewrite.lint.diagnostics import Diagnostic, file_error
from gpuperf_rewrite.lint.project import parse_ast
from gpuperf_rewrite.rules.analysis.syntax.tree import unchecked_nodes

# LibCST's native parser overflows its stack (segfault) on a few thousand nested brackets and is
# quadratic in nesting depth, and our visitors recurse per level: files nested deeper than this
# (in Python's own AST) are reported instead of analysed. Real code stays far below (torch: 31).
MAX_AST_DEPTH = 150


class ParseFailure(Exception):
    """The file cannot be parsed; ``diag`` is the E999 to report."""

    def __init__(self, diag: Diagnostic) -> None:
        super().__init__(diag.message)
        self.diag = diag


def parse_module(data: bytes | str) -> cst.Module:
    """``cst.parse_module(data)`` without LibCST's validation of each node its parser builds
    (``syntax.tree.unchecked_nodes``: a tenth of a parse; the same tree)."""
    with unchecked_nodes():
        return cst.parse_module(data)


def parse(data: bytes | str, path: str) -> cst.Module:
    """The LibCST module of ``data``; :class:`ParseFailure` when it cannot be parsed."""
    try:
        return parse_module(data)
    except cst.ParserSyntaxError as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid syntax"
        raise ParseFailure(file_error(path, f"SyntaxError: {msg}", exc.raw_line or 1,
                                      (exc.raw_column or 0) + 1)) from exc
    except RecursionError as exc:
        raise ParseFailure(file_error(path, "file is nested too deeply to parse")) from exc
    except (ValueError, UnicodeDecodeError, LookupError, SyntaxError) as exc:
        # NUL bytes, undecodable text or an unknown coding cookie.
        raise ParseFailure(file_error(path, f"cannot parse: {exc}")) from exc


def _ast_depth(tree: ast.AST, into: list[ast.AST] | None = None) -> int:
    """Deepest nesting of the tree, level by level (the tree may be too deep to recurse over);
    reading ``_fields`` directly is twice as fast as ``ast.iter_child_nodes``. ``into``: the nodes
    are appended to it level by level, which is ``ast.walk``'s order (``Glance.nodes``)."""
    node_type = ast.AST
    level: list[ast.AST] = [tree]
    depth = 0
    while level:
        depth += 1
        if into is not None:
            into.extend(level)
        children: list[object] = []
        for node in level:
            for name in node._fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    children.extend(value)
                elif isinstance(value, node_type):
                    children.append(value)
        level = [c for c in children if isinstance(c, node_type)]  # lists may hold names (Global)
    return depth


def _nul_byte(data: bytes | str, path: str) -> Diagnostic | None:
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
    at = raw.find(b"\0")
    if at < 0:
        return None
    line = raw.count(b"\n", 0, at) + 1
    col = at - (raw.rfind(b"\n", 0, at) + 1) + 1
    return file_error(path, "file contains a NUL byte; not Python source (binary file?)", line, col)


def syntax_gate(data: bytes | str, path: str, *, check_depth: bool = False, keep_tree: bool = False,
                trees: list[ast.Module] | None = None, nodes: list[ast.AST] | None = None) -> Diagnostic | None:
    """None when CPython parses ``data`` (and, with ``check_depth``, it is shallow enough for
    LibCST); else the E999 to report. ``keep_tree``: the tree is kept for the import scan of the
    same content (``project.parse_ast``); ``trees``: CPython's tree is appended to it (the rules'
    preconditions read it: ``syntax.glance``); ``nodes``: with ``check_depth``, the depth walk appends
    every node of the tree to it, in ``ast.walk``'s order (``Glance.nodes``: one walk serves both)."""
    nul = _nul_byte(data, path)
    if nul is not None:
        return nul
    try:
        tree = parse_ast(data, keep=keep_tree)  # the tree the import scan of this file made, if it made one
    except SyntaxError as exc:
        return file_error(path, f"SyntaxError: {exc.msg}", exc.lineno or 1, exc.offset or 1)
    except RecursionError:
        return file_error(path, "SyntaxError: nested too deeply for Python's parser")
    except (ValueError, MemoryError) as exc:
        return file_error(path, f"cannot parse: {exc}")
    if trees is not None:
        trees.append(tree)
    if check_depth:
        depth = _ast_depth(tree, nodes)
        if depth > MAX_AST_DEPTH:
            return file_error(path, f"expressions nested {depth} levels deep; the analyser handles "
                                    f"up to {MAX_AST_DEPTH}, file not checked")
    return None
