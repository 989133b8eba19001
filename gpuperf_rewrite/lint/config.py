"""Configuration from ``[tool.gpuperf]`` in pyproject.toml or from ``.gpuperf.yaml``.

Both are read with safe loaders (tomllib, ``yaml.safe_load``): a config file is data and can
never make the tool run anything. Unknown keys, unknown rule codes and ill-typed values are
errors that name the file (and the line, where the parser reports one).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

from gpuperf_rewrite.lint.registry import SelectionError, all_rules, codes_matching

YAML_NAMES = (".gpuperf.yaml", ".gpuperf.yml")
KNOWN_KEYS = {"select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores", "rules"}


class ConfigError(ValueError):
    """An invalid configuration (exit 2)."""


@dataclasses.dataclass
class Config:
    root: Path
    path: Path | None = None
    select: list[str] | None = None
    ignore: list[str] = dataclasses.field(default_factory=list)
    extend_select: list[str] = dataclasses.field(default_factory=list)
    exclude: list[str] | None = None
    extend_exclude: list[str] = dataclasses.field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    rule_options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def find_config(start: Path) -> Path | None:
    """The nearest ``.gpuperf.yaml`` or ``pyproject.toml`` with a ``[tool.gpuperf]`` table,
    from ``start`` upwards. In one directory the YAML file wins."""
    start = start.resolve()
    for directory in (start, *start.parents):
        for name in YAML_NAMES:
            if (directory / name).is_file():
                return directory / name
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            try:
                data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{pyproject}: invalid TOML: {exc}") from exc
            if "gpuperf" in data.get("tool", {}):
                return pyproject
    return None


def load_config(path: Path | None, root: Path | None = None) -> Config:
    if path is None:
        return Config(root=(root or Path.cwd()).resolve())
    path = path.resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    if path.name == "pyproject.toml":
        try:
            data = tomllib.loads(text).get("tool", {}).get("gpuperf", {})
        except tomllib.TOMLDecodeError as exc:  # message carries "(at line N, column M)"
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
        where = f"{path} [tool.gpuperf]"
    else:
        import yaml  # only for YAML configs: ~20 ms of start-up that pyproject users never pay

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(f"{path}: invalid YAML{line}: {problem}") from exc
        where = str(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a table of settings, got {type(data).__name__}")
    try:
        return parse_config(data, where, path.parent, path)
    except ConfigError as exc:
        raise ConfigError(_with_line(str(exc), where, text, list(data))) from exc


def _with_line(message: str, where: str, text: str, keys: list[str]) -> str:
    """Point at the line of the offending key (``where: 'select' must be ...`` -> ``where:
    line 3: 'select' must be ...``): the parsers keep no positions for valid documents."""
    import re

    body = message[len(where) + 2:] if message.startswith(where + ": ") else message
    quoted = re.match(r"'([^']+)'", body)
    if not quoted:
        return message
    key = quoted.group(1).split(".")[0]
    if key not in keys:
        return message
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*[:=]")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return f"{where}: line {number}: {body}"
    return message


def _str_list(value: Any, key: str, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: '{key}' must be a list of strings")
    return list(value)


def _check_codes(codes: list[str], key: str, where: str) -> None:
    try:
        codes_matching(codes)
    except SelectionError as exc:
        raise ConfigError(f"{where}: '{key}': {exc}") from exc


def parse_config(data: dict[str, Any], where: str, root: Path, path: Path | None = None) -> Config:
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                          f"expected one of {', '.join(sorted(KNOWN_KEYS))}")
    cfg = Config(root=root.resolve(), path=path)
    if "select" in data:
        cfg.select = _str_list(data["select"], "select", where)
        _check_codes(cfg.select, "select", where)
    for key, attr in (("ignore", "ignore"), ("extend-select", "extend_select")):
        if key in data:
            setattr(cfg, attr, _str_list(data[key], key, where))
            _check_codes(getattr(cfg, attr), key, where)
    if "exclude" in data:
        cfg.exclude = _str_list(data["exclude"], "exclude", where)
    if "extend-exclude" in data:
        cfg.extend_exclude = _str_list(data["extend-exclude"], "extend-exclude", where)
    if "per-file-ignores" in data:
        pfi = data["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{where}: 'per-file-ignores' must map file patterns to rule codes")
        for pattern, codes in pfi.items():
            lst = _str_list(codes, f"per-file-ignores.{pattern}", where)
            _check_codes(lst, f"per-file-ignores.{pattern}", where)
            cfg.per_file_ignores[str(pattern)] = lst
    if "rules" in data:
        cfg.rule_options = parse_rule_options(data["rules"], where)
    return cfg


def parse_rule_options(table: Any, where: str) -> dict[str, dict[str, Any]]:
    """``rules = {GP201 = {max-workers = 4}}``: per-rule options, keyed by code or rule name,
    checked against the options (and their types) that each rule declares."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: 'rules' must be a table of rule code -> options")
    registry = all_rules()
    by_name = {r.name: r for r in registry.values()}
    out: dict[str, dict[str, Any]] = {}
    for key, opts in table.items():
        rule = registry.get(str(key).upper()) or by_name.get(str(key))
        if rule is None:
            raise ConfigError(f"{where}: 'rules': unknown rule {key!r}")
        if not isinstance(opts, dict):
            raise ConfigError(f"{where}: 'rules.{key}' must be a table of options")
        for opt, value in opts.items():
            if opt not in rule.options:
                known = ", ".join(sorted(rule.options)) or "none"
                raise ConfigError(f"{where}: 'rules.{key}': unknown option {opt!r} "
                                  f"(options of {rule.code}: {known})")
            default = rule.options[opt]
            if default is not None and not isinstance(value, type(default)) and \
                    not (isinstance(default, float) and isinstance(value, int)):
                raise ConfigError(f"{where}: 'rules.{key}.{opt}' must be "
                                  f"{type(default).__name__}, got {type(value).__name__}")
        out[rule.code] = dict(opts)
    return out
