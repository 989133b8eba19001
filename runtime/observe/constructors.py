"""Objects noted when the script builds them: DataLoaders, optimizers, modules, GradScalers,
DDP models and DistributedSamplers, each with its settings and the first-party line that built it.

Each constructor is wrapped once (the original runs first and unchanged; the note is taken after
it, so a constructor that fails leaves no note). A failure of the note itself is swallowed: the
observation must never change what the script does.
"""

from __future__ import annotations

import sys
import time
import weakref
from typing import Any, Callable

from .observer import Observer

JSON_TYPES = (bool, int, float, str, type(None))


def _json(value: Any) -> Any:
    return value if isinstance(value, JSON_TYPES) else repr(value)[:200]


def _patch(cls: Any, name: str, make: Callable[[Any], Any], undo: list[Callable[[], None]]) -> None:
    orig = cls.__dict__.get(name)
    if orig is None:
        return
    setattr(cls, name, make(orig))
    undo.append(lambda: setattr(cls, name, orig))


def _caller(obj: Any) -> Any:
    """The frame that built ``obj``: above the chain of ``__init__`` frames constructing it (a
    subclass's, then its bases'), so a user's subclass is reported where it is instantiated."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name == "__init__":
        code = frame.f_code
        if not code.co_argcount or frame.f_locals.get(code.co_varnames[0]) is not obj:
            break
        frame = frame.f_back
    return frame


def _timed(obs: Observer, fn: Callable[[], None]) -> None:
    t0 = time.perf_counter()
    try:
        fn()
    except Exception:
        pass
    obs.cost_s += time.perf_counter() - t0


def _loaders(torch: Any, obs: Observer, undo: list[Callable[[], None]]) -> None:
    from torch.utils.data import DataLoader

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            frame = _caller(self)

            def note() -> None:
                if id(self) in obs._loader_by_id:  # a subclass's __init__ calling ours again
                    return
                entry = {"site": obs.sites.site(frame), "class": type(self).__qualname__,
                         "num_workers": int(self.num_workers), "pin_memory": bool(self.pin_memory),
                         "persistent_workers": bool(self.persistent_workers),
                         "prefetch_factor": self.prefetch_factor, "batch_size": _json(self.batch_size),
                         "iterations": 0, "used_in_training": False}
                ident = id(self)
                obs._loader_by_id[ident] = (weakref.ref(self, lambda _r: obs._loader_by_id.pop(ident, None)), entry)
                obs.loaders.append(entry)

            _timed(obs, note)
        return __init__

    def make_iter(orig: Any) -> Any:
        def __iter__(self: Any) -> Any:
            it = orig(self)
            found = obs._loader_by_id.get(id(self))
            if found is not None:
                found[1]["iterations"] += 1
                obs.current_loader = found[1]
                try:  # on torch's iterator object: which loader its batches come from
                    it._gpuperf_observed = found[1]
                except Exception:
                    pass
            return it
        return __iter__

    def make_next(orig: Any) -> Any:
        def __next__(self: Any) -> Any:
            # The loader whose batch came last is the one the next step boundary trains on (an
            # evaluation loader iterated between two training batches does not take its place).
            out = orig(self)
            entry = getattr(self, "_gpuperf_observed", None)
            if entry is not None:
                obs.current_loader = entry
            return out
        return __next__

    from torch.utils.data import dataloader as dl

    _patch(DataLoader, "__init__", make_init, undo)
    _patch(DataLoader, "__iter__", make_iter, undo)
    _patch(dl._BaseDataLoaderIter, "__next__", make_next, undo)


def _optimizers(torch: Any, obs: Observer, undo: list[Callable[[], None]]) -> None:
    from torch.optim import Optimizer
    from torch.optim.optimizer import register_optimizer_step_post_hook

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            frame = _caller(self)

            def note() -> None:
                cls = type(self)
                defaults = getattr(self, "defaults", {}) or {}
                entry = {"site": obs.sites.site(frame), "class": f"{cls.__module__}.{cls.__qualname__}",
                         "fused": _json(defaults.get("fused")), "foreach": _json(defaults.get("foreach")),
                         "params": sum(p.numel() for g in self.param_groups for p in g["params"]),
                         "param_groups": len(self.param_groups)}
                obs.optimizers.append((weakref.ref(self), entry))

            _timed(obs, note)
        return __init__

    _patch(Optimizer, "__init__", make_init, undo)

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        obs.stepped.add(id(opt))

    undo.append(register_optimizer_step_post_hook(post).remove)


def _modules(torch: Any, obs: Observer, undo: list[Callable[[], None]]) -> None:
    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            try:
                frame = _caller(self)
            except Exception:
                frame = None
            obs.note_module(self, frame)
        return __init__

    _patch(torch.nn.Module, "__init__", make_init, undo)


def _scaler(torch: Any, obs: Observer, undo: list[Callable[[], None]]) -> None:
    cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if cls is None:
        return

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            frame = _caller(self)

            def note() -> None:
                enabled = bool(self.is_enabled())
                if obs.scaler is None or enabled and not obs.scaler["enabled"]:
                    obs.scaler = {"site": obs.sites.site(frame), "enabled": enabled}

            _timed(obs, note)
        return __init__

    _patch(cls, "__init__", make_init, undo)


DDP_SETTINGS = ("find_unused_parameters", "gradient_as_bucket_view", "static_graph", "broadcast_buffers")


def _ddp(torch: Any, obs: Observer, undo: list[Callable[[], None]]) -> None:
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data.distributed import DistributedSampler
    except Exception:  # torch built without distributed
        return

    def make_ddp_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            frame = _caller(self)

            def note() -> None:
                given = {k: _json(v) for k, v in kwargs.items() if k not in ("module", "process_group")}
                effective = {k: _json(getattr(self, k, None)) for k in DDP_SETTINGS if hasattr(self, k)}
                cap = getattr(self, "bucket_bytes_cap", None)
                effective["bucket_cap_mb"] = cap / (1 << 20) if isinstance(cap, (int, float)) else None
                obs.ddp.append({"site": obs.sites.site(frame), "kwargs": given, "effective": effective})

            _timed(obs, note)
        return __init__

    def make_sampler_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            frame = _caller(self)

            def note() -> None:
                entry = {"site": obs.sites.site(frame), "class": type(self).__qualname__,
                         "shuffle": _json(getattr(self, "shuffle", None)), "set_epoch_calls": 0}
                obs.samplers.append(entry)
                obs.sampler_by_id[id(self)] = entry

            _timed(obs, note)
        return __init__

    def make_set_epoch(orig: Any) -> Any:
        def set_epoch(self: Any, *args: Any, **kwargs: Any) -> Any:
            entry = obs.sampler_by_id.get(id(self))
            if entry is not None:
                entry["set_epoch_calls"] += 1
            return orig(self, *args, **kwargs)
        return set_epoch

    _patch(DDP, "__init__", make_ddp_init, undo)
    _patch(DistributedSampler, "__init__", make_sampler_init, undo)
    _patch(DistributedSampler, "set_epoch", make_set_epoch, undo)


def install(torch: Any, obs: Observer) -> Callable[[], None]:
    """Wrap the constructors; return an undo (in reverse order)."""
    undo: list[Callable[[], None]] = []
    for part in (_loaders, _optimizers, _modules, _scaler, _ddp):
        try:
            part(torch, obs, undo)
        except Exception as exc:  # an observation must never stop the run
            print(f"gpuperf runtime: observation of {part.__name__[1:]} off: {exc}", file=sys.stderr)

    def restore() -> None:
        for fn in reversed(undo):
            fn()

    return restore
