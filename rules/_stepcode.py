"""Helpers for rules that look at the statements of a step loop: source order, no-grad
contexts, device arguments, batch data, and statement-level edits that keep comments."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import Edit, Replace
from ._calls import dotted_name, literal_value
from ._context import RuleContext
from ._torchnames import NO_GRAD
from ._training import TrainingAnalysis
from ._tree import children_of

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


# ---- source order -------------------------------------------------------------------------
def preorder(ctx: RuleContext) -> dict[cst.CSTNode, int]:
    """Every node's position in a pre-order walk, i.e. source order (computed once per file)."""
    return ctx.preorder()


def walk(node: cst.CSTNode, into_scopes: bool = False) -> Iterator[cst.CSTNode]:
    """Nodes below ``node``; nested functions/classes/lambdas only when ``into_scopes``."""
    stack = list(reversed(children_of(node)))
    while stack:
        cur = stack.pop()
        yield cur
        if not into_scopes and isinstance(cur, _SCOPES):
            continue
        stack.extend(reversed(children_of(cur)))


def walk_with_callees(ta: TrainingAnalysis, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes below ``node`` plus the bodies of in-module functions it calls (transitively)."""
    seen: set[cst.CSTNode] = set()
    todo = [node]
    while todo:
        cur = todo.pop()
        for n in walk(cur, into_scopes=True):
            yield n
            for fn in ta._called_functions(n):
                if fn not in seen:
                    seen.add(fn)
                    todo.append(fn.body)


# ---- gradient mode ------------------------------------------------------------------------
def _is_no_grad_expr(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    func = expr.func if isinstance(expr, cst.Call) else expr
    return ctx.matches(func, NO_GRAD)


def in_no_grad(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Inside ``with torch.no_grad()/inference_mode()/set_grad_enabled(...)`` or a function
    decorated with one of them."""
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.With) and any(_is_no_grad_expr(ctx, i.item) for i in anc.items):
            return True
        if isinstance(anc, cst.FunctionDef) and any(
                _is_no_grad_expr(ctx, d.decorator) for d in anc.decorators):
            return True
    return False


# ---- devices and batch data ---------------------------------------------------------------
_DEVICE_NAMES = ("device", "dev", "rank", "local_rank", "gpu", "gpu_id", "device_id")


def device_kind(ctx: RuleContext, expr: cst.BaseExpression) -> str | None:
    """``"cuda"``, ``"cpu"`` or ``"unknown"`` when ``expr`` looks like a device argument of
    ``.to()``; None when it does not look like a device at all (a dtype, another tensor)."""
    value = literal_value(expr)
    if isinstance(value, str):
        if value.startswith("cuda"):
            return "cuda"
        return "cpu" if value.startswith("cpu") else None
    if isinstance(expr, cst.FormattedString):
        first = expr.parts[0] if expr.parts else None
        if isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda"):
            return "cuda"
        return None
    if isinstance(expr, cst.Call) and ctx.matches(expr.func, {"torch.device"}):
        return device_kind(ctx, expr.args[0].value) or "unknown" if expr.args else None
    name = dotted_name(expr)
    if name is None:
        return None
    last = name.rsplit(".", 1)[-1].lower()
    if "cpu" in last:
        return "cpu"
    if last in _DEVICE_NAMES or last.endswith("_device") or last.startswith("device"):
        return "unknown"
    return None


def target_names(target: cst.CSTNode) -> set[str]:
    """Names bound by an assignment or ``for`` target (tuples and lists unpacked)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for el in target.elements:
            out |= target_names(el.value)
        return out
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()


class BatchData:
    """Which names in a step loop hold the batch read from the data source this step: the
    ``for`` target and names derived from it (``x, y = batch``, ``inputs = batch["x"]``) or
    returned by a helper of this module (``x, y = get_batch(...)``), never models."""

    def __init__(self, ctx: RuleContext, ta: TrainingAnalysis, loop: cst.For | cst.While) -> None:
        self.ctx, self.ta, self.loop = ctx, ta, loop
        self.names: set[str] = set()
        if isinstance(loop, cst.For) and not _is_range(loop.iter):
            self.names |= {n for n in target_names(loop.target)}
            if isinstance(loop.iter, cst.Call) and dotted_name(loop.iter.func) == "enumerate" and \
                    isinstance(loop.target, cst.Tuple) and loop.target.elements:
                self.names -= target_names(loop.target.elements[0].value)  # the step index
        assigns = [n for n in walk(loop.body) if isinstance(n, cst.Assign)]
        for _ in range(3):
            before = len(self.names)
            for a in assigns:
                if self.derives(a.value):
                    for t in a.targets:
                        self.names |= target_names(t.target)
            if len(self.names) == before:
                break
        self.names -= ta.model_names
        # Data is not called: ``net = build(cfg).to(device); net(x)`` is a model.
        self.names -= {dotted_name(n.func) for n in walk(loop.body) if isinstance(n, cst.Call)}

    def derives(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in self.names
        if isinstance(expr, (cst.Subscript, cst.Attribute)):
            return self.derives(expr.value)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return bool(expr.elements) and all(self.derives(e.value) for e in expr.elements)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute):
                return func.attr.value not in ("to", "cuda") and self.derives(func.value)
            if isinstance(func, cst.Name):
                if func.value == "next":
                    return True
                fns = self.ta.functions.get(func.value, ())
                # a plain helper of this module (not a class, a model or a method)
                return bool(fns) and func.value not in self.ta.module_classes and \
                    not self.ta.is_model(func) and all(
                        self.ctx.enclosing(f, cst.ClassDef) is None for f in fns)
        return False

    def holds(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` batch data? Also ``v`` in ``{k: v.to(d) for k, v in batch.items()}``."""
        if self.derives(expr):
            return True
        base: cst.BaseExpression = expr
        while isinstance(base, (cst.Subscript, cst.Attribute)):
            base = base.value
        if not isinstance(base, cst.Name):
            return False
        for anc in self.ctx.ancestors(expr):
            if anc is self.loop:
                break
            if isinstance(anc, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
                comp: cst.CompFor | None = anc.for_in
                while comp is not None:
                    if base.value in target_names(comp.target):
                        return self.derives(comp.iter)
                    comp = comp.inner_for_in
        return False


def _is_range(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and dotted_name(expr.func) in ("range", "itertools.count")


# ---- statement edits ----------------------------------------------------------------------
def block_of(ctx: RuleContext, stmt: cst.CSTNode) -> cst.IndentedBlock | None:
    parent = ctx.parent(stmt)
    return parent if isinstance(parent, cst.IndentedBlock) else None


def single_expression_statement(ctx: RuleContext, call: cst.Call) -> cst.SimpleStatementLine | None:
    """The statement line when ``call`` is all it does (``print(x)``), in an indented block."""
    stmt = ctx.parent(ctx.parent(call)) if isinstance(ctx.parent(call), cst.Expr) else None
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    return stmt if block_of(ctx, stmt) is not None else None


def _comment_lines(stmt: cst.SimpleStatementLine | cst.BaseCompoundStatement) -> list[cst.EmptyLine]:
    """The comment lines that belong to ``stmt`` (above it and at the end of its line)."""
    lines = [line for line in stmt.leading_lines if line.comment is not None]
    trailing = None
    if isinstance(stmt, cst.SimpleStatementLine):
        trailing = stmt.trailing_whitespace.comment
    elif isinstance(stmt.body, cst.IndentedBlock):
        trailing = stmt.body.header.comment
    if trailing is not None:
        lines.append(cst.EmptyLine(comment=trailing))
    return lines


def has_inner_comments(ctx: RuleContext, stmt: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Comment) for n in walk(stmt, into_scopes=True)) and \
        not isinstance(stmt, cst.SimpleStatementLine)


def remove_statement(ctx: RuleContext, stmt: cst.SimpleStatementLine | cst.BaseCompoundStatement
                     ) -> tuple[Edit, ...] | None:
    """Edits that delete ``stmt`` from its block, moving its comments onto the next statement
    (or leaving ``pass`` with them when it is the block's last statement). None when a comment
    inside a compound statement would be lost."""
    block = block_of(ctx, stmt)
    if block is None or has_inner_comments(ctx, stmt):
        return None
    comments = _comment_lines(stmt)
    body = list(block.body)
    index = next(i for i, s in enumerate(body) if s is stmt)
    if len(body) == 1:
        return (Replace(stmt, cst.SimpleStatementLine(
            [cst.Pass()], leading_lines=stmt.leading_lines,
            trailing_whitespace=stmt.trailing_whitespace if isinstance(stmt, cst.SimpleStatementLine)
            else cst.TrailingWhitespace(newline=cst.Newline()))),)
    if not comments:
        return (Replace(stmt, cst.RemoveFromParent()),)
    if index + 1 < len(body):
        nxt = body[index + 1]
        return (Replace(stmt, cst.RemoveFromParent()),
                Replace(nxt, nxt.with_changes(leading_lines=[*comments, *nxt.leading_lines])))
    # Last statement with comments: keep them on a ``pass``.
    return (Replace(stmt, cst.SimpleStatementLine([cst.Pass()], leading_lines=stmt.leading_lines,
            trailing_whitespace=stmt.trailing_whitespace if isinstance(stmt, cst.SimpleStatementLine)
            else cst.TrailingWhitespace(newline=cst.Newline()))),)


def detached(expr: cst.BaseExpression) -> cst.Call:
    """``expr.detach()``, parenthesising ``expr`` where needed."""
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("detach")))


def torch_alias(ctx: RuleContext) -> str | None:
    """The name ``torch`` is imported under at module level (``import torch as th`` -> ``th``),
    or None when the module does not ``import torch`` (an ``AddImport("torch")`` is needed)."""
    aliases = []
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if dotted_name(alias.name) == "torch":
                            aliases.append(alias.asname.name.value if alias.asname and
                                           isinstance(alias.asname.name, cst.Name) else "torch")
    return "torch" if "torch" in aliases else (aliases[0] if aliases else None)
