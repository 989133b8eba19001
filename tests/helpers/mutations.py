"""Syntax-preserving mutations of training scripts, for the rules' robustness test
(tests/rules/test_mutation_robustness.py): the same training code, written in the shapes real
projects use around it. Each mutation takes a parsed module and returns a new one that is still
valid Python (the test compiles every mutant); what the code does at run time does not matter,
the rules only read it.

- *Wrappers* move the training loop (the outermost loop holding a ``backward``, else the statement
  that calls ``fit``/``train``, else the last statement) into another statement: ``if``/``else``,
  ``with`` (parenthesized too), ``try``/``except*``/``finally``, ``for``/``while`` with ``else``,
  nested, async, generator and decorated defs and methods, ``global``/``nonlocal``, ``match``.
- *Rewrites* change how the code inside is spelled: one-line suites (``if x: a = b``) and
  semicolons, walrus assignments, attribute and subscript targets (``state.loss = ...``,
  ``buf[K_loss] = ...``), annotated assignments, comprehension-heavy statements, ``async for``,
  decorators on every function; and the whole file repeated 50 times.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import libcst as cst

from gpuperf_rewrite.rules.analysis.syntax.tree import walk

Mutation = Callable[[cst.Module], cst.Module]
_HOLE = "__BODY__"


# ---- where the training code is -------------------------------------------------------------
def _calls_method(node: cst.CSTNode, names: tuple[str, ...]) -> bool:
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in names
               for n in walk(node, into_nested=True, include_self=True))


def training_statement(module: cst.Module) -> cst.BaseStatement:
    """The outermost loop that runs a backward, else the last top-level statement that calls
    ``fit``/``train``/``main``, else the module's last statement."""
    for node in walk(module, into_nested=True):
        if isinstance(node, (cst.For, cst.While)) and _calls_method(node, ("backward",)):
            return node
    for stmt in reversed(module.body):
        if _calls_method(stmt, ("fit", "train")) or "main()" in module.code_for_node(stmt):
            return stmt
    return module.body[-1]


class _Replace(cst.CSTTransformer):
    """Replaces one node (by identity) with what ``build`` makes of its updated self."""

    def __init__(self, target: cst.CSTNode, build: Callable[[cst.CSTNode], cst.CSTNode | cst.FlattenSentinel]) -> None:
        super().__init__()
        self.target, self.build = target, build

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # noqa: ANN201
        return self.build(updated_node) if original_node is self.target else updated_node


def _replace(module: cst.Module, target: cst.CSTNode, build) -> cst.Module:  # noqa: ANN001
    return module.visit(_Replace(target, build))


# ---- wrappers -------------------------------------------------------------------------------
class _Fill(cst.CSTTransformer):
    """Puts the body into each ``__BODY__`` line of a template (a fresh copy after the first)."""

    def __init__(self, body: cst.BaseStatement) -> None:
        super().__init__()
        self.body, self.used = body, 0

    def leave_SimpleStatementLine(self, original_node, updated_node):  # noqa: ANN001, ANN201
        if len(updated_node.body) == 1 and isinstance(updated_node.body[0], cst.Expr) and \
                isinstance(updated_node.body[0].value, cst.Name) and updated_node.body[0].value.value == _HOLE:
            self.used += 1
            return (self.body if self.used == 1 else self.body.deep_clone()).with_changes(leading_lines=())
        return updated_node


def wrapper(template: str, modify: Callable[[cst.BaseStatement], cst.BaseStatement] | None = None) -> Mutation:
    """A mutation that moves the training statement into ``template`` at each ``__BODY__``."""
    def mutate(module: cst.Module) -> cst.Module:
        target = training_statement(module)

        def build(node: cst.CSTNode) -> cst.FlattenSentinel:
            body = modify(node) if modify else node
            stmts = cst.parse_module(template).visit(_Fill(body)).body
            first = stmts[0].with_changes(leading_lines=node.leading_lines)
            return cst.FlattenSentinel([first, *stmts[1:]])
        return _replace(module, target, build)
    return mutate


def _async_loop(node: cst.BaseStatement) -> cst.BaseStatement:
    """``for`` -> ``async for`` (inside an async def only)."""
    return node.with_changes(asynchronous=cst.Asynchronous()) if isinstance(node, cst.For) else node


WRAPPERS: dict[str, Mutation] = {
    "if": wrapper("if run_training:\n    __BODY__\n"),
    "if_else": wrapper("if dry_run:\n    pass\nelif resume_only:\n    __BODY__\nelse:\n    __BODY__\n"),
    "with": wrapper("with contextlib.nullcontext(), torch.autograd.set_detect_anomaly(False) as anomaly:\n"
                    "    __BODY__\n"),
    "try": wrapper("try:\n    __BODY__\nexcept KeyboardInterrupt:\n    print('stopped')\nelse:\n"
                   "    print('done')\nfinally:\n    cleanup()\n"),
    "try_star": wrapper("try:\n    __BODY__\nexcept* (ValueError, RuntimeError) as group:\n    raise\n"),
    "for_else": wrapper("for attempt in range(retries):\n    __BODY__\n    break\nelse:\n"
                        "    raise RuntimeError('no attempt finished')\n"),
    "while_else": wrapper("while not finished:\n    __BODY__\n    finished = True\nelse:\n    pass\n"),
    "def": wrapper("def run():\n    __BODY__\n\n\nif __name__ == '__main__':\n    run()\n"),
    "nested_def": wrapper("def outer():\n    def inner():\n        __BODY__\n    return inner()\n\nouter()\n"),
    "async_def": wrapper("async def main():\n    await asyncio.sleep(0)\n    __BODY__\n\nasyncio.run(main())\n"),
    "async_for": wrapper("async def main():\n    async with lock:\n        __BODY__\n\nasyncio.run(main())\n",
                         _async_loop),
    "decorated_method": wrapper("class Trainer:\n    @torch.compiler.disable\n    @register(kind='loop', level=2)\n"
                                "    def fit(self):\n        __BODY__\n\n\nTrainer().fit()\n"),
    "global": wrapper("def main():\n    global model, optimizer, loader\n    __BODY__\n\nmain()\n"),
    "nonlocal": wrapper("def main():\n    step = 0\n    def run():\n        nonlocal step\n        step += 1\n"
                        "        __BODY__\n    run()\n\nmain()\n"),
    "match": wrapper("match mode:\n    case 'train' | 'finetune':\n        __BODY__\n"
                     "    case {'kind': kind, **rest} if kind:\n        pass\n    case [first, *others]:\n"
                     "        __BODY__\n    case Config(epochs=n):\n        __BODY__\n    case _:\n        pass\n"),
    "parenthesized_with": wrapper("with (\n    contextlib.nullcontext() as outer,\n    open(log_path) as log,\n):\n"
                                  "    __BODY__\n"),
    "generator_def": wrapper("def steps(*args: Any, step: int = 0, **kwargs: Any) -> Iterator[int]:\n"
                             "    __BODY__\n    yield from range(step)\n\nlist(steps())\n"),
    "lambda_and_class": wrapper("class Loop:\n    hook = staticmethod(lambda *a, **k: None)\n\n"
                                "    def __call__(self):\n        __BODY__\n\n\nLoop()()\n"),
}


# ---- rewrites of the code itself -----------------------------------------------------------
def _has_comments(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Comment) for n in walk(node, into_nested=True, include_self=True))


class _OneLine(cst.CSTTransformer):
    """Blocks of one simple line become one-line suites (``if x: a = b``); runs of simple lines
    become one line joined by semicolons."""

    def leave_IndentedBlock(self, original_node, updated_node):  # noqa: ANN001, ANN201
        body = list(updated_node.body)
        merged: list[cst.BaseStatement] = []
        for stmt in body:
            prev = merged[-1] if merged else None
            if isinstance(stmt, cst.SimpleStatementLine) and isinstance(prev, cst.SimpleStatementLine) and \
                    not stmt.leading_lines and not _has_comments(prev) and not _has_comments(stmt) and \
                    len(prev.body) < 3:
                semi = cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" "))
                small = [*prev.body[:-1], prev.body[-1].with_changes(semicolon=semi), *stmt.body]
                merged[-1] = prev.with_changes(body=small)
            else:
                merged.append(stmt)
        return updated_node.with_changes(body=merged)

    def _suite(self, updated_node):  # noqa: ANN001, ANN202
        body = updated_node.body
        if isinstance(body, cst.IndentedBlock) and len(body.body) == 1 and \
                isinstance(body.body[0], cst.SimpleStatementLine) and not _has_comments(body) and \
                not body.footer and body.header.comment is None:
            line = body.body[0]
            return updated_node.with_changes(body=cst.SimpleStatementSuite(
                body=line.body, trailing_whitespace=line.trailing_whitespace))
        return updated_node

    def leave_If(self, original_node, updated_node):  # noqa: ANN001, ANN201
        return self._suite(updated_node)

    leave_For = leave_While = leave_With = leave_Else = leave_Try = leave_Finally = leave_If
    leave_FunctionDef = leave_ClassDef = leave_If

    def leave_ExceptHandler(self, original_node, updated_node):  # noqa: ANN001, ANN201
        return self._suite(updated_node)


def one_line_suites(module: cst.Module) -> cst.Module:
    return module.visit(_OneLine())


def _simple_assigns(node: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    """Lines ``name = value`` (one small statement, one plain-name target)."""
    return [n for n in walk(node, into_nested=True) if isinstance(n, cst.SimpleStatementLine) and
            len(n.body) == 1 and isinstance(n.body[0], cst.Assign) and len(n.body[0].targets) == 1 and
            isinstance(n.body[0].targets[0].target, cst.Name)]


class _Walrus(cst.CSTTransformer):
    def __init__(self, lines: set[cst.CSTNode]) -> None:
        super().__init__()
        self.lines = lines

    def leave_SimpleStatementLine(self, original_node, updated_node):  # noqa: ANN001, ANN201
        if original_node not in self.lines:
            return updated_node
        assign = updated_node.body[0]
        walrus = cst.NamedExpr(target=assign.targets[0].target, value=assign.value,
                               lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return updated_node.with_changes(body=[cst.Expr(walrus)])


def walrus(module: cst.Module) -> cst.Module:
    """Inside the training code, ``x = f()`` -> ``(x := f())``; and ``if (n := len(...)):`` guards."""
    target = training_statement(module)
    lines = {line for line in _simple_assigns(target)
             if not any(isinstance(n, (cst.Yield, cst.Await, cst.NamedExpr)) for n in walk(line, into_nested=True))}
    module = module.visit(_Walrus(lines))
    target = training_statement(module)
    guard = cst.parse_statement("if (n_items := len(seen)) > limit:\n    print(n_items)\n")
    return _replace(module, target, lambda node: cst.FlattenSentinel([guard, node]))


# Names whose spelling must stay a plain name (a def's, a parameter's, an except/walrus/match capture...).
_KEEP_NAME = (cst.Param, cst.FunctionDef, cst.ClassDef, cst.NameItem, cst.ImportAlias, cst.ExceptHandler,
              cst.NamedExpr, cst.MatchAs, cst.MatchStar, cst.MatchMapping, cst.MatchKeywordElement, cst.Arg,
              cst.Attribute, cst.ImportFrom)


class _ToTargets(cst.CSTTransformer):
    """Every plain name in ``names`` -> ``state.name`` or ``buf[K_name]`` (loads and stores)."""

    def __init__(self, names: set[str], make: Callable[[str], cst.BaseExpression]) -> None:
        super().__init__()
        self.names, self.make = names, make
        self.keep: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _KEEP_NAME):
            # the node's own name fields stay names (an Attribute's .attr, an Arg's keyword, ...)
            for field in ("name", "attr", "keyword", "target", "rest", "key", "asname"):
                value = getattr(node, field, None)
                if isinstance(value, cst.Name):
                    self.keep.append(value)
                elif isinstance(value, cst.AsName) and isinstance(value.name, cst.Name):
                    self.keep.append(value.name)
        return True

    def leave_Name(self, original_node, updated_node):  # noqa: ANN001, ANN201
        if original_node.value in self.names and not any(original_node is k for k in self.keep):
            return self.make(original_node.value).with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        return updated_node


def _assigned_names(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    for n in walk(node, into_nested=True, include_self=True):
        targets: list[cst.CSTNode] = []
        if isinstance(n, cst.Assign):
            targets = [t.target for t in n.targets]
        elif isinstance(n, (cst.AugAssign, cst.For)):
            targets = [n.target]
        for t in targets:
            out |= {x.value for x in walk(t, include_self=True) if isinstance(x, cst.Name)}
    return out


def _captured_names(node: cst.CSTNode) -> set[str]:
    """Names that must stay names wherever they occur (bound by except/walrus/match/global...)."""
    out: set[str] = set()
    for n in walk(node, into_nested=True, include_self=True):
        if isinstance(n, cst.ExceptHandler) and n.name is not None and isinstance(n.name.name, cst.Name):
            out.add(n.name.name.value)
        elif isinstance(n, cst.NamedExpr) and isinstance(n.target, cst.Name):
            out.add(n.target.value)
        elif isinstance(n, (cst.Global, cst.Nonlocal)):
            out |= {item.name.value for item in n.names}
        elif isinstance(n, (cst.MatchAs, cst.MatchStar)) and n.name is not None:
            out.add(n.name.value)
        elif isinstance(n, (cst.FunctionDef, cst.Lambda)):
            out |= {p.name.value for p in n.params.params}
        elif isinstance(n, (cst.ClassDef,)):
            out.add(n.name.value)
        elif isinstance(n, cst.AsName) and isinstance(n.name, cst.Name):
            out.add(n.name.value)
        elif isinstance(n, (cst.Import, cst.ImportFrom)) and not isinstance(n.names, cst.ImportStar):
            out |= {a.evaluated_alias or a.evaluated_name.split(".")[0] for a in n.names}
        elif isinstance(n, cst.CompFor):
            out |= {x.value for x in walk(n.target, include_self=True) if isinstance(x, cst.Name)}
    return out


def target_kind(make: Callable[[str], cst.BaseExpression]) -> Mutation:
    def mutate(module: cst.Module) -> cst.Module:
        target = training_statement(module)
        names = _assigned_names(target) - _captured_names(module)
        return _replace(module, target, lambda node: node.visit(_ToTargets(names, make)))
    return mutate


attribute_targets = target_kind(lambda name: cst.Attribute(cst.Name("state"), cst.Name(name)))
# The key is a name, not a string: a string's quotes may clash with an f-string around the use.
subscript_targets = target_kind(lambda name: cst.Subscript(
    cst.Name("buf"), [cst.SubscriptElement(cst.Index(cst.Name(f"K_{name}")))]))


class _Annotate(cst.CSTTransformer):
    def __init__(self, declared: set[str]) -> None:
        super().__init__()
        self.declared = declared

    def leave_SimpleStatementLine(self, original_node, updated_node):  # noqa: ANN001, ANN201
        target = updated_node.body[0].targets[0].target if len(updated_node.body) == 1 and \
            isinstance(updated_node.body[0], cst.Assign) and len(updated_node.body[0].targets) == 1 else None
        if isinstance(target, cst.Attribute) or isinstance(target, cst.Name) and target.value not in self.declared:
            a = updated_node.body[0]
            return updated_node.with_changes(body=[cst.AnnAssign(
                target=a.targets[0].target, annotation=cst.Annotation(cst.parse_expression("torch.Tensor")),
                value=a.value)])
        return updated_node


def annotated(module: cst.Module) -> cst.Module:
    """``x = v`` -> ``x: torch.Tensor = v`` in the training code (not for a name declared
    global or nonlocal: an annotated one is a SyntaxError)."""
    declared = {item.name.value for n in walk(module, into_nested=True) if isinstance(n, (cst.Global, cst.Nonlocal))
                for item in n.names}
    target = training_statement(module)
    return _replace(module, target, lambda node: node.visit(_Annotate(declared)))


_COMPREHENSIONS = (
    "grads = [p.grad.norm() for p in model.parameters() if p.grad is not None]",
    "shapes = {name: [t.shape for t in group] for name, group in groups.items() if group}",
    "flat = [x for row in [[1, 2], [3]] for x in row if (y := x) > 0]",
    "total = sum(v.item() for v in {k: v for k, v in stats.items()}.values())",
)


class _Comprehensions(cst.CSTTransformer):
    def __init__(self, loop: cst.CSTNode) -> None:
        super().__init__()
        self.loop = loop

    def leave_For(self, original_node, updated_node):  # noqa: ANN001, ANN201
        if original_node is not self.loop:
            return updated_node
        gen = cst.GeneratorExp(cst.Name("item"), cst.CompFor(
            target=cst.Name("item"), iter=updated_node.iter,
            ifs=[cst.CompIf(cst.parse_expression("item is not None"))]))
        extra = [cst.parse_statement(code) for code in _COMPREHENSIONS]
        body = updated_node.body
        if isinstance(body, cst.IndentedBlock):
            body = body.with_changes(body=[*extra, *body.body])
        return updated_node.with_changes(iter=gen, body=body)


def comprehensions(module: cst.Module) -> cst.Module:
    """The loop iterates a generator over its iterable and starts with comprehension-heavy lines."""
    target = training_statement(module)
    loop = next((n for n in walk(target, into_nested=True, include_self=True)
                 if isinstance(n, cst.For) and _calls_method(n, ("backward",))), None)
    if loop is None:
        return module
    return module.visit(_Comprehensions(loop))


class _Decorate(cst.CSTTransformer):
    def leave_FunctionDef(self, original_node, updated_node):  # noqa: ANN001, ANN201
        deco = cst.Decorator(cst.parse_expression("functools.wraps(print)"))
        return updated_node.with_changes(decorators=[deco, *updated_node.decorators])


def decorators(module: cst.Module) -> cst.Module:
    """Every function gets one more decorator."""
    return module.visit(_Decorate())


def repeated(times: int) -> Mutation:
    """The file's statements ``times`` times over (``from __future__`` imports only once)."""
    def mutate(module: cst.Module) -> cst.Module:
        def future(stmt: cst.BaseStatement) -> bool:
            return isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name) and s.module.value == "__future__"
                for s in stmt.body)
        rest = [s for s in module.body if not future(s)]
        body = [s for s in module.body if future(s)] + [s.deep_clone() for _ in range(times) for s in rest]
        return module.with_changes(body=body)
    return mutate


REWRITES: dict[str, Mutation] = {
    "one_line_suites": one_line_suites,
    "walrus": walrus,
    "attribute_targets": attribute_targets,
    "subscript_targets": subscript_targets,
    "annotated": annotated,
    "comprehensions": comprehensions,
    "decorators": decorators,
}
MUTATIONS: dict[str, Mutation] = {**WRAPPERS, **REWRITES}


# Valid only last in a chain: a later wrapper would move the ``async for`` out of its async def.
_LAST_ONLY = {"async_for"}


def compositions(count: int, length: int, seed: int) -> list[tuple[str, ...]]:
    """``count`` fixed chains of ``length`` mutations (a wrapper last, so it wraps the rewritten code)."""
    rng = random.Random(seed)
    names, wrappers = sorted(set(MUTATIONS) - _LAST_ONLY), sorted(WRAPPERS)
    return [(*rng.sample(names, length - 1), rng.choice(wrappers)) for _ in range(count)]


def mutate(source: str, chain: Sequence[str]) -> str:
    module = cst.parse_module(source)
    for name in chain:
        module = MUTATIONS[name](module)
    return module.code
