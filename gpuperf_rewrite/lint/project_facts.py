"""The facts of the user's modules a checked file imports (issue 27), for the rules: each module
parsed once per content per process, its facts (``rules``' ``module_facts``) computed with its
own imports' facts, 3 imports deep, kept by a key of its content and its imports' keys, in the
process and in the lint cache (``<cache>/<fingerprint>/facts/``). Which files those are:
:mod:`gpuperf_rewrite.lint.project`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint.project import MAX_DEPTH, MAX_MODULES, content_of, imported_modules, is_first_party

# Per process: a repo lint reads and parses each module once (per worker), whichever files import
# it. Keyed by the hash of the module's content and of its imports' facts (the depth it was
# reached at matters only through those), so an edited module is read again.
_FACTS_MEMO: dict[str, Any] = {}
_CONTEXTS: dict[str, Any] = {}  # content key -> a checked file's RuleContext (``remember_facts``)


@dataclasses.dataclass
class ProjectFacts:
    """What the rules see of a checked file's first-party imports: ``modules`` (ModuleFacts by
    the module's name as the file writes it) and ``key``, a hash of every module content those
    facts were computed from (the lint cache keys a result on it)."""

    modules: dict[str, Any]
    key: str
    used: list[Path]
    child_keys: list[str] = dataclasses.field(default_factory=list)  # ``name=key`` per import


def project_facts(fs_path: str | Path, data: bytes, max_depth: int = MAX_DEPTH,
                  store: Path | None = None, root: Path | None = None) -> ProjectFacts:
    """The facts of the first-party modules the file at ``fs_path`` (content ``data``) imports,
    each computed with the facts of its own imports, ``max_depth`` imports deep; cycles end at a
    module already on the way. Nothing (and key "") for a file outside the user's code or one
    importing none of its modules. ``store``: a folder where facts are kept by content hash
    across runs (the lint cache). ``root``: the file's project root when the caller knows the
    file is first-party (``is_first_party``), so it is not looked up again."""
    path = Path(os.path.abspath(fs_path))
    if root is None:
        first_party, root = is_first_party(path)
        if not first_party:
            return ProjectFacts({}, "", [])
    modules: dict[str, Any] = {}
    keys: list[str] = []
    used: list[Path] = []
    for imported in imported_modules(path, root, data):
        if imported.path == path:
            continue
        got = _module_facts(imported.path, root, max_depth - 1, frozenset({path}), store, used)
        if got is not None:
            key, facts = got
            modules[imported.name] = dataclasses.replace(facts, path=_shown(imported.path, path))
            keys.append(f"{imported.name}={key}")
    return ProjectFacts(modules, hashlib.sha256("\n".join(keys).encode()).hexdigest() if keys else "", used,
                        keys)


def remember_facts(fs_path: str | Path, data: bytes, imports: ProjectFacts, ctx: Any) -> None:
    """Keep the context the rules just used on a checked file (its parse, index and training
    analysis built): a file of the same run importing it reads its facts off that context, by
    the same content key, instead of analysing it again. Only the last few are kept."""
    key = hashlib.sha256("\n".join([hashlib.sha256(data).hexdigest(), *imports.child_keys]).encode()).hexdigest()
    # Its kept parse is no longer needed by an importer: the context holds the module, or its
    # facts are known already. Not kept, it costs no later garbage collection a walk.
    _PARSED.pop(Path(os.path.abspath(fs_path)), None)
    if key in _FACTS_MEMO:
        return
    if len(_CONTEXTS) >= _KEEP_PARSED:
        _CONTEXTS.pop(next(iter(_CONTEXTS)))
    _CONTEXTS[key] = ctx


def _shown(module: Path, importer: Path) -> str:
    """The module's path as a message shows it: relative to the importer's folder when below it."""
    try:
        return module.relative_to(importer.parent).as_posix()
    except ValueError:
        return os.path.relpath(module, importer.parent).replace(os.sep, "/")


def _module_facts(path: Path, root: Path, depth: int, on_way: frozenset[Path], store: Path | None,
                  used: list[Path]) -> tuple[str, Any] | None:
    got = content_of(path)
    if got is None:
        return None
    data, sha = got
    used.append(path)
    child_keys: list[str] = []
    children: dict[str, Any] = {}
    if depth > 0:
        for imported in imported_modules(path, root, data):
            if imported.path in on_way or imported.path == path:
                continue  # an import cycle: the module already on the way is not read again
            sub = _module_facts(imported.path, root, depth - 1, on_way | {path}, store, used)
            if sub is not None:
                children[imported.name] = sub[1]
                child_keys.append(f"{imported.name}={sub[0]}")
    key = hashlib.sha256("\n".join([sha, *child_keys]).encode()).hexdigest()
    facts = _FACTS_MEMO.get(key)
    if facts is not None:
        if store is not None and not (store / key[:2] / f"{key[2:]}.json").exists():
            _store_facts(store, key, facts)  # known to this process, not yet to this cache
    else:
        facts = _load_facts(store, key)
        if facts is None:
            checked = _CONTEXTS.pop(key, None)
            facts = _facts_of(checked) if checked is not None else _compute_facts(path, data, sha, children)
            _store_facts(store, key, facts)
        _memo_facts(key, facts)
    return key, facts


def _memo_facts(key: str, facts: Any) -> None:
    if len(_FACTS_MEMO) >= 4 * MAX_MODULES:
        _FACTS_MEMO.pop(next(iter(_FACTS_MEMO)))
    _FACTS_MEMO[key] = facts


_PARSED: dict[Path, tuple[str, Any]] = {}  # path -> (content hash, (module, text) or None)
# Few: a folder lint meets a module and its importers close together (sorted paths), and every
# tree kept alive costs each later garbage collection a walk over its nodes.
_KEEP_PARSED = 16


def parsed_before(fs_path: str | Path, data: bytes) -> Any:
    """The LibCST module of this very content of ``fs_path`` when this process parsed it already
    (as an imported module's facts or as a checked file): a folder lint parses each file once."""
    got = _PARSED.get(Path(os.path.abspath(fs_path)))
    if got is not None and got[1] is not None and got[0] == hashlib.sha256(data).hexdigest():
        return got[1][0]
    return None


def remember_parse(fs_path: str | Path, data: bytes, module: Any, text: str) -> None:
    """Keep the engine's parse of a checked file for the files importing it."""
    _keep(Path(os.path.abspath(fs_path)), hashlib.sha256(data).hexdigest(), (module, text))


def _keep(path: Path, sha: str, parsed: Any) -> None:
    if len(_PARSED) >= _KEEP_PARSED and path not in _PARSED:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[path] = (sha, parsed)


def _parsed(path: Path, data: bytes, sha: str) -> Any:
    """The module parsed with LibCST (from its bytes, as the engine parses a checked file), once
    per content per process (a folder lint asks for a module's facts from every file importing
    it, at different depths); None when unparsable."""
    got = _PARSED.get(path)
    if got is not None and got[0] == sha:
        return got[1]
    import libcst as cst

    from gpuperf_rewrite.lint.sourceio import decode_source

    try:
        parsed: Any = (cst.parse_module(data), decode_source(data))
    except Exception:  # noqa: BLE001 - a module we cannot read offers no facts
        parsed = None
    _keep(path, sha, parsed)
    return parsed


def _compute_facts(path: Path, data: bytes, sha: str, children: dict[str, Any]) -> Any:
    """The module's facts (``rules``' ``module_facts``), read with the facts of its own imports;
    an unparsable module offers nothing (its import stays unresolved)."""
    from gpuperf_rewrite.rules._framework import ModuleFacts, RuleContext

    parsed = _parsed(path, data, sha)
    if parsed is None:
        return ModuleFacts()
    module, text = parsed
    return _facts_of(RuleContext(module, text, str(path), project=children))


def _facts_of(ctx: Any) -> Any:
    from gpuperf_rewrite.rules._framework import ModuleFacts, module_facts

    try:
        return module_facts(ctx, _line_finder(ctx))
    except Exception:  # noqa: BLE001 - (RecursionError too) a module the analysis cannot read
        return ModuleFacts()  # offers nothing: the checked file is checked as if it were alone


def _line_finder(ctx: Any) -> Any:
    """A node's line in ``ctx``'s module: one code generation for every line the facts may ask."""
    import libcst as cst

    from gpuperf_rewrite.lint.positions import node_spans

    lines: dict[Any, int] = {}

    def line_of(node: Any) -> int:
        if not lines:
            wanted = [*ctx.nodes(cst.FunctionDef), *ctx.nodes(cst.Call)]
            lines.update({n: span[0] for n, span in node_spans(ctx.module, wanted).items()})
        if node not in lines:
            lines.update({n: span[0] for n, span in node_spans(ctx.module, [node]).items()})
        return lines[node]

    return line_of


def _load_facts(store: Path | None, key: str) -> Any:
    if store is None:
        return None
    try:
        doc = json.loads((store / key[:2] / f"{key[2:]}.json").read_bytes())
    except (OSError, ValueError):
        return None
    from gpuperf_rewrite.rules._framework import ModuleFacts

    try:
        return ModuleFacts.from_json(doc)
    except (KeyError, TypeError, ValueError):
        return None


def _store_facts(store: Path | None, key: str, facts: Any) -> None:
    if store is None:
        return
    import contextlib

    from gpuperf_rewrite.lint.cache import write_atomic

    with contextlib.suppress(OSError):
        (store / key[:2]).mkdir(parents=True, exist_ok=True)
        write_atomic(store / key[:2] / f"{key[2:]}.json", json.dumps(facts.to_json()).encode())
