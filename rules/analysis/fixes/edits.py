"""Fix builders: the edits rules use to change a script while keeping its formatting and its
comments (call arguments, whole statements, module-level settings after the imports).

Each returns new nodes or :mod:`._api` edits, or None when the change cannot be made without
losing something (then the rule reports without a fix)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import libcst as cst

from ..._api import AddImport, Edit, Fix, InsertAfter, Replace
from ..model.training import analysis
from ..syntax.calls import dotted_name
from ..syntax.context import RuleContext
from ..syntax.imports import module_level_imports, torch_alias, torch_name
from ..syntax.torch_roots import TORCH_IMPORT_ROOTS
from ..syntax.tree import walk


# ---- call arguments -----------------------------------------------------------------------
def _keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression | str) -> cst.Call:
    """Append ``name=value`` to a call, following its layout (one line, or one argument per
    line with or without a trailing comma)."""
    if isinstance(value, str):
        value = cst.parse_expression(value)
    new_arg = _keyword_arg(name, value)
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Trailing comma: the call is laid out one argument per line. The new argument takes the
        # old trailing comma (and the closing line break); the old last argument gets the same
        # separator its predecessor used, i.e. a line break plus indentation.
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            sep = args[-2].comma
        else:
            sep = cst.Comma(whitespace_after=call.whitespace_before_args)
        new_comma = last.comma
        old_ws, sep_ws = last.comma.whitespace_after, sep.whitespace_after
        if isinstance(old_ws, cst.ParenthesizedWhitespace) and isinstance(sep_ws, cst.ParenthesizedWhitespace) \
                and old_ws.first_line.comment is not None:
            # A comment after the old last argument stays on its line; the new argument ends
            # the call with the old closing line break.
            sep = sep.with_changes(whitespace_after=old_ws.with_changes(
                indent=sep_ws.indent, last_line=sep_ws.last_line))
            new_comma = last.comma.with_changes(whitespace_after=old_ws.with_changes(
                first_line=cst.TrailingWhitespace(), empty_lines=()))
        args[-1] = last.with_changes(comma=sep)
        args.append(new_arg.with_changes(comma=new_comma))
    else:
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            sep = args[-2].comma
        else:
            sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        # The space before the closing parenthesis (a line break in ``f(\n    a\n)``) moves to
        # the new last argument.
        args[-1] = last.with_changes(comma=sep, whitespace_after_arg=cst.SimpleWhitespace(""))
        args.append(new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)


def non_blocking_fix(call: cst.Call, safety: str) -> Fix:
    """GP104's fix: ``non_blocking=True`` added to the copy ``call`` (``safety``: "safe" where the
    copy's source is pinned or nothing reads it before the next sync, else "unsafe")."""
    return Fix("add non_blocking=True", (Replace(call, add_kwarg(call, "non_blocking", "True")),), safety)


def set_arg_value(call: cst.Call, arg: cst.Arg, value: cst.BaseExpression | str) -> cst.Call:
    """Replace the value of one existing argument."""
    if isinstance(value, str):
        value = cst.parse_expression(value)
    return call.with_changes(
        args=[a.with_changes(value=value) if a is arg else a for a in call.args]
    )


def set_or_add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression | str,
                     existing: cst.Arg | None) -> cst.Call:
    if existing is not None:
        return set_arg_value(call, existing, value)
    return add_kwarg(call, name, value)


# ---- statements ---------------------------------------------------------------------------
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
    return any(isinstance(n, cst.Comment) for n in walk(stmt, into_nested=True)) and \
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
    if len(body) == 1 or comments and index + 1 == len(body):
        # The block's only statement, or its last one with comments: ``pass`` keeps the block
        # (and the comments) in place.
        return (Replace(stmt, cst.SimpleStatementLine(
            [cst.Pass()], leading_lines=stmt.leading_lines,
            trailing_whitespace=stmt.trailing_whitespace if isinstance(stmt, cst.SimpleStatementLine)
            else cst.TrailingWhitespace(newline=cst.Newline()))),)
    if not comments:
        return (Replace(stmt, cst.RemoveFromParent()),)
    nxt = body[index + 1]
    return (Replace(stmt, cst.RemoveFromParent()),
            Replace(nxt, nxt.with_changes(leading_lines=[*comments, *nxt.leading_lines])))


def detached(expr: cst.BaseExpression) -> cst.Call:
    """``expr.detach()``, parenthesising ``expr`` where needed."""
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("detach")))


def torch_import(ctx: RuleContext) -> tuple[Edit, ...]:
    """The edits a fix that writes ``torch_name(ctx).…`` needs: none when torch is imported
    under any alias, else an ``AddImport("torch")`` (placed by :func:`add_imports`)."""
    return () if torch_alias(ctx) is not None else (AddImport("torch"),)


def cuda_query(ctx: RuleContext, call: str = "is_available()") -> tuple[str, tuple[Edit, ...]]:
    """``torch.cuda.<call>`` in the file's torch alias, and the import it needs: the value a fix
    writes for a setting that pays only on a GPU (bfloat16, compile), so that the rewritten
    script does on a CPU what it did before (``bf16=torch.cuda.is_bf16_supported(...)``,
    ``torch_compile=torch.cuda.is_available()``)."""
    return f"{torch_name(ctx)}.cuda.{call}", torch_import(ctx)


# ---- adding imports -----------------------------------------------------------------------
def _binds(existing: cst.Import | cst.ImportFrom, imp: AddImport) -> bool:
    if imp.name is None:
        return isinstance(existing, cst.Import) and any(
            dotted_name(a.name) == imp.module and
            (a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None) == imp.asname
            for a in existing.names)
    if not isinstance(existing, cst.ImportFrom) or existing.relative or existing.module is None or \
            dotted_name(existing.module) != imp.module or isinstance(existing.names, cst.ImportStar):
        return isinstance(existing, cst.ImportFrom) and isinstance(existing.names, cst.ImportStar) and \
            existing.module is not None and dotted_name(existing.module) == imp.module
    return any(dotted_name(a.name) == imp.name and
               (a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None) == imp.asname
               for a in existing.names)


def _is_env_setup(stmt: cst.BaseStatement) -> bool:
    """``os.environ[...] = ...``, ``os.environ.setdefault(...)``, ``os.putenv(...)``,
    ``sys.path.insert(...)``: lines that must run before the imports that follow them."""
    code = cst.Module(body=[stmt]).code if isinstance(stmt, cst.SimpleStatementLine) else ""
    return any(word in code for word in ("os.environ", "putenv", "sys.path", "environ["))


def _header_end(module: cst.Module) -> int:
    """The index after the module's header: its docstring, imports and the environment lines
    between them, ending at the last import or environment line (0: nothing)."""
    end = 0
    for i, stmt in enumerate(module.body):
        if i == 0 and isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and \
                isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.SimpleString):
            end = 1  # the docstring
            continue
        if _is_import_stmt(stmt) or _is_env_setup(stmt):
            end = i + 1
            continue
        break
    return end


# Packages that are surely installed ones, not the project's own modules: the torch family and the
# libraries training scripts import most. Any other absolute import may be the project's own
# (``from models import build_model``) and sorts last, with the local ones.
_THIRD_PARTY = TORCH_IMPORT_ROOTS | frozenset({
    "numpy", "scipy", "pandas", "sklearn", "matplotlib", "PIL", "cv2", "tqdm", "wandb", "mlflow", "yaml",
    "datasets", "tokenizers", "safetensors", "huggingface_hub", "tensorboard", "tensorboardX", "einops",
    "hydra", "omegaconf", "requests", "h5py", "click", "rich", "jax", "tensorflow",
})
# isort's sections, in their order in a file.
_FUTURE, _STDLIB, _THIRD, _LOCAL = range(4)


def _section(module: str | None, relative: bool = False) -> int:
    root = (module or "").split(".")[0]
    if relative or not root:
        return _LOCAL
    if root == "__future__":
        return _FUTURE
    if root in sys.stdlib_module_names:
        return _STDLIB
    return _THIRD if root in _THIRD_PARTY else _LOCAL


def _stmt_section(stmt: cst.BaseStatement) -> int:
    """The section of an import statement (of the first import in a ``try:`` block)."""
    while isinstance(stmt, cst.Try):
        stmt = stmt.body.body[0]  # type: ignore[union-attr,assignment]
    small = stmt.body[0]  # type: ignore[union-attr]
    if isinstance(small, cst.ImportFrom):
        return _section(dotted_name(small.module) if small.module else None, bool(small.relative))
    assert isinstance(small, cst.Import)
    return min(_section(dotted_name(a.name)) for a in small.names)


def _blank(lines: Sequence[cst.EmptyLine]) -> bool:
    return bool(lines) and lines[0].comment is None


def add_imports(module: cst.Module, imports: list[AddImport]) -> cst.Module:
    """Add the imports that are not bound at module level yet (under any spelling of the same
    binding, also inside ``try:``), once each, in the module's header and in isort's section
    order (``__future__``, standard library, third party, the project's own): a standard-library
    import right after the header's last one (before the first other import when there is none),
    a third-party one after the last standard-library or known third-party import and after the
    environment lines (``os.environ["PYTORCH_..."] = ...`` must run before torch is imported),
    never above them. A new section is set off by a blank line; docstring and comments stay where
    they are."""
    existing = module_level_imports(module)
    groups: dict[int, list[cst.SimpleStatementLine]] = {}
    seen: set[AddImport] = set()
    for imp in imports:
        if imp in seen or any(_binds(e, imp) for e in existing):
            continue
        seen.add(imp)
        if imp.name is None:
            code = f"import {imp.module}" + (f" as {imp.asname}" if imp.asname else "")
        else:
            code = f"from {imp.module} import {imp.name}" + (f" as {imp.asname}" if imp.asname else "")
        groups.setdefault(min(_section(imp.module), _THIRD), []).append(
            cst.parse_statement(code + "\n"))  # type: ignore[arg-type]
    body = list(module.body)
    for section in sorted(groups, reverse=True):  # later positions first: earlier indexes stay valid
        body = _insert_section(body, _header_end(module.with_changes(body=body)), section, groups[section])
    return module.with_changes(body=body)


def _insert_section(body: list[cst.BaseStatement], end: int, section: int,
                    new: list[cst.SimpleStatementLine]) -> list[cst.BaseStatement]:
    """``body`` with ``new`` (imports of one ``section``) in place within the header ``body[:end]``."""
    header = [(i, _stmt_section(s)) for i, s in enumerate(body[:end]) if _is_import_stmt(s)]
    after = [i for i, sec in header if sec <= section]
    later = [i for i, sec in header if sec > section and sec != _FUTURE]
    if section >= _THIRD:  # below the environment lines, which must run before torch is imported
        after += [i for i, s in enumerate(body[:end]) if _is_env_setup(s)]
    if after:
        at = max(after) + 1
        prev = body[at - 1]
        if not _is_import_stmt(prev) or _stmt_section(prev) != section:
            new = [new[0].with_changes(leading_lines=[cst.EmptyLine()]), *new[1:]]  # a new section
    elif later:
        at = later[0]  # the first import of a later section: take its place, before its comments
        lines = list(body[at].leading_lines)
        blanks = 0
        while blanks < len(lines) and lines[blanks].comment is None:
            blanks += 1
        new = [new[0].with_changes(leading_lines=lines[:blanks]), *new[1:]]
        body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine(), *lines[blanks:]])
        return [*body[:at], *new, *body[at:]]
    else:
        at = end
    if at < len(body) and not _blank(body[at].leading_lines) and not _is_env_setup(body[at]) and \
            not (_is_import_stmt(body[at]) and _stmt_section(body[at]) == section):
        body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine(), *body[at].leading_lines])
    return [*body[:at], *new, *body[at:]]


# ---- module-level settings -----------------------------------------------------------------
def _is_import_stmt(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, cst.SimpleStatementLine):
        return bool(stmt.body) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)
    if isinstance(stmt, cst.Try):  # try: import x / except ImportError: ...
        body = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ()
        return bool(body) and all(_is_import_stmt(s) for s in body)
    return False


def last_top_level_import(ctx: RuleContext) -> cst.BaseStatement | None:
    """The last import statement at module level (after any docstring and ``__future__``
    imports, and after the ``os.environ[...]`` lines that precede them, by construction) that
    comes before the first training loop at module level (a tutorial imports more later), or
    None when the module imports nothing there."""
    loops = {loop for loop in analysis(ctx).step_loops if ctx.enclosing(loop, cst.FunctionDef, cst.ClassDef) is None}
    last = None
    for stmt in ctx.module.body:
        if loops and any(ctx.is_inside(loop, stmt) for loop in loops):
            break
        if _is_import_stmt(stmt):
            last = stmt
    return last


def module_setting_edit(ctx: RuleContext, code: str) -> InsertAfter | None:
    """An edit that puts the statement ``code`` right after the imports (before the training),
    or None."""
    anchor = last_top_level_import(ctx)
    if anchor is None:
        return None
    return InsertAfter(anchor, (cst.parse_statement(code + "\n"),))
