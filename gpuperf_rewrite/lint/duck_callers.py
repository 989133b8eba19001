"""Per-step calls of a checked module's methods from modules that never import it (issue 34):
``model.set_input(data)`` in ``train.py``'s loop on what ``create_model(opt)`` built from a class
picked by name, ``algo.log_info(info)`` in a ``run_epoch(model, ...)`` helper handed the object,
``self.agents.record_transition(...)`` in a trainer given an agent. The caller cannot resolve the
receiver's class, and the module defining the method is not among its imports, so the import graph
(``step_callers``) never links the two; the method runs on every step all the same.

Read off the looping modules' own facts: each records such a call as ``StepCall("?", "?.m", ...,
note=receiver)`` (``rules``' ``facts.receiver_guess``). Here, for a checked module whose classes
define ``m``, the project's files that call ``.m(`` in a loop are found by a byte scan (once per
run and project), and their step calls read; each match is a ``StepCaller`` of ``Class.m`` with a
note that the receiver's class was not resolved (the findings say so); a call the caller resolved by name to
one of the module's classes counts too, though the caller imports the module by no import statement
(a model zoo loaded by ``importlib``). A name that many looping
files call is too generic to say anything: left out.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from gpuperf_rewrite.lint import project_index
from gpuperf_rewrite.lint.project_files import project_files, shown_path

MAX_FILES_PER_NAME = 12  # looping files calling ``.m(``: more, and the name is too generic to follow
MAX_CALLERS = 4  # looping files read for one checked module

_CLASS = re.compile(rb"^class[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_DEF = re.compile(rb"^([ \t]+)def[ \t]+([A-Za-z_]\w*)[ \t]*\([ \t]*self\b", re.MULTILINE)
# ``recv.m(``, ``self.recv.m(``: not ``self.m(`` nor ``super().m(`` (the class's own calls)
_CALLED = re.compile(rb"(?<![\w.])(?!self\.[A-Za-z_]\w*[ \t]*\()[A-Za-z_][\w.]*\.([A-Za-z_]\w*)[ \t]*\(")
_LOOP = re.compile(rb"^[ \t]*(?:for|while)\b", re.MULTILINE)
# A looping file whose loop may be a step or eval loop (read off bytes, as ``step_callers._may_loop``).
_STEP_WORDS = (b"backward", b".step(", b"_step(", b"loader", b"Loader", b"no_grad", b"inference_mode", b".eval(",
               b"optimize", b"train", b"update")


_SELF_CALL = re.compile(rb"self\.([A-Za-z_]\w*)[ \t]*\(")


def _method_bodies(data: bytes) -> dict[tuple[str, str], bytes]:
    """(class, method) -> the method's text, for the methods of the module's top-level classes
    (read off indentation: a method is the lines below its ``def`` indented deeper than it)."""
    out: dict[tuple[str, str], bytes] = {}
    cls = None
    current: tuple[str, str] | None = None
    lines: list[bytes] = []
    for line in data.splitlines():
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if stripped and not stripped.startswith(b"#") and indent <= 4 and current is not None and \
                not (indent == 4 and stripped.startswith((b")", b"]"))):
            out[current] = b"\n".join(lines)
            current, lines = None, []
        if indent == 0 and stripped.startswith(b"class "):
            m = _CLASS.match(line)
            cls = m.group(1).decode() if m else None
        elif indent == 0 and stripped and not stripped.startswith((b"#", b"@", b")")):
            cls = None
        elif cls is not None and (m := _DEF.match(line)) is not None and len(m.group(1).expandtabs(4)) == 4:
            current, lines = (cls, m.group(2).decode()), []
        elif current is not None:
            lines.append(line)
    if current is not None:
        out[current] = b"\n".join(lines)
    return out


def stepping_methods(data: bytes) -> dict[str, set[str]]:
    """Class -> its methods one call of which runs a whole training step, as the text says: a
    backward and an optimizer step in the method or the ``self.`` methods it calls (a GAN model's
    ``optimize_parameters`` calling ``self.update_D()`` and ``self.update_G()``)."""
    if b"backward" not in data or b".step(" not in data:
        return {}
    bodies = _method_bodies(data)
    own: dict[tuple[str, str], tuple[bool, bool, set[str]]] = {
        key: (b"backward(" in body, b".step(" in body, {m.decode() for m in _SELF_CALL.findall(body)})
        for key, body in bodies.items()}
    out: dict[str, set[str]] = {}
    for (cls, name) in own:
        seen, todo, back, step = set(), [name], False, False
        while todo:
            m = todo.pop()
            if m in seen or (cls, m) not in own:
                continue
            seen.add(m)
            b, s, calls = own[(cls, m)]
            back, step = back or b, step or s
            todo += calls
        if back and step:
            out.setdefault(cls, set()).add(name)
    return out


# What a method's own text must hold for a per-step rule to find something in it.
_WORK_WORDS = (b".item(", b".tolist(", b".cpu(", b".numpy(", b"float(", b"int(", b"bool(", b".to(", b".cuda(",
               b"synchronize", b"print(", b"Tensor(", b"tensor(", b"from_numpy(", b"isnan", b"isfinite", b".data",
               b"type(", b".all(", b".any(", b"randn(", b"rand(", b"zeros(", b"ones(", b"arange(")


def class_methods(data: bytes) -> dict[str, list[str]]:
    """Public method name -> the top-level classes of the module (bytes) that define it."""
    from gpuperf_rewrite.rules.analysis.facts.receiver_guess import generic_methods

    generic = generic_methods()
    starts = [(m.start(), m.group(1).decode()) for m in _CLASS.finditer(data)]
    out: dict[str, list[str]] = {}
    for m in _DEF.finditer(data):
        name = m.group(2).decode()
        if name.startswith("_") or name in generic or len(m.group(1).expandtabs(4)) != 4:
            continue
        owner = next((cls for at, cls in reversed(starts) if at < m.start()), None)
        if owner is not None and owner not in out.setdefault(name, []):
            out[name].append(owner)
    return {k: v for k, v in out.items() if v}


# (search root, run) -> (method name -> the looping files calling ``.name(``, method name -> the
# files defining it in a class)
_INDEX: dict[tuple[str, str], tuple[dict[str, list[Path]], dict[str, list[Path]]]] = {}


def _scan(root: Path) -> tuple[dict[str, list[Path]], dict[str, list[Path]]]:
    run = project_index.current_run() or ""
    memo = (os.path.abspath(root), run)
    if run and memo in _INDEX:
        return _INDEX[memo]
    calls: dict[str, list[Path]] = {}
    defs: dict[str, list[Path]] = {}
    for path in project_files(root)[0]:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for name in {m.group(2) for m in _DEF.finditer(data) if len(m.group(1).expandtabs(4)) == 4}:
            defs.setdefault(name.decode(), []).append(path)
        if not _LOOP.search(data) or not any(w in data for w in _STEP_WORDS):
            continue
        for name in {m.group(1) for m in _CALLED.finditer(data)}:
            calls.setdefault(name.decode(), []).append(path)
    got = (calls, defs)
    if run:
        if len(_INDEX) >= 8:
            _INDEX.pop(next(iter(_INDEX)))
        _INDEX[memo] = got
    return got


def _call_index(root: Path) -> dict[str, list[Path]]:
    return _scan(root)[0]


def duck_caller_files(path: Path, data: bytes, search: Path, known: set[Path]) -> tuple[dict[str, list[str]], list[Path]]:
    """The checked module's public methods by name, and the looping files (other than it and
    ``known``, its importers already read) that call one of them by name, a few at most."""
    methods = class_methods(data)
    if methods:  # only methods whose own text holds per-step work (a read, a copy, a print) or a step
        bodies = _method_bodies(data)
        stepping = stepping_methods(data)
        methods = {m: [c for c in classes if m in stepping.get(c, ()) or
                       any(w in bodies.get((c, m), b"") for w in _WORK_WORDS)] for m, classes in methods.items()}
        methods = {m: classes for m, classes in methods.items() if classes}
    if not methods:
        return {}, []
    index = _call_index(search)
    files: list[Path] = []
    for name in sorted(methods):
        found = [p for p in index.get(name, ()) if p != path]
        if len(found) > MAX_FILES_PER_NAME:
            continue
        files += [p for p in found if p not in files and p not in known]
    # the nearest first (``skrl/trainers/torch/`` for ``skrl/agents/torch/base.py``, not ``trainers/jax/``)
    files.sort(key=lambda p: (-len(set(p.relative_to(search).parts) & set(path.relative_to(search).parts))
                              if p.is_relative_to(search) and path.is_relative_to(search) else 0, str(p)))
    return methods, files[:MAX_CALLERS]


def duck_callers(path: Path, data: bytes, search: Path, store: Path | None, known: set[Path]) -> list[Any]:
    """The ``StepCaller``s of the checked module at ``path`` whose callers hold an object of no
    resolved class (see the module doc); ``search``: the root its importers are looked for in."""
    from gpuperf_rewrite.lint.project_facts import step_calls_of_node
    from gpuperf_rewrite.rules._framework import StepCaller
    from gpuperf_rewrite.rules.analysis.facts.receiver_guess import UNRESOLVED
    from gpuperf_rewrite.rules.analysis.model.training import EVAL, TRAIN
    from gpuperf_rewrite.rules.analysis.syntax.launch import OFTEN_CALL

    methods, files = duck_caller_files(path, data, search, known)
    stepping = stepping_methods(data) if files else {}
    out = []
    for caller in files:
        n = project_index.node(str(caller), os.fspath(search))
        if n is None:
            continue
        project_index.keyed([n])
        calls = step_calls_of_node(n, store)
        # an evaluation script's batches (``eval.py`` calling ``trainer.eval_step``) are no training
        # run's: an eval batch counts only in a program that also trains
        trains = any(c.kind == TRAIN for c in calls)
        out += _loops_stepping_here(calls, methods, stepping, shown_path(caller, path))
        for call in calls:
            if call.kind == OFTEN_CALL:
                continue
            if call.kind == EVAL and not trains:
                continue
            owner, _, method = call.function.rpartition(".")
            if call.module != UNRESOLVED:  # resolved by name to this module's class, through no import
                if owner in methods.get(method, ()):  # (``models.create_model`` imports it by importlib)
                    out.append(StepCaller(call.function, shown_path(caller, path), call.line, call.kind, call.output, call.note))
                continue
            for cls in methods.get(method, ()):
                note = f"if `{call.note}` is a `{cls}`: its class is not resolved where it is called"
                out.append(StepCaller(f"{cls}.{method}", shown_path(caller, path), call.line, call.kind, call.output, note))
    return out


def _loops_stepping_here(calls: tuple[Any, ...], methods: dict[str, list[str]], stepping: dict[str, set[str]],
                         shown: str) -> list[Any]:
    """The caller's loops that are no step loops where it stands (``for data in dataset:
    model.set_input(data); model.optimize_parameters()`` on what a factory built): when one pass
    calls, on one receiver, a method of a class here that runs a whole step, each pass is a
    training step, and every method of that class it calls on that receiver runs on each."""
    from gpuperf_rewrite.rules._framework import StepCaller
    from gpuperf_rewrite.rules.analysis.facts.receiver_guess import UNRESOLVED
    from gpuperf_rewrite.rules.analysis.model.training import TRAIN
    from gpuperf_rewrite.rules.analysis.syntax.launch import OFTEN_CALL

    groups: dict[str, list[tuple[Any, str]]] = {}
    for call in calls:
        if call.module == UNRESOLVED and call.kind == OFTEN_CALL and call.note.count("@") == 2:
            recv_loop, _, how = call.note.rpartition("@")
            groups.setdefault(recv_loop, []).append((call, how))
    out = []
    for recv_loop, group in groups.items():
        recv = recv_loop.rsplit("@", 1)[0]
        for cls, steps in stepping.items():
            step_lines = [c.line for c, _ in group if c.function.rpartition(".")[2] in steps]
            if not step_lines:
                continue
            hedge = f"if `{recv}` is a `{cls}`: its class is not resolved where it is called"
            # the step, what feeds it before (``set_input(data)``), what reads its output after
            # (``log_info(info)``); not a method handed the batch after the step (``refresh_stats(images)``:
            # host data, as far as anyone can tell)
            out += [StepCaller(f"{cls}.{m}", shown, c.line, TRAIN, False, hedge)
                    for c, how in group if cls in methods.get(m := c.function.rpartition(".")[2], ()) and
                    (m in steps or how != "other" or c.line < min(step_lines))]
    return out


def duck_key_parts(path: Path, data: bytes, search: Path, known: set[Path]) -> list[str]:
    """What a result using :func:`duck_callers` depends on: the keys of the files it reads."""
    parts = []
    for caller in duck_caller_files(path, data, search, known)[1]:
        n = project_index.node(str(caller), os.fspath(search))
        if n is not None:
            project_index.keyed([n])
            parts.append(f"{caller}~{n.key}")
    return parts


def may_call_by_name(data: bytes) -> bool:
    """Can the file call, in a step loop or in code another module's loop runs every step (an agent's
    ``update(replay_buffer, L, step)``), a method of a class it does not import (read off bytes)?"""
    return b"def " in data and any(w in data for w in _STEP_WORDS) and _CALLED.search(data) is not None


def imported_paths(path: Path, data: bytes) -> set[Path]:
    """The first-party files the file imports directly (its ``ctx.project``'s modules)."""
    got = project_index.imports_of(path, data)
    return {Path(n.path) for _, n in got[1]} if got else set()


MAX_DUCK_MODULES = 4  # modules read for the methods one checked file may call by name
MAX_DEFINING = 3  # files defining a method name: more, and the name says nothing


def duck_method_files(path: Path, data: bytes, search: Path, imported: set[Path]) -> dict[str, list[Path]]:
    """Method name -> the files (not imported by the file, not itself) whose classes define it,
    for the names the checked file (with a loop) calls on a receiver other than ``self``."""
    from gpuperf_rewrite.rules.analysis.facts.receiver_guess import generic_methods

    if not any(w in data for w in _STEP_WORDS):
        return {}
    generic = generic_methods()
    defs = _scan(search)[1]
    out: dict[str, list[Path]] = {}
    modules: set[Path] = set()
    for name in sorted({m.group(1).decode() for m in _CALLED.finditer(data)}):
        if name.startswith("_") or name in generic:
            continue
        found = [p for p in defs.get(name, ()) if p != path]
        if len(found) > MAX_DEFINING:
            continue  # too many: the name says nothing
        found = [p for p in found if p not in imported]  # (the facts of those it imports are the rules' already)
        found = [p for p in found if _may_read(p)]
        if not found:
            continue  # no host read there: nothing its methods could do to what they are handed
        if len(modules | set(found)) > MAX_DUCK_MODULES:
            continue
        modules |= set(found)
        out[name] = found
    return out


_READ_WORDS = (b".item(", b".tolist(", b".cpu(", b".numpy(", b"float(", b"int(", b"synchronize")


def _may_read(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return any(w in data for w in _READ_WORDS)


def duck_methods(path: Path, data: bytes, search: Path, store: Path | None, imported: set[Path]) -> tuple[Any, ...]:
    """The ``DuckMethod``s of the checked file: for each method name it calls that only modules it
    does not import define (``logger.log`` with ``Logger`` in ``logger.py``, handed in by the caller),
    those methods' host reads of what they are handed, from their modules' facts."""
    from gpuperf_rewrite.lint.project_facts import facts_of_node
    from gpuperf_rewrite.rules._framework import DuckMethod
    from gpuperf_rewrite.rules.analysis.facts.helper_syncs import READ

    out = []
    for name, files in duck_method_files(path, data, search, imported).items():
        for file in files:
            n = project_index.node(str(file), os.fspath(search))
            if n is None:
                continue
            project_index.keyed([n])
            facts = facts_of_node(n, store)
            for qual, f in facts.functions.items():
                if qual.count(".") != 1 or not qual.endswith(f".{name}"):
                    continue
                shown = shown_path(file, path)
                reads = [(p, f"`{shown}` line {line}") for p, line in f.arg_reads]
                seen = {p for p, _ in reads}
                reads += [(p, f"{how} at `{shown}` line {line}") for p, kind, line, how in f.syncs
                          if kind == READ and p not in seen]
                if reads:
                    out.append(DuckMethod(shown, qual, tuple(f.params), tuple(reads)))
    return tuple(out)


def duck_method_key_parts(path: Path, data: bytes, search: Path, imported: set[Path]) -> list[str]:
    parts = []
    for files in duck_method_files(path, data, search, imported).values():
        for file in files:
            n = project_index.node(str(file), os.fspath(search))
            if n is not None:
                project_index.keyed([n])
                parts.append(f"{file}#{n.key}")
    return parts
