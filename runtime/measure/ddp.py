"""DDP communication: how long each rank's gradient all-reduce takes, per step.

When a ``DistributedDataParallel`` model is built over more than one process, the shim registers
a communication hook that runs the default all-reduce (``default_hooks.allreduce_hook``, what DDP
does without a hook) and times its future: from the moment a bucket is ready to the moment its
all-reduce has finished. On CPU (gloo) with ``perf_counter``; on CUDA with CUDA events recorded
on the current stream before the all-reduce and in the future's callback (which runs on a stream
that waits for the all-reduce), read once at the end of the run: no sync per step.

A reducer accepts one hook only, so when the script registers its own (``register_comm_hook``,
or a built-in through ``_register_builtin_comm_hook``) the shim's hook times that one instead:
the script's hook runs exactly as it would have.
"""

from __future__ import annotations

import time
from typing import Any, Callable


class _State:
    """The object DDP passes to the hook: what to run, and where to record."""

    def __init__(self, timer: "CommTimer", hook: Callable[..., Any], hook_state: Any,
                 info: dict[str, Any]) -> None:
        self.timer = timer
        self.info = info  # this model's entry in CommTimer.models
        self.user_registered = False
        self.use(hook, hook_state, "allreduce (default)")

    def use(self, hook: Callable[..., Any], hook_state: Any, name: str) -> None:
        self.hook, self.hook_state = hook, hook_state
        self.info["comm_hook"] = name


def _timed_hook(state: _State, bucket: Any) -> Any:
    return state.timer.time(state, bucket)


class CommTimer:
    def __init__(self, torch: Any, step_index: Callable[[], int]) -> None:
        self.torch = torch
        self.step_index = step_index  # index of the step in progress
        self.records: list[tuple[int, Any, Any, bool]] = []  # (step, start, end, bucket is last)
        self.cuda = False
        self.models: list[dict[str, Any]] = []  # per DDP model: settings and hook name
        self.untimed_reason: str | None = None

    def _now(self) -> Any:
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def time(self, state: _State, bucket: Any) -> Any:
        step = self.step_index()
        try:
            last = bool(bucket.is_last())
        except Exception:
            last = False
        start = self._now()
        fut = state.hook(state.hook_state, bucket)

        def done(f: Any) -> Any:
            value = f.value()  # re-raises the all-reduce's error, as DDP would see it
            self.records.append((step, start, self._now(), last))
            return value

        return fut.then(done)

    def intervals(self) -> dict[int, list[tuple[float, float, bool]]]:
        """Per step, (start, end, last) in seconds on one clock (reads CUDA events: call at the end)."""
        out: dict[int, list[tuple[float, float, bool]]] = {}
        if not self.records:
            return out
        if self.cuda:
            self.torch.cuda.synchronize()
            ref = self.records[0][1]
            conv = [(s, ref.elapsed_time(a) / 1e3, ref.elapsed_time(b) / 1e3, last)
                    for s, a, b, last in self.records]
        else:
            conv = list(self.records)
        for s, a, b, last in conv:
            out.setdefault(s, []).append((a, b, last))
        return out


def install(torch: Any, timer: CommTimer) -> Callable[[], None]:
    """Patch DDP construction and hook registration; return an undo."""
    try:
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel as DDP
    except Exception:  # torch built without distributed
        return lambda: None
    orig_init = DDP.__init__
    orig_register = DDP.register_comm_hook
    orig_builtin = DDP._register_builtin_comm_hook

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        try:
            _attach(self)
        except Exception as exc:  # never break the script's DDP for a measurement
            timer.untimed_reason = f"comm hook not installed: {exc}"

    def _attach(model: Any) -> None:
        pg = model.process_group
        if getattr(model, "reducer", None) is None or pg.size() < 2:
            return
        info = {"backend": str(dist.get_backend(pg)),
                "gradient_as_bucket_view": bool(getattr(model, "gradient_as_bucket_view", False)),
                "bucket_cap_mb": getattr(model, "bucket_bytes_cap", 0) / (1 << 20) or None,
                "comm_hook": None}
        timer.models.append(info)
        if model._comm_hooks:  # DDP registered one itself (mixed_precision): leave it untimed
            info["comm_hook"] = "untimed (" + ", ".join(h.__qualname__ for h, _ in model._comm_hooks) + ")"
            return
        timer.cuda = timer.cuda or next(model.parameters()).is_cuda
        state = _State(timer, default_hooks.allreduce_hook, pg, info)
        # Straight to the reducer, not through register_comm_hook: DDP's own list of Python hooks
        # (_comm_hooks, used by its Python reducer under compiled autograd) stays the script's.
        dist._register_comm_hook(model.reducer, state, _timed_hook)
        model._gpuperf_comm = state

    def register_comm_hook(self: Any, state: object, hook: Callable[..., Any]) -> None:
        ours = getattr(self, "_gpuperf_comm", None)
        if ours is None or ours.user_registered:
            return orig_register(self, state, hook)  # a second registration raises, as without us
        self._check_comm_hook(hook)
        self.logger._set_comm_hook_name(hook.__qualname__)
        self._comm_hooks.append((hook, state))
        ours.use(hook, state, hook.__qualname__)
        ours.user_registered = True

    def _register_builtin_comm_hook(self: Any, comm_hook_type: Any) -> None:
        ours = getattr(self, "_gpuperf_comm", None)
        python_equivalent = {
            dist.BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
            dist.BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook,
        }.get(comm_hook_type)
        if ours is None or ours.user_registered or python_equivalent is None:
            return orig_builtin(self, comm_hook_type)
        self.logger._set_comm_hook_name(str(comm_hook_type))
        ours.use(python_equivalent, self.process_group, f"{comm_hook_type} (as its Python equivalent)")
        ours.user_registered = True

    DDP.__init__ = __init__
    DDP.register_comm_hook = register_comm_hook
    DDP._register_builtin_comm_hook = _register_builtin_comm_hook

    def restore() -> None:
        DDP.__init__ = orig_init
        DDP.register_comm_hook = orig_register
        DDP._register_builtin_comm_hook = orig_builtin

    return restore


def _union(intervals: list[tuple[float, float, bool]]) -> float:
    total, cur_a, cur_b = 0.0, None, None
    for a, b, _ in sorted(intervals):
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def document(timer: CommTimer, step_times: list[float], start: int, backwards: list[int],
             summarize: Callable[[list[float]], dict[str, Any]]) -> dict[str, Any] | None:
    """The ``distributed`` object of one rank: all-reduce time per measured step.

    ``step_times`` are the measured steps' durations (steps ``start, start+1, ...``);
    ``backwards`` the number of backward() calls of each of those steps.
    """
    if not timer.models:
        return None
    per = timer.intervals()
    in_flight, exposed, buckets, rounds = [], [], [], []
    for k in range(len(step_times)):
        iv = per.get(start + k, [])
        in_flight.append(_union(iv))
        # Exposed: from the last bucket becoming ready (backward's compute is done) to the end of
        # the last all-reduce; the rest overlapped with backward.
        exposed.append(max(b for _, b, _ in iv) - max(a for a, _, _ in iv) if iv else 0.0)
        buckets.append(len(iv))
        rounds.append(sum(1 for *_, last in iv if last))
    total = sum(step_times)
    info = timer.models[0]
    n = len(step_times)
    return {
        "backend": info["backend"],
        "comm_hook": info["comm_hook"],
        "timed": bool(timer.records),
        "untimed_reason": timer.untimed_reason,
        "gradient_as_bucket_view": info["gradient_as_bucket_view"],
        "bucket_cap_mb": info["bucket_cap_mb"],
        "allreduce_s": summarize(in_flight),
        "exposed_comm_s": summarize(exposed),
        "comm_fraction": min(1.0, sum(in_flight) / total) if total > 0 and timer.records else None,
        "exposed_comm_fraction": min(1.0, sum(exposed) / total) if total > 0 and timer.records else None,
        "buckets_per_step": sum(buckets) / n if n else None,
        "allreduce_rounds_per_step": sum(rounds) / n if n else None,
        "backwards_per_step": sum(backwards) / n if n else None,
        "per_rank": None,  # set when ranks are merged (runtime/diagnosis/merge.py)
        "comm_spread_s": None,
        "comm_spread_ratio": None,
        "waited_for_rank": None,
    }
