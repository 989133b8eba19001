"""A rule that raises loses only its own findings on that file: the engine catches the exception
per rule and reports it as an E001 diagnostic that names the rule and points at the code it was
looking at, while every other rule's findings and fixes are kept.

The position: rules read the parsed tree and never run the user's code, so no line of the user's
file is in the traceback. What the traceback does hold is the nodes the rule was handling: the
innermost frame that has a local variable bound to a node of the file's tree names the code the
rule was examining, and of that frame's nodes the deepest one (the most specific) is reported.
Line 1 when no frame holds one (the rule failed before looking at any code)."""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING

import libcst as cst

from gpuperf_rewrite.lint.diagnostics import INTERNAL_ERROR, Diagnostic, file_error

if TYPE_CHECKING:
    from gpuperf_rewrite.rules._framework import RuleContext


def crash_diagnostic(code: str, exc: BaseException, ctx: RuleContext, path: str, during: str = "") -> Diagnostic:
    """The E001 for rule ``code`` raising ``exc`` on the file of ``ctx``; ``during`` says when,
    if not while the file was checked (e.g. "while its fixes were computed")."""
    node = _node_in_hand(exc, ctx)
    line, col = _position(ctx, node)
    where = " while looking at the code here" if node is not None else ""
    when = f" {during}" if during else ""
    return file_error(path, f"internal error in rule {code}{when}{where}: {type(exc).__name__}: {exc}; {code} "
                            f"did not check this file, the other rules did (please report this with the file)",
                      line=line, col=col, code=INTERNAL_ERROR)


def _node_in_hand(exc: BaseException, ctx: RuleContext) -> cst.CSTNode | None:
    """The deepest node of the file held by the innermost frame that holds one."""
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    for frame in reversed(frames):
        try:
            values = list(frame.f_locals.values())
        except Exception:  # noqa: BLE001 - an odd frame: look at the next one out
            continue
        held = [v for v in values if isinstance(v, cst.CSTNode) and ctx.parent(v) is not None]
        if held:
            return max(held, key=lambda n: sum(1 for _ in ctx.ancestors(n)))
    return None


def _position(ctx: RuleContext, node: cst.CSTNode | None) -> tuple[int, int]:
    """1-based line and column of ``node``; (1, 1) when unknown."""
    if node is None:
        return 1, 1
    from gpuperf_rewrite.lint.positions import node_spans

    try:
        line, col, _, _ = node_spans(ctx.module, [node])[node]
    except Exception:  # noqa: BLE001 - the position is a courtesy: never a second crash
        return 1, 1
    return line, col + 1
