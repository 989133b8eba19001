"""Where a setting the run saw came from: the config file and key behind a construction line.

A run-time finding (:mod:`.runfindings`) sits at the line that built the object:
``DataLoader(ds, sampler=s, **loader_cfg)`` in a factory. When the keyword came, or could have
come, from a config file the run read (``observed.config_files``), the finding names the file and
key: ``loader.num_workers`` missing in config.yaml. This is read, never run: the construction
line's source (``**loader_cfg``), the first-party frames of the stack that built the object (the
caller passed ``cfg["loader"]`` as ``loader_cfg``) and the config file itself. A path is named
only when it resolves in a config file to a mapping (or, for a keyword given outright, a scalar).

:func:`edit_yaml` writes such a key with a round-trip parser (ruamel.yaml): comments, key order
and quoting kept, the key added at the end of its mapping.
"""

from __future__ import annotations

import ast
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

MAX_HOPS = 8  # frames followed from the construction line up to where the config is indexed
_GET = "get"


@dataclass(frozen=True)
class ConfigKey:
    """A setting's place in a config file: ``file`` (absolute), ``keys`` (the mapping's path),
    ``name`` (the setting), and its value there (``present`` False: missing)."""

    file: str
    keys: tuple[str, ...]
    name: str
    present: bool
    value: Any = None

    @property
    def dotted(self) -> str:
        return ".".join((*self.keys, self.name))

    def describe(self, shown: str) -> str:
        if self.present:
            return f"`{self.dotted}: {json.dumps(self.value)}` in {shown}"
        return f"`{self.dotted}` missing in {shown}"

    def to_json(self, shown: str) -> dict[str, Any]:
        return {"file": shown, "key": self.dotted, "present": self.present, "value": self.value}


def parse_cached(path: str, cache: dict[str, ast.Module | None]) -> ast.Module | None:
    """``path`` parsed with ``ast`` once per ``cache``; None when it cannot be read or parsed."""
    return _parse(path, cache)


def _parse(path: str, cache: dict[str, ast.Module | None]) -> ast.Module | None:
    if path not in cache:
        try:
            cache[path] = ast.parse(Path(path).read_bytes(), path)
        except (OSError, SyntaxError, ValueError):
            cache[path] = None
    return cache[path]


def _calls_at(tree: ast.Module, line: int) -> list[ast.Call]:
    """Calls whose span holds ``line``, the innermost (latest start, shortest) first."""
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return sorted(found, key=lambda n: (-n.lineno, (n.end_lineno or n.lineno) - n.lineno, -n.col_offset))


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def call_at(path: str, line: int, names: Sequence[str] = (), cache: dict[str, ast.Module | None] | None = None
            ) -> ast.Call | None:
    """The call at ``line`` of ``path`` (the one named in ``names`` when given, e.g. ``DataLoader``)."""
    tree = _parse(path, {} if cache is None else cache)
    if tree is None:
        return None
    calls = _calls_at(tree, line)
    for call in calls if names else ():
        if _callee(call) in names:
            return call
    starting = [c for c in calls if c.lineno == line]  # the outermost call the line starts: the construction
    return starting[-1] if starting else (calls[0] if calls else None)


def _index_path(expr: ast.expr) -> tuple[ast.expr, tuple[str, ...]] | None:
    """``cfg["a"].b.get("c", {})`` -> (``cfg``, ("a", "b", "c")); None for anything else."""
    keys: list[str] = []
    while True:
        if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
            keys.append(expr.slice.value)
            expr = expr.value
        elif isinstance(expr, ast.Attribute):
            keys.append(expr.attr)
            expr = expr.value
        elif (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == _GET
              and expr.args and isinstance(expr.args[0], ast.Constant) and isinstance(expr.args[0].value, str)):
            keys.append(expr.args[0].value)
            expr = expr.func.value
        elif isinstance(expr, ast.Name):
            return expr, tuple(reversed(keys))
        else:
            return None


def _enclosing_function(tree: ast.Module, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    return best


def _param_slot(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> tuple[int | None, str] | None:
    """(positional index or None, name) of parameter ``name``; None when it is not one."""
    positional = [*fn.args.posonlyargs, *fn.args.args]
    for i, a in enumerate(positional):
        if a.arg == name:
            return i, name
    if any(a.arg == name for a in fn.args.kwonlyargs):
        return None, name
    return None


def _argument(call: ast.Call, slot: tuple[int | None, str], method: bool) -> ast.expr | None:
    index, name = slot
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if index is not None:
        index -= 1 if method else 0
        if 0 <= index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
            return call.args[index]
    return None


def _assignments(scope: ast.AST, name: str, before: int) -> list[ast.expr]:
    """The values of ``name = VALUE`` in ``scope`` before line ``before``."""
    return [n.value for n in ast.walk(scope) if isinstance(n, ast.Assign) and n.lineno < before
            and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]


def _single_assignment(fn: ast.AST, name: str, before: int) -> ast.expr | None:
    """The value of ``name = VALUE`` when it is the name's only assignment in ``fn`` before ``before``."""
    values = _assignments(fn, name, before)
    return values[0] if len(values) == 1 else None


def _loaded(scope: ast.AST, name: str, before: int) -> bool:
    """``name`` holds what a call returned (``cfg = yaml.safe_load(f)``, ``load_config(path)``):
    a loaded config may be it. Not a dict built in the code (``dict(fused=True)``, ``{...}``)."""
    values = _assignments(scope, name, before)
    return bool(values) and all(isinstance(v, ast.Call) and _callee(v) != "dict" for v in values)


def key_path(expr: ast.expr, site: Mapping[str, Any], cache: dict[str, ast.Module | None]) -> tuple[str, ...] | None:
    """The keys of the config value ``expr`` (written at ``site``'s line) is, followed through
    parameters to the caller's argument (``site['stack']``, innermost first) and through single
    local assignments; None when the trail leaves what can be read."""
    frames = [dict(f) for f in (site.get("stack") or [site])]
    keys: tuple[str, ...] = ()
    hop = steps = 0
    while hop < len(frames) and hop < MAX_HOPS and steps < 4 * MAX_HOPS:
        steps += 1
        frame = frames[hop]
        found = _index_path(expr)
        if found is None:
            return None
        name, more = found
        keys = more + keys
        tree = _parse(str(frame["path"]), cache)
        fn = _enclosing_function(tree, int(frame["line"])) if tree is not None else None
        if fn is None:  # module level: a name loaded there is the config itself
            return keys if keys and tree is not None and _loaded(tree, name.id, int(frame["line"])) else None
        local = _single_assignment(fn, name.id, int(frame["line"]))
        if local is not None and _index_path(local) is not None:
            expr = local
            continue
        slot = _param_slot(fn, name.id)
        if slot is None:  # a local loaded in this function (cfg = yaml.safe_load(f)): the root
            return keys if keys and _loaded(fn, name.id, int(frame["line"])) else None
        if hop + 1 >= len(frames):  # the outermost first-party function, called by a library
            return keys or None  # (Hydra's main(cfg)): its parameter is the config; the file check decides
        caller = frames[hop + 1]
        call = call_at(str(caller["path"]), int(caller["line"]), (fn.name,), cache)
        if call is None or _callee(call) != fn.name:
            return None
        is_method = bool(fn.args.args) and fn.args.args[0].arg in ("self", "cls")
        arg = _argument(call, slot, is_method)
        if arg is None:
            return None
        expr = arg
        hop += 1
    return None


def load_config(path: str) -> Any:
    """A config file's data (YAML, JSON or TOML by its suffix); None when it cannot be read."""
    try:
        data = Path(path).read_bytes()
        suffix = Path(path).suffix.lower()
        if suffix == ".json":
            return json.loads(data)
        if suffix == ".toml":
            import tomllib

            return tomllib.loads(data.decode())
        import yaml

        return yaml.safe_load(data)
    except Exception:  # noqa: BLE001 (a config we cannot read only costs its attribution)
        return None


def _walk(data: Any, keys: Sequence[str]) -> Any:
    for k in keys:
        if not isinstance(data, Mapping) or k not in data:
            return _MISSING
        data = data[k]
    return data


_MISSING = object()


def locate(call: ast.Call, setting: str, site: Mapping[str, Any], config_files: Sequence[Mapping[str, Any]],
           cache: dict[str, ast.Module | None], agree: Mapping[str, Any] | None = None) -> ConfigKey | None:
    """Where ``setting`` (a keyword of ``call``) comes from in the run's config files: the keyword's
    own value when it is given and indexes a config (``num_workers=cfg["workers"]``), else the
    ``**`` mapping it would be added to. ``agree``: settings the mapping must not contradict
    (observed values such as ``batch_size``), so a same-named key elsewhere is not taken."""
    files = [str(f["path"]) for f in config_files if f.get("path")]
    given = next((kw.value for kw in call.keywords if kw.arg == setting), None)
    if given is not None:
        keys = key_path(given, site, cache)
        if not keys:
            return None
        for f in files:
            value = _walk(load_config(f), keys)
            if value is not _MISSING and not isinstance(value, (Mapping, list)):
                return ConfigKey(f, keys[:-1], keys[-1], True, value)
        return None
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        keys = key_path(kw.value, site, cache)
        if keys is None:
            continue
        found = []
        for f in files:
            mapping = _walk(load_config(f), keys)
            if not isinstance(mapping, Mapping):
                continue
            if agree and any(k in mapping and mapping[k] != v for k, v in agree.items() if v is not None):
                continue
            found.append(ConfigKey(f, keys, setting, setting in mapping, mapping.get(setting)))
        # Several configs (a base and an override): the one that sets the key decides its value.
        present = [c for c in found if c.present]
        if present or found:
            return (present or found)[-1] if present else found[0]
    return None


def shown_path(path: str) -> str:
    """As lint shows paths: relative to the working directory unless that climbs out."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


class ConfigEditError(Exception):
    """The config cannot be written with the setting (not YAML, the key's mapping is gone)."""


def edit_yaml(data: bytes, keys: Sequence[str], name: str, value: Any) -> bytes:
    """``data`` with ``keys...name: value`` set (added at the end of its mapping when missing),
    through ruamel.yaml's round-trip mode: comments, order, quoting and indentation kept."""
    try:
        from ruamel.yaml import YAML
    except ImportError as exc:  # the validate extra brings it
        raise ConfigEditError("writing a YAML config needs ruamel.yaml (pip install 'gpuperf-rewrite[validate]')") from exc
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    _match_indent(yaml, data)
    try:
        doc = yaml.load(data)
    except Exception as exc:  # noqa: BLE001 (any parse error: the file is left alone)
        raise ConfigEditError(f"cannot parse as YAML: {exc}") from None
    _mapping_at(doc, keys, "mapping", "a mapping")[name] = value
    out = io.BytesIO()
    yaml.dump(doc, out)
    return out.getvalue()


def edit_json(data: bytes, keys: Sequence[str], name: str, value: Any) -> bytes:
    """``data`` with ``keys...name: value`` set, when the file is laid out as ``json.dumps`` with
    its indent lays it out (key order kept, the key added last in its object); a JSON file in
    another layout is refused rather than reformatted."""
    try:
        text = data.decode()
        doc = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigEditError(f"cannot parse as JSON: {exc}") from None
    indent = _json_indent(text)
    if json.dumps(doc, indent=indent, ensure_ascii=False) != text.rstrip("\n"):
        raise ConfigEditError("its layout is not one this tool can keep (JSON is rewritten whole): edit it by hand")
    _mapping_at(doc, keys, "object", "an object")[name] = value
    tail = text[len(text.rstrip("\n")):]
    return (json.dumps(doc, indent=indent, ensure_ascii=False) + tail).encode()


def _mapping_at(doc: Any, keys: Sequence[str], kind: str, a_kind: str) -> dict[Any, Any]:
    """The mapping at ``keys`` of a loaded config (YAML's mapping, JSON's object), or why not."""
    node = doc
    for k in keys:
        if not isinstance(node, Mapping) or k not in node:
            raise ConfigEditError(f"no {kind} at `{'.'.join(keys)}`")
        node = node[k]
    if not isinstance(node, dict):
        raise ConfigEditError(f"`{'.'.join(keys)}` is not {a_kind}")
    return node


def _json_indent(text: str) -> int | None:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" ")
        if stripped:
            return len(line) - len(stripped) or None
    return None


def edit_config(path: str, data: bytes, keys: Sequence[str], name: str, value: Any) -> bytes:
    """A YAML or JSON config's bytes with the setting written (by the file's suffix)."""
    if path.lower().endswith(".json"):
        return edit_json(data, keys, name, value)
    return edit_yaml(data, keys, name, value)


def _match_indent(yaml: Any, data: bytes) -> None:
    """Indent as the file does (the first indented key's depth; two spaces when none)."""
    for line in data.decode(errors="replace").splitlines():
        stripped = line.lstrip(" ")
        if stripped and not stripped.startswith("#") and len(stripped) < len(line):
            width = len(line) - len(stripped)
            if stripped.startswith("- "):
                yaml.indent(mapping=width, sequence=width + 2, offset=width)
            else:
                yaml.indent(mapping=width, sequence=width, offset=0)
            return
