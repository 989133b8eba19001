"""What the run built and did, kept for the result document's ``observed`` key (docs/runtime.md,
"Observed objects"; /work contract: each object with its first-party ``site``).

Objects are noted when they are built (:mod:`.constructors`), repeated events are counted by the
code location that made them (:mod:`.calls`, and the host reads the measurement already counts):
the stack is walked once per location. The counters are snapshotted at every step boundary, so a
``per_step`` is the measured window's average. The observation's own time is measured too.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable

from . import models
from .sites import Sites

SCHEMA = 1
OBSERVE_ENV = "GPUPERF_OBSERVE"  # "0": no observation (the overhead benchmark's other arm)
READ_OPS = {"__repr__": "print", "__format__": "format", "__bool__": "bool", "__float__": "float",
            "__int__": "int"}  # Tensor method -> the contract's op (others keep their name)


class Observer:
    def __init__(self, torch: Any, sites: Sites, enabled: bool = True) -> None:
        self.torch = torch
        self.enabled = enabled
        self.sites = sites
        self._first_party = sites.first_party_files  # file -> first-party? (shared, filled by sites)
        self.in_pipeline: Callable[[], bool] = lambda: False  # a DataLoader is producing a batch
        self.loaders: list[dict[str, Any]] = []
        self._loader_by_id: dict[int, tuple[Any, dict[str, Any]]] = {}
        self.current_loader: dict[str, Any] | None = None
        self.optimizers: list[tuple[Any, dict[str, Any]]] = []  # (weakref, entry)
        self.stepped: set[int] = set()  # ids of optimizers that stepped
        self.modules: dict[int, tuple[Any, dict[str, Any] | None]] = {}  # id -> (weakref, site)
        self.models: list[dict[str, Any]] = []
        self.samplers: list[dict[str, Any]] = []
        self.sampler_by_id: dict[int, dict[str, Any]] = {}
        self.scaler: dict[str, Any] | None = None
        self.ddp: list[dict[str, Any]] = []
        self.switches: dict[str, Any] | None = None
        self.config_files: dict[str, dict[str, Any]] = {}
        self.counts: dict[tuple[Any, ...], int] = {}  # (kind, file, line, detail) -> events
        self.meta: dict[tuple[Any, ...], dict[str, Any] | None] = {}  # same key -> site
        self.at: list[dict[tuple[Any, ...], int]] = [{}]  # counts at each step boundary
        self.cost_s = 0.0
        self.cost_at: list[float] = [0.0]
        self.device: str | None = None

    # -- events ---------------------------------------------------------------------------------
    def count(self, kind: str, frame: Any, detail: Any = None) -> None:
        """One event of ``kind`` made by the innermost first-party frame from ``frame`` outwards."""
        t0 = time.perf_counter()
        try:  # called inside the script's own calls (.to(), zero_grad(), .item()): never raise there
            # Usually the frame is the user's own line; else the walk finds the innermost one.
            found = frame if self._first_party.get(frame.f_code.co_filename) else self.sites.frame(frame)
            if found is not None:
                k = (kind, found.f_code.co_filename, found.f_lineno, detail)
                n = self.counts.get(k)
                if n is None:
                    self.meta[k] = self.sites.site(found)
                    n = 0
                self.counts[k] = n + 1
        except Exception:
            pass
        self.cost_s += time.perf_counter() - t0

    def on_read(self, frame: Any, method: str) -> None:
        """A host read the measurement counted as the training step's (measure/syncs.py)."""
        self.count("read", frame, READ_OPS.get(method, method))

    def note_module(self, module: Any, key_frame: Any) -> None:
        t0 = time.perf_counter()
        try:
            ident = id(module)
            ref = weakref.ref(module, lambda _r, i=ident, m=self.modules: m.pop(i, None))
            self.modules[ident] = (ref, self.sites.site(key_frame) if key_frame is not None else None)
        except Exception:  # not weak-referenceable, or anything else: the module is just not noted
            pass
        self.cost_s += time.perf_counter() - t0

    # -- step boundaries ------------------------------------------------------------------------
    def on_step(self, done: int) -> None:
        """After the ``done``-th optimizer step (1-based), before the session may stop."""
        if not self.enabled:
            return
        self.at.append(self.counts.copy())
        self.cost_at.append(self.cost_s)
        if self.current_loader is not None:
            self.current_loader["used_in_training"] = True
        if done == 1:
            t0 = time.perf_counter()
            try:
                self.find_models()
            except Exception as exc:  # an observation must never break the script
                self.models = [{"error": f"{type(exc).__name__}: {exc}"}]
            self.cost_s += time.perf_counter() - t0

    def find_models(self) -> None:
        torch = self.torch
        param_ids = {id(p) for ref, _ in self.optimizers if (opt := ref()) is not None
                     for group in opt.param_groups for p in group["params"]}
        live = {id(m): m for ref, _ in self.modules.values() if (m := ref()) is not None}
        found = models.roots(torch, live.values(), param_ids)
        for root in found:
            inner, compiled, ddp = models.unwrap(torch, root)
            site = self.modules.get(id(inner), (None, None))[1] or self.modules.get(id(root), (None, None))[1]
            cls = type(inner)
            dev = models.device_type(inner)
            info: dict[str, Any] = {
                "site": site, "class": f"{cls.__module__}.{cls.__qualname__}", "trained": True,
                "kinds": models.kinds(torch, inner), "compiled": compiled, "param_dtype": models.param_dtype(inner),
                "forward_autocast": None, "ddp": ddp,
                "params": sum(p.numel() for p in inner.parameters()), "_device": dev,
            }
            self.models.append(info)
            if getattr(root, "_compiled_call_impl", None) is None:  # a hook inside a compiled call would be traced
                models.watch_forward_autocast(torch, root, info)
        self.device = self.device or (models.device_type(found[0]) if found else None)
        self.switches = models.switches(torch, self.device or "cpu")

    # -- the document ---------------------------------------------------------------------------
    def _window(self, start: int, end: int) -> dict[tuple[Any, ...], int]:
        at = self.at
        if end >= len(at) or end <= start:
            return {}
        a, b = at[start], at[end]
        return {k: n - a.get(k, 0) for k, n in b.items() if n - a.get(k, 0) > 0}

    def _per_site(self, counts: dict[tuple[Any, ...], int], kind: str, m: int) -> list[dict[str, Any]]:
        rows = [(k, n) for k, n in counts.items() if k[0] == kind]
        rows.sort(key=lambda kn: -kn[1])
        return [{"site": self.meta.get(k), "detail": k[3], "per_step": n / m} for k, n in rows]

    def document(self, start: int, end: int, device: str, backwards: list[int],
                 distributed: dict[str, Any] | None, autocast_dtypes: list[str] = ()) -> dict[str, Any]:
        """The ``observed`` key over the measured window (boundaries ``start``..``end``)."""
        m = end - start
        if len(autocast_dtypes) == 1:  # a model whose forward the hook did not see ran under the one autocast
            for info in self.models:
                if not info.get("_forward_seen") and info.get("forward_autocast") is None:
                    info["forward_autocast"] = f"torch.{autocast_dtypes[0]}"
        counts = self._window(start, end) if m > 0 else {}
        reads = [{"site": r["site"], "op": r["detail"], "per_step": r["per_step"], "device_tensor": True}
                 for r in self._per_site(counts, "read", m)] if m > 0 else []
        reads += [{"site": r["site"], "op": "cpu", "per_step": r["per_step"], "device_tensor": True}
                  for r in self._per_site(counts, "cpu", m)] if m > 0 else []
        copies = [{"site": r["site"], "non_blocking": r["detail"], "per_step": r["per_step"]}
                  for r in self._per_site(counts, "h2d", m)] if m > 0 else []
        return {
            "schema": SCHEMA,
            "project_root": self.sites.root,
            "loaders": [dict(e) for e in self.loaders],
            "optimizers": [self._optimizer(ref, e) for ref, e in self.optimizers],
            "models": [self._model(e) for e in self.models],
            "enabled": self.enabled,
            "scaler": self.scaler,
            "switches": self.switches,
            "zero_grad": self._zero_grad(counts, m),
            "ddp": self.ddp,
            "samplers": self.samplers,
            "accumulation": self._accumulation(backwards, distributed),
            "host_reads": reads,
            "h2d_copies": copies,
            "config_files": list(self.config_files.values()),
            "cost": {"per_step_s": (self.cost_at[end] - self.cost_at[start]) / m
                     if 0 < m and end < len(self.cost_at) else None, "total_s": self.cost_s},
        }

    def _optimizer(self, ref: Any, entry: dict[str, Any]) -> dict[str, Any]:
        out = dict(entry)
        opt = ref()
        out["stepped"] = opt is not None and id(opt) in self.stepped or entry.get("_stepped", False)
        out.pop("_stepped", None)
        if opt is not None:  # groups added after construction count too
            out["params"] = sum(p.numel() for g in opt.param_groups for p in g["params"])
            out["param_groups"] = len(opt.param_groups)
        return out

    def _model(self, entry: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in entry.items() if not k.startswith("_")}

    def _zero_grad(self, counts: dict[tuple[Any, ...], int], m: int) -> dict[str, Any] | None:
        rows = [(k, n) for k, n in counts.items() if k[0] == "zero_grad"]
        every = [k for k in self.counts if k[0] == "zero_grad"]
        if m <= 0:
            return None
        if not rows:
            return {"per_step": 0.0, "set_to_none": None, "site": self.meta.get(every[0]) if every else None}
        rows.sort(key=lambda kn: -kn[1])
        modes = {k[3] for k, _ in rows}
        return {"per_step": sum(n for _, n in rows) / m, "set_to_none": modes.pop() if len(modes) == 1 else None,
                "site": self.meta.get(rows[0][0])}

    @staticmethod
    def _accumulation(backwards: list[int], distributed: dict[str, Any] | None) -> dict[str, Any] | None:
        if not backwards:
            return None
        rounds = (distributed or {}).get("allreduce_rounds_per_step")
        return {"backward_per_opt_step": sum(backwards) / len(backwards),
                "allreduce_per_opt_step": rounds}
