"""Fast tree access shared by the context and the rules: a node's children, the one
pre-order index built per file, and the one walk every helper uses."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import libcst as cst

# Nested definitions (not LibCST scopes, not function bodies): a walk that stays in one
# function does not enter these.
NESTED_DEFS = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
Loop = cst.For | cst.While  # a loop statement



class _NodeMeta(abc.ABCMeta):
    """LibCST's node classes' metaclass with the builtin class tests. ``isinstance(node, cst.Call)``
    with another node goes through ``ABCMeta.__instancecheck__``, a Python frame and the ABC
    caches (a tenth of a real project's lint, issue 34); no node class has virtual subclasses
    (``register``) or a ``__subclasshook__``, so the class's own bases answer the same."""

    __instancecheck__ = type.__instancecheck__  # type: ignore[assignment]
    __subclasscheck__ = type.__subclasscheck__  # type: ignore[assignment]

    def register(cls, subclass):  # type: ignore[no-untyped-def, override]
        """A virtual subclass needs ``ABCMeta``'s tests, on this class and on every base."""
        _restore_abc_tests()
        return abc.ABCMeta.register(cls, subclass)


def _fast_class_tests(root: type = cst.CSTNode) -> None:
    """Give every node class (abstract bases too) :class:`_NodeMeta`; classes made later from
    them get it as their metaclass. A class with its own ``__subclasshook__`` or an unexpected
    metaclass keeps ``ABCMeta``'s tests. LibCST registers no virtual subclass; should anything
    ``register`` one later, every class goes back to ``ABCMeta``'s tests first (:meth:`_NodeMeta.register`)."""
    todo, seen = [root], set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
        if type(cls) is abc.ABCMeta and "__subclasshook__" not in cls.__dict__:
            try:
                cls.__class__ = _NodeMeta
                _FAST.append(cls)
            except TypeError:
                pass


def _restore_abc_tests() -> None:
    for cls in _FAST:
        cls.__class__ = abc.ABCMeta
    _FAST.clear()


_FAST: list[type] = []  # the node classes given the builtin tests


_fast_class_tests()

def _unchecked(self: cst.CSTNode) -> None:
    pass


@contextmanager
def unchecked_nodes() -> Iterator[None]:
    """Nodes built meanwhile skip LibCST's validation (``CSTNode.__post_init__``): for LibCST's
    parser, whose nodes of parsed code pass it anyway (its own note there says a parsed tree need
    not be validated), and its metadata visitors, which rebuild every node they pass from children
    that passed it and drop the copy: a tenth of a parse, more of a scope analysis. Nodes built
    elsewhere (fixes) are still validated. tests/rules/test_walk_memo.py: the same trees."""
    base = cst.CSTNode
    saved = base.__dict__.get("__post_init__")
    if saved is None or saved is _unchecked:  # another LibCST, or already inside
        yield
        return
    base.__post_init__ = _unchecked  # type: ignore[method-assign]
    try:
        yield
    finally:
        base.__post_init__ = saved  # type: ignore[method-assign]


_CHILD_FIELDS: dict[type, tuple[str, ...] | None] = {}
_DEFAULT = cst.MaybeSentinel.DEFAULT


def _child_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of a node type that hold its children, in the order LibCST visits them
    (source order). Read once per type from its ``_visit_and_replace_children``, whose calls
    name each child field (``visit_required(self, "body", ...)``): the field names among its
    code's constants, which Python keeps in order of first use (reading its source instead cost
    each lint of a training script ~25 ms of tokenizing LibCST's files). None when that cannot
    be read, and the walk falls back to ``node.children``. tests/rules/test_fast_paths.py checks
    the result against LibCST's own visitor and against the source."""
    try:
        return _CHILD_FIELDS[cls]
    except KeyError:
        pass
    try:
        consts = cls._visit_and_replace_children.__code__.co_consts
        names = {f.name for f in dataclasses.fields(cls)}
        fields: tuple[str, ...] | None = tuple(c for c in consts if type(c) is str and c in names)
    except (AttributeError, TypeError):
        fields = None
    _CHILD_FIELDS[cls] = fields
    return fields


def children_of(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` without its cost. LibCST computes ``children`` by running a visitor
    that rebuilds (and re-validates) the node; reading the child fields directly is several
    times faster and returns the same nodes in the same order."""
    read = _READERS.get(type(node))
    if read is None:
        read = _reader(type(node))
    return read(node)


# node type -> the function that lists a node's children (:func:`_reader`)
_READERS: dict[type, Callable[[cst.CSTNode], list[cst.CSTNode]]] = {}


def _reader(cls: type) -> Callable[[cst.CSTNode], list[cst.CSTNode]]:
    """The children of a ``cls`` node, read field by field in :func:`_child_fields`' order by a
    function written for the type: plain attribute reads instead of a loop of ``getattr`` over
    the names (the tree walks were a fifth of a lint of library code, issue 34). A child field
    holds a node, a sequence of nodes, None or MaybeSentinel.DEFAULT; exact type tests, as
    isinstance on LibCST's abstract node classes is slow."""
    fields = _child_fields(cls)
    if fields is None or not all(name.isidentifier() for name in fields):
        read: Callable[[cst.CSTNode], list[cst.CSTNode]] = lambda node: list(node.children)  # noqa: E731
    else:
        lines = ["def read(node):", "    kids = []"]
        for name in fields:
            lines += [f"    value = node.{name}",
                      "    if value is not None and value is not DEFAULT:",
                      "        if type(value) is tuple or type(value) is list:",
                      "            kids.extend(value)",
                      "        else:",
                      "            kids.append(value)"]
        lines.append("    return kids")
        space: dict[str, Any] = {"DEFAULT": _DEFAULT}
        exec(compile("\n".join(lines), f"<children of {cls.__name__}>", "exec"), space)  # noqa: S102
        read = space["read"]
    _READERS[cls] = read
    return read


def suite_statements(suite: cst.BaseSuite | cst.Module) -> list[cst.BaseStatement | cst.BaseSmallStatement]:
    """The statements directly in a block, whatever its shape: each compound statement and each
    small statement of the simple lines of an indented block (or a module), the small statements
    of a one-line suite (``if ddp: model.sync = last``). A block's ``body`` holds lines in one
    shape and small statements in the other, and a compound line's ``body`` is a suite, not a
    sequence: code that iterates ``.body`` twice down crashes on the shape it did not expect."""
    if isinstance(suite, cst.SimpleStatementSuite):
        return list(suite.body)
    out: list[cst.BaseStatement | cst.BaseSmallStatement] = []
    for line in suite.body:
        if isinstance(line, cst.SimpleStatementLine):
            out.extend(line.body)
        else:
            out.append(line)
    return out


def walk(node: cst.CSTNode, *, into_nested: bool = False, include_self: bool = False,
         stop_at: tuple[type, ...] = ()) -> Iterator[cst.CSTNode]:
    """The nodes below ``node`` in source (pre-)order, ``node`` itself first when
    ``include_self``. Nested functions, classes and lambdas are yielded but not entered unless
    ``into_nested``; nodes of the ``stop_at`` types are yielded but not entered either.

    The rules and facts walk the same subtree with the same options again and again (a
    function's body once per question asked of it: four in five nodes a lint walks were walked
    before, issue 34): from the second walk on, the nodes are read off a list kept for the
    subtree (:data:`_WALKS`). A tree never changes, so the list is what a fresh walk yields."""
    key = (id(node), into_nested, include_self, stop_at)
    got = _WALKS.get(key)
    if got is not None and got[0] is node:  # (the entry holds the node: its id is not reused)
        return iter(got[1])
    if key not in _ASKED:  # a first walk stays lazy: many callers stop at the first match
        _ASKED.add(key)
        return _walk(node, into_nested, include_self, stop_at)
    nodes = list(_walk(node, into_nested, include_self, stop_at))
    _keep_walk(key, node, nodes)
    return iter(nodes)


# Kept walks: (id, options) -> (node, its nodes), bounded by the nodes they list; the keys of walks
# asked for once (an id reused after its node is freed only makes a first walk kept early).
_WALKS: dict[tuple[int, bool, bool, tuple[type, ...]], tuple[cst.CSTNode, list[cst.CSTNode]]] = {}
_ASKED: set[tuple[int, bool, bool, tuple[type, ...]]] = set()
_KEPT = [0]  # nodes listed in _WALKS
_MAX_KEPT = 300_000  # ~2.4 MB of lists; the trees they hold are the ones being checked


def _keep_walk(key: tuple[int, bool, bool, tuple[type, ...]], node: cst.CSTNode, nodes: list[cst.CSTNode]) -> None:
    if _KEPT[0] + len(nodes) > _MAX_KEPT:
        forget_walks()
    _WALKS[key] = (node, nodes)
    _KEPT[0] += len(nodes)


def forget_walks() -> None:
    """Drop the kept walks (the lint driver calls this before each file's check, so that they
    hold no tree of a file checked before; a walk is the same kept or not)."""
    _WALKS.clear()
    _ASKED.clear()
    _KEPT[0] = 0


def _walk(node: cst.CSTNode, into_nested: bool, include_self: bool,
          stop_at: tuple[type, ...]) -> Iterator[cst.CSTNode]:
    barrier = stop_at if into_nested else (*NESTED_DEFS, *stop_at)
    exact = exact_types(barrier)
    if include_self:
        stack = [node]
    else:
        stack = children_of(node)
        stack.reverse()
    readers = _READERS
    while stack:
        cur = stack.pop()
        yield cur
        if (type(cur) in exact) if exact is not None else (barrier and isinstance(cur, barrier)):
            continue
        read = readers.get(type(cur))  # children_of, inlined: the walks' innermost loop
        kids = read(cur) if read is not None else _reader(type(cur))(cur)
        kids.reverse()
        stack.extend(kids)


_EXACT: dict[tuple[type, ...], frozenset[type] | None] = {}


def exact_types(types: tuple[type, ...]) -> frozenset[type] | None:
    """``types`` as a set to test ``type(node)`` against when none of them has subclasses (the
    nested definitions: LibCST's node classes are ABCs, and ``isinstance`` on them goes through
    ``ABCMeta``, a few percent of a lint); None when one has (``BaseExpression``): ``isinstance``."""
    got = _EXACT.get(types, _DEFAULT)
    if got is _DEFAULT:
        got = frozenset(types) if all(isinstance(t, type) and not t.__subclasses__()
                                      for t in types) else None
        _EXACT[types] = got
    return got  # type: ignore[return-value]


def index(module: cst.Module) -> tuple[dict[cst.CSTNode, cst.CSTNode], dict[type, list[cst.CSTNode]],
                                       list[cst.CSTNode]]:
    """One pre-order walk of the file that records parents, groups the nodes by type and keeps
    source order, so every rule shares a single walk of the tree instead of walking it itself."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    by_type: dict[type, list[cst.CSTNode]] = {}
    order: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    readers = _READERS
    while stack:
        node = stack.pop()
        order.append(node)
        cls = type(node)
        group = by_type.get(cls)
        if group is None:
            by_type[cls] = [node]
        else:
            group.append(node)
        read = readers.get(cls)  # children_of, inlined
        kids = read(node) if read is not None else _reader(cls)(node)
        if kids:
            for kid in kids:
                parents[kid] = node
            kids.reverse()
            stack.extend(kids)
    return parents, by_type, order
