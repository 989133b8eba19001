"""Findings from what the run saw (the shim's ``observed``), at the line that built the object.

The shim records the objects a training run builds and the first-party line that built each
(docs/runtime.md, "Observed objects" and "The `observed` key"). This module maps those facts to the lint's rule codes:

| observed | rule codes |
|---|---|
| DataLoaders iterated in training | GP201 (no workers), GP202 (no pinned memory), GP203 (workers, not persistent, iterated more than once) |
| optimizers | GP305 (Adam, AdamW or SGD without `fused`/`foreach`) |
| trained models | GP301 (forward without autocast), GP302 (matmul precision `highest`, linear/attention layers), GP303 (not compiled), GP304 (`cudnn.benchmark` off, convolutions) |
| zero_grad | GP401 (none per step), GP402 (`set_to_none=False`) |
| host reads in the step | GP101 (`.item()`, `.tolist()`, ...), GP102 (printing a tensor) |
| host-to-device copies | GP104 (without `non_blocking`) |
| DDP, samplers, accumulation | GP502, GP505, GP503, GP504 |

Rules that gain only on CUDA are reported as the lint reports them for a script that may run on
CUDA (the caller says whether it may), even when this run was on a CPU. Each finding keeps the
observed values it rests on and, where the setting came from a config file the run read, the
file and key (:mod:`.configsource`). Nothing here runs code: it reads the document, the source
lines and the config files.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from gpuperf_rewrite.validate.run.configsource import ConfigKey, call_at, locate, shown_path

SEEN = "seen at run time"
LOADER_CALLS = ("DataLoader",)
FUSABLE = ("Adam", "AdamW", "SGD")
CUDA_GAIN = frozenset({"GP101", "GP104", "GP202", "GP301", "GP302", "GP303", "GP304", "GP305"})
# The codes whose setting --apply may write into a config (the key is the finding's: GP305's is
# `fused` on a CUDA run, `foreach` elsewhere); GP201's worker count is chosen when written
# (:func:`config_value`).
CONFIG_FIXES = {"GP201": "num_workers", "GP202": "pin_memory", "GP203": "persistent_workers", "GP305": "fused/foreach"}
MAX_WORKERS = 8  # GP201's own bound (its `max-workers` option's default)


@dataclass
class RunFinding:
    """One finding, reported in the lint's format; ``origin`` says what found it."""

    code: str
    path: str  # absolute
    line: int
    column: int  # 1-based
    message: str
    observed: dict[str, Any] = field(default_factory=dict)
    config: ConfigKey | None = None
    origin: str = "run"  # run, static, static+run (confirmed)
    name: str = ""
    fix: dict[str, str] | None = None
    passes_setting: bool = False  # the construction call passes the setting as an expression or via **
    stack: frozenset[tuple[str, int]] = frozenset()  # (absolute path, line) of the site's first-party frames
    # Only confirms a static finding, never stands alone: a CUDA-gain fact of a CPU run where the
    # code may choose otherwise on CUDA (fused=use_fused, an autocast the code enters on CUDA only).
    confirm_only: bool = False

    @property
    def tag(self) -> str:
        return {"run": SEEN, "static+run": "static, confirmed at run time"}.get(self.origin, "static")

    def text(self) -> str:
        where = f" ({self.config.describe(shown_path(self.config.file))})" if self.config is not None else ""
        return f"{shown_path(self.path)}:{self.line}:{self.column}: {self.code} {self.message}{where} ({self.tag})"

    def to_json(self) -> dict[str, Any]:
        return {"path": shown_path(self.path), "line": self.line, "column": self.column, "code": self.code,
                "name": self.name, "message": self.message, "origin": self.origin, "observed": self.observed,
                "config": self.config.to_json(shown_path(self.config.file)) if self.config is not None else None,
                "fix": self.fix}


def config_value(code: str, cpu_count: int | None) -> Any:
    """What --apply writes into the config for ``code``."""
    if code == "GP201":
        return max(1, min(MAX_WORKERS, cpu_count or 1))
    return True


class _Sites:
    """Source lines read once, calls found at a site."""

    def __init__(self) -> None:
        self.cache: dict[str, ast.Module | None] = {}

    def position(self, site: Mapping[str, Any], names: Sequence[str] = ()) -> tuple[ast.Call | None, int]:
        call = call_at(str(site["path"]), int(site["line"]), names, self.cache)
        col = site.get("col")
        if call is not None and call.lineno == int(site["line"]):
            col = call.col_offset
        return call, int(col or 0) + 1


def from_observed(observed: Mapping[str, Any] | None, *, may_use_cuda: bool,
                  entry: str | None = None, fixes_in_code: frozenset[str] = frozenset()) -> list[RunFinding]:
    """The run-time findings of one ``observed`` document, one per (code, path, line). A model's
    findings go to the entry script's line in its stack (``model = build(cfg)``, where a fix such
    as ``torch.compile`` belongs), not into the registry that instantiated it."""
    if not observed:
        return []
    sites = _Sites()
    files = list(observed.get("config_files") or [])
    out: list[RunFinding] = []
    out += _loaders(observed.get("loaders") or [], sites, files)
    cuda_run = (observed.get("switches") or {}).get("device") == "cuda"
    out += _optimizers(observed.get("optimizers") or [], sites, files, "fused" if cuda_run else "foreach")
    out += _models(observed.get("models") or [], observed.get("switches") or {}, sites, entry)
    out += _steps(observed, sites)
    out += _distributed(observed, sites)
    if (observed.get("switches") or {}).get("device") != "cuda":
        for f in out:
            f.confirm_only = f.confirm_only or _cpu_unsure(f, fixes_in_code)
    seen: set[tuple[str, str, int]] = set()
    kept = []
    for f in out:
        key = (f.code, f.path, f.line)
        if key in seen or (f.code in CUDA_GAIN and not may_use_cuda):
            continue
        seen.add(key)
        kept.append(f)
    return sorted(kept, key=lambda f: (f.path, f.line, f.code))


MODEL_WIDE = frozenset({"GP301", "GP302", "GP303", "GP304"})
DEVICE_CHOSEN = {"GP202": ("pin_memory",), "GP305": ("fused", "foreach")}


def _cpu_unsure(f: RunFinding, fixes_in_code: frozenset[str]) -> bool:
    """A CPU run's CUDA-gain finding the code may contradict on CUDA: a copy (the code may branch
    on the device), a model-wide fix the project's code applies somewhere (autocast, compile), a
    setting the construction call passes as an expression or an unread ``**`` mapping."""
    if f.code == "GP104":
        return True
    if f.code in MODEL_WIDE:
        return f.code in fixes_in_code
    return f.code in DEVICE_CHOSEN and f.config is None and f.passes_setting


def _passes(call: ast.Call | None, settings: Sequence[str]) -> bool:
    """``call`` gives one of ``settings`` as an expression (not a literal), or has a ``**`` mapping."""
    if call is None:
        return False
    return any(kw.arg is None or (kw.arg in settings and not isinstance(kw.value, ast.Constant)) for kw in call.keywords)


def _finding(code: str, site: Mapping[str, Any], sites: _Sites, message: str, observed: dict[str, Any],
             names: Sequence[str] = ()) -> tuple[RunFinding, ast.Call | None]:
    call, col = sites.position(site, names)
    stack = frozenset((os.path.abspath(str(f["path"])), int(f["line"])) for f in site.get("stack") or ())
    return RunFinding(code, str(site["path"]), int(site["line"]), col, message, observed, stack=stack,
                      name=_rule_name(code)), call


def _rule_name(code: str) -> str:
    from gpuperf_rewrite.lint.registry import rule_by_name_or_code

    cls = rule_by_name_or_code(code)
    return cls.name if cls is not None else ""


def _loaders(loaders: Sequence[Mapping[str, Any]], sites: _Sites, files: list) -> list[RunFinding]:
    out = []
    for ld in loaders:
        site = ld.get("site")
        if not site or not ld.get("used_in_training"):
            continue
        values = {k: ld.get(k) for k in ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor",
                                          "batch_size", "iterations")}
        workers = int(ld.get("num_workers") or 0)
        wanted = []
        if workers == 0:
            wanted.append(("GP201", "num_workers", "DataLoader loads batches in the training process: the run's "
                                                   "loader had num_workers=0"))
        if not ld.get("pin_memory"):
            wanted.append(("GP202", "pin_memory", "DataLoader without pinned memory: the run's loader had "
                                                  "pin_memory=False (copies to the GPU cannot overlap compute)"))
        if workers > 0 and not ld.get("persistent_workers") and int(ld.get("iterations") or 0) > 1:
            wanted.append(("GP203", "persistent_workers",
                           f"DataLoader workers restarted every epoch: the run iterated this loader "
                           f"{ld.get('iterations')} times with persistent_workers=False"))
        for code, setting, message in wanted:
            f, call = _finding(code, site, sites, message, values, LOADER_CALLS)
            f.passes_setting = _passes(call, (setting,))
            if call is not None:
                f.config = locate(call, setting, site, files, sites.cache, agree={"batch_size": ld.get("batch_size")})
            out.append(f)
    return out


def _short(cls: str | None) -> str:
    return (cls or "").rsplit(".", 1)[-1]


def _optimizers(optimizers: Sequence[Mapping[str, Any]], sites: _Sites, files: list,
                setting: str) -> list[RunFinding]:
    """GP305; its config key is ``fused`` on a CUDA run (foreach is CUDA's default already, fused
    is the gain), ``foreach`` elsewhere (runs on every device)."""
    out = []
    for opt in optimizers:
        site, name = opt.get("site"), _short(opt.get("class"))
        if not site or name not in FUSABLE or opt.get("fused") or opt.get("foreach"):
            continue
        values = {k: opt.get(k) for k in ("class", "fused", "foreach", "params", "param_groups")}
        f, call = _finding("GP305", site, sites, f"{name} runs its update parameter by parameter: the run's "
                                                 f"optimizer had neither fused nor foreach set", values)
        f.passes_setting = _passes(call, ("fused", "foreach"))
        if call is not None:
            f.config = locate(call, setting, site, files, sites.cache)
        out.append(f)
    return out


def model_site(site: Mapping[str, Any] | None, entry: str | None,
               cache: dict[str, ast.Module | None] | None = None) -> Mapping[str, Any] | None:
    """Where the user's code made the model: the innermost frame of its site's stack whose line
    assigns the result (``model = build(cfg)``, ``self.model = GPT(conf)``), past the model's own
    ``super().__init__()`` and a registry's ``return REGISTRY[name](**kw)``; else the entry
    script's frame; else the site itself."""
    if not site:
        return site
    stack = list(site.get("stack") or [site])
    cache = {} if cache is None else cache
    for frame in stack:
        if _assigns_at(str(frame["path"]), int(frame["line"]), cache):
            return {**frame, "stack": stack}
    if entry is not None:
        want = os.path.abspath(entry)
        frames = [f for f in stack if os.path.abspath(str(f["path"])) == want]
        if frames:
            return {**frames[-1], "stack": stack}
    return site


def _assigns_at(path: str, line: int, cache: dict[str, ast.Module | None]) -> bool:
    """The statement at ``line`` of ``path`` is an assignment (``x = ...``, ``self.x: T = ...``)."""
    from gpuperf_rewrite.validate.run.configsource import parse_cached

    tree = parse_cached(path, cache)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno <= line <= (node.end_lineno or node.lineno):
            return node.value is not None and not _returned(tree, node, line)
    return False


def _returned(tree: ast.Module, assign: ast.Assign | ast.AnnAssign, line: int) -> bool:
    """A factory's ``model = REGISTRY[name](**kw)`` followed by ``return model``: the model is
    held by its caller, not here."""
    targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
    names = {t.id for t in targets if isinstance(t, ast.Name)}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.lineno <= line <= (fn.end_lineno or fn.lineno):
            returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
            if any(isinstance(r.value, ast.Name) and r.value.id in names for r in returns):
                return True
    return False


def _models(models: Sequence[Mapping[str, Any]], switches: Mapping[str, Any], sites: _Sites,
            entry: str | None) -> list[RunFinding]:
    out = []
    for m in models:
        site = model_site(m.get("site"), entry, sites.cache)
        if not site or not m.get("trained"):
            continue
        kinds = set(m.get("kinds") or ())
        values = {k: m.get(k) for k in ("class", "kinds", "compiled", "param_dtype", "forward_autocast")}
        checks = [
            ("GP301", m.get("forward_autocast") is None and m.get("param_dtype") in (None, "torch.float32"),
             "the model's forward ran without autocast, in float32", {}),
            ("GP303", not m.get("compiled"), "the trained model was never compiled (torch.compile)", {}),
            ("GP302", switches.get("float32_matmul_precision") == "highest" and bool(kinds & {"linear", "attention"}),
             "float32 matmuls at precision 'highest' for a model with linear/attention layers (TF32 off)",
             {"float32_matmul_precision": switches.get("float32_matmul_precision")}),
            ("GP304", switches.get("cudnn_benchmark") is False and "conv" in kinds,
             "a model with convolutions trained with torch.backends.cudnn.benchmark off",
             {"cudnn_benchmark": switches.get("cudnn_benchmark")}),
        ]
        for code, fires, message, extra in checks:
            if fires:
                out.append(_finding(code, site, sites, message, {**values, **extra})[0])
    return out


def _steps(observed: Mapping[str, Any], sites: _Sites) -> list[RunFinding]:
    out = []
    zg = observed.get("zero_grad") or {}
    optimizers = [o for o in observed.get("optimizers") or [] if o.get("site")]
    if zg and zg.get("per_step") is not None and float(zg["per_step"]) == 0 and optimizers:
        out.append(_finding("GP401", optimizers[0]["site"], sites, "gradients never cleared: the run called "
                                                                   "zero_grad 0 times per step", dict(zg))[0])
    if zg.get("site") and zg.get("set_to_none") is False:
        out.append(_finding("GP402", zg["site"], sites, "zero_grad(set_to_none=False) keeps the gradient tensors "
                                                        "and writes zeros into them every step",
                            {"set_to_none": False, "per_step": zg.get("per_step")})[0])
    for read in observed.get("host_reads") or []:
        if not read.get("site") or float(read.get("per_step") or 0) < 1 or read.get("device_tensor") is False:
            continue
        code = "GP102" if read.get("op") in ("print", "format") else "GP101"
        what = "prints a tensor" if code == "GP102" else f"reads a tensor to Python (.{read.get('op')})"
        out.append(_finding(code, read["site"], sites, f"the training step {what} {read.get('per_step'):g} times "
                                                       f"per step: a host sync each on a GPU", dict(read, site=None))[0])
    for copy in observed.get("h2d_copies") or []:
        if copy.get("site") and copy.get("non_blocking") is False:
            out.append(_finding("GP104", copy["site"], sites, "batch copied to the device without non_blocking=True",
                                {"per_step": copy.get("per_step"), "non_blocking": False})[0])
    return out


def _distributed(observed: Mapping[str, Any], sites: _Sites) -> list[RunFinding]:
    out = []
    ddps = [d for d in observed.get("ddp") or [] if d.get("site")]
    for d in ddps:
        kw = d.get("kwargs") or {}
        if kw.get("find_unused_parameters"):
            out.append(_finding("GP505", d["site"], sites, "DDP built with find_unused_parameters=True: a graph "
                                                           "traversal every step", {"kwargs": kw})[0])
        if not kw.get("gradient_as_bucket_view"):
            out.append(_finding("GP502", d["site"], sites, "DDP built without gradient_as_bucket_view=True: "
                                                           "gradients copied into buckets every step", {"kwargs": kw})[0])
    for s in observed.get("samplers") or []:
        if s.get("site") and s.get("class") == "DistributedSampler" and not s.get("set_epoch_calls"):
            out.append(_finding("GP503", s["site"], sites, "DistributedSampler never had set_epoch called: every "
                                                           "epoch sees the same order", dict(s, site=None))[0])
    acc = observed.get("accumulation") or {}
    if ddps and float(acc.get("backward_per_opt_step") or 0) >= 1.5 and float(acc.get("allreduce_per_opt_step") or 0) >= 1.5:
        out.append(_finding("GP504", ddps[0]["site"], sites, "gradient accumulation all-reduces at every backward "
                                                             "(no model.no_sync())", dict(acc))[0])
    return out
