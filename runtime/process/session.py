"""One profiled run: install the hooks, run the script as ``__main__``, build the JSON document."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from .. import schema
from ..diagnosis import bottlenecks as diagnosis
from ..measure import amp, compilation, ddp, fingerprint, nvml
from ..measure.dataloader import DataWait
from ..measure.dataloader import install as install_dataloader
from ..measure.hooks import (
    LossRecorder,
    StopProfiling,
    Terminated,
    install_backward_hooks,
    install_optimizer_hooks,
)
from ..measure.syncs import CPU_READS, DEVICE_READS, HostReadCounter, SyncCounter
from ..measure.timing import StepClock, summarize
from ..measure.trace import TRACE_STEPS, Tracer
from ..memory import sampling as memory
from ..observe import calls as observe_calls
from ..observe import constructors as observe_constructors
from ..observe.observer import OBSERVE_ENV, Observer
from ..observe.sites import Sites, project_root
from . import entry, guard, phases


def seed_everything(seed: int, torch: Any) -> None:
    random.seed(seed)
    try:
        import numpy  # noqa: PLC0415 - optional: seeded only if the user's env has it

        numpy.random.seed(seed)
    except Exception:
        pass
    torch.manual_seed(seed)  # also seeds every CUDA device


class Session:
    def __init__(self, torch: Any, *, steps: int, warmup: int, trace_dir: str | None, rank: int,
                 project: str | None = None) -> None:
        self.torch = torch
        self.steps = steps
        self.warmup = warmup
        self.limit = warmup + steps
        self.stop_at = self.limit + (TRACE_STEPS if trace_dir else 0)
        # Resolved now: the script may chdir before the trace is written.
        self.tracer = Tracer(torch, Path(trace_dir).resolve(), rank) if trace_dir else None
        self.clock = StepClock()
        self.loss = LossRecorder()
        self.data = DataWait()
        self.data.check_stop = self.check_stop
        self.syncs = SyncCounter()
        self.reads = HostReadCounter()
        self.data.reads = self.reads  # reads while a batch is produced belong to the input pipeline
        self.mem = memory.MemoryTracker()
        self.amp = amp.AmpRecorder()
        self.amp.step_index = lambda: self.steps_done - 1  # update() follows the step it belongs to
        self.comm = ddp.CommTimer(torch, lambda: self.steps_done)  # hooks run inside the step
        # Cumulative counters sampled at every boundary; index 0 is the script start.
        self.wait_at: list[float] = [0.0]
        self.samples_at: list[int] = [0]
        self.syncs_at: list[int] = [0]
        self.reads_at: list[int] = [0]  # of device tensors
        self.cpu_reads_at: list[int] = [0]  # of CPU tensors in the training step
        # Host seconds from the previous boundary to the step's first backward(): data + forward.
        self.before_bwd: list[float | None] = [None]
        self.steps_done = 0
        self.stopping = False
        self.cuda = False
        self.sampler: nvml.Sampler | None = None
        self.finish_now: Any = None
        # At the step limit, write the result and end the process at once instead of unwinding the
        # script (its DataLoader workers' shutdown, finally blocks, a framework's teardown): nothing
        # of that is measured. run() sets it for one-process, untraced runs.
        self.exit_at_limit = False
        self.device = phases.DeviceStart()
        # What the training builds and does, at the user's lines (the document's `observed`).
        self.observed = Observer(torch, Sites(project_root(project)), enabled=os.environ.get(OBSERVE_ENV) != "0")
        self.observed.in_pipeline = self.reads.in_pipeline
        if self.observed.enabled:
            self.reads.on_read = self.observed.on_read
        self.epoch_minus_perf = time.time() - time.perf_counter()  # turns a boundary into wall-clock time

    # -- hot path: keep it to appends and one timestamp -------------------------------------
    def on_step(self, skipped: bool = False) -> None:
        if not self.cuda and self.torch.cuda.is_initialized():
            self._enable_cuda()
        self.clock.mark()
        host = self.clock.host
        self.mem.sample(len(host) - 1, host[-1] - host[-2])
        if skipped:
            self.amp.skipped.append(self.steps_done)
        self.wait_at.append(self.data.wait_s)
        self.samples_at.append(self.data.samples)
        self.syncs_at.append(self.syncs.count)
        self.reads_at.append(self.reads.count)
        self.cpu_reads_at.append(self.reads.cpu)
        fb = self.loss.first_backward_t
        self.before_bwd.append(None if fb is None else fb - self.clock.host[-2])
        self.loss.close_step()
        self.steps_done += 1
        n = self.steps_done
        self.observed.on_step(n)
        if self.tracer is not None and n >= self.limit:
            self._trace_step(n)
        if n >= self.stop_at:
            self.stopping = True
            if self.exit_at_limit and self.finish_now is not None and \
                    threading.current_thread() is threading.main_thread():
                self.finish_now()  # the result, then the process ends here: never returns
            raise StopProfiling()

    def _trace_step(self, n: int) -> None:
        tracer = self.tracer
        assert tracer is not None
        try:
            if n == self.limit:
                tracer.start(self.cuda)
            else:
                tracer.steps += 1
                if n == self.stop_at:
                    tracer.stop()
        except Exception as exc:  # a profiler failure must not become the script's exception
            print(f"gpuperf runtime: trace failed: {exc}", file=sys.stderr)
            self.tracer = None

    def check_stop(self) -> None:
        if self.stopping:  # the script swallowed StopProfiling (bare except) and went on
            if self.finish_now is not None:
                self.finish_now()  # writes the results and exits the process; never returns
            raise StopProfiling()

    def _enable_cuda(self) -> None:
        self.cuda = True
        self.reads.device_run = True
        self.clock.use_cuda(self.torch)
        self.mem.use_cuda(self.torch)
        try:
            self.syncs.enable(self.torch)
        except Exception:
            pass
        self.sampler = nvml.start(self.torch)

    # -- end of run ---------------------------------------------------------------------------
    def window(self) -> tuple[int, int]:
        """Boundary indices (start, end) of the measured window over the steps that ran."""
        done = self.steps_done
        if done > self.warmup:
            return self.warmup, min(self.limit, done)
        if done >= 2:  # ended inside warmup: drop only the first step (setup, compilation)
            return 1, done
        return 0, done

    def _memory(self, start: int, end: int) -> dict[str, Any]:
        mem = memory.collect(self.torch, self.cuda, self.mem, start, end)
        checked = self.loss.retained[start:end]
        mem["loss_graphs_checked"], mem["loss_graphs_retained"] = len(checked), sum(checked)
        return mem

    def _reads(self, start: int, end: int, device: str) -> float | None:
        """Tensor reads per step: of device tensors on an accelerator run; on a CPU run, of the
        CPU tensors the step reads (each a sync once they live on a GPU)."""
        if end <= start:
            return None
        reads = self.reads_at[end] - self.reads_at[start]
        if device == "cpu":
            reads += self.cpu_reads_at[end] - self.cpu_reads_at[start]
        return reads / (end - start)

    def _backwards(self, start: int, end: int) -> list[int]:
        return [len(self.loss.per_step[i]) for i in range(start, min(end, len(self.loss.per_step)))]

    def _device(self) -> str:
        """Where the script trained: the loss's device, else CUDA when the shim saw it started."""
        if self.loss.first_device is not None:
            return self.loss.first_device.type
        return "cuda" if self.cuda else "cpu"

    def build(self, script: str, args: list[str], status: str, exit_code: int,
              error: str | None, wall_s: float, world_size: int, rank: int, seed: int) -> dict[str, Any]:
        torch = self.torch
        self.syncs.disable(torch)  # our own reads below must not count (or print)
        if self.tracer is not None:
            try:
                self.tracer.stop()
            except Exception as exc:  # a failed export must not lose the measurements
                print(f"gpuperf runtime: trace export failed: {exc}", file=sys.stderr)
        if self.sampler is not None:
            self.sampler.stop()
        start, end = self.window()
        m = end - start
        per_step, source = self.clock.durations(start, end) if m > 0 else ([], "host")
        # The warm-up's steps on the same clock where it has one (the first interval starts at the
        # script's start: imports, set-up and compilation), for the HTML report's time series.
        warm = self.clock.durations(0, start)[0] if start > 0 else []
        total = sum(per_step)
        host_window = self.clock.host[end] - self.clock.host[start] if m > 0 else 0.0
        samples = self.samples_at[end] - self.samples_at[start] if m > 0 else 0
        stall = None
        if m > 0 and self.data.batches > 0 and host_window > 0:
            stall = min(1.0, (self.wait_at[end] - self.wait_at[start]) / host_window)
        syncs = None
        if m > 0 and self.syncs.used:
            syncs = (self.syncs_at[end] - self.syncs_at[start]) / m
        try:
            losses = self.loss.values(torch)
        except Exception as exc:
            print(f"gpuperf runtime: could not read losses: {exc}", file=sys.stderr)
            losses = [None] * self.steps_done
        device = self._device()
        gpu = None
        if self.sampler is not None and m > 0:
            gpu = self.sampler.summary(self.clock.host[start], self.clock.host[end], m)
        values: dict[str, Any] = {
            "status": status,
            "exit_code": exit_code,
            "stderr_tail": "",
            "error": error,
            "ended_early": status in ("completed", "no_steps", "crashed") and self.steps_done < self.limit,
            "requested": {"steps": self.steps, "warmup": self.warmup},
            "seed": seed,
            "warmup_steps": start,
            "measured_steps": m,
            "total_steps": self.steps_done,
            "batch_size": self.data.first_batch_size,
            "steps_per_s": m / total if total > 0 else None,
            "samples_per_s": samples / total if total > 0 and samples > 0 else None,
            "wall_time_s": wall_s,
            **self._step_times(per_step, start, end),
            "warmup_step_time_s": warm,
            "timing_source": source,
            "input_stall_fraction": stall,
            "before_backward_s": summarize(
                [v for v in self.before_bwd[start + 1 : end + 1] if v is not None]),
            "syncs_per_step": syncs,
            "host_reads_per_step": self._reads(start, end, device),
            "host_reads_counted": CPU_READS if device == "cpu" else DEVICE_READS,
            "memory": self._memory(start, end),
            "amp": self.amp.document(torch, start, end, self.steps_done),
            "distributed": ddp.document(self.comm, per_step, start, self._backwards(start, end), summarize),
            "gpu": gpu,
            "loss": losses,
            "loss_unscaled_by_gradscaler": self.loss.unscaled_by_gradscaler,
            "loss_nonfinite_steps": [i for i, v in enumerate(losses)
                                     if v is not None and not math.isfinite(v)],
            "compile": compilation.collect(),
            "trace": self.tracer.result if self.tracer is not None else None,
            "fingerprint": fingerprint.collect(torch, device, script, world_size),
            "rank": rank,
            "world_size": world_size,
            "ranks": None,
            "phases": self._phases(start, end, per_step),
        }
        values["observed"] = self._observed(start, end, device, values["distributed"], values["amp"])
        doc = schema.fill(schema.empty_document(script, args, status), **values)
        doc["diagnosis"] = diagnosis.diagnose(doc)
        return doc


    def _step_times(self, per_step: list[float], start: int, end: int) -> dict[str, Any]:
        """Wall time of each measured step and the process's CPU time of the same steps."""
        cpu = self.clock.cpu_durations(start, end) if end > start else []
        return {"step_time_s": summarize(per_step), "cpu_time_s": summarize(cpu),
                "cpu_time_total_s": math.fsum(cpu) if cpu else None}

    def _observed(self, start: int, end: int, device: str, distributed: dict[str, Any] | None,
                  amp_doc: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.observed.document(start, end, device, self._backwards(start, end), distributed,
                                          amp_doc.get("autocast_dtypes") or [])
        except Exception as exc:  # the observation must never lose the measurements
            print(f"gpuperf runtime: observation failed: {exc}", file=sys.stderr)
            return schema.empty_observed()

    def _phases(self, start: int, end: int, per_step: list[float]) -> dict[str, Any]:
        comp = compilation.collect()
        med = summarize(per_step)["median"] if per_step else None
        return phases.document(self.clock.host, lambda t: t + self.epoch_minus_perf, (start, end), med,
                               comp.get("time_s") if comp else None, self.device.seconds, time.time())


def print_script_traceback(exc: BaseException, script: str) -> None:
    """Print the traceback from the script's first frame on, as ``python script.py`` would."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)


def finite(obj: Any) -> Any:
    """JSON has no NaN/Infinity: non-finite floats become null (a diverged loss must not lose the run)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def write_json_atomic(path: str | Path, doc: dict[str, Any]) -> None:
    path = Path(path)
    doc = finite(doc)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False, default=str))
    os.replace(tmp, path)  # readers never see a half-written file


def _install_hooks(torch: Any, session: Session, out: str, trace_dir: str | None,
                   world_size: int) -> list[Any]:
    """Everything the shim hooks into torch (and the write guard); returns the undo functions."""
    # Writes that would change the user's files are refused (or get a private copy) from here on;
    # the shim's own result and trace go where the tool asked.
    guarded = guard.install_from_env(torch, allow=[os.path.dirname(out), trace_dir or ""])
    undo = [
        install_optimizer_hooks(torch, session.on_step, session.check_stop),
        install_backward_hooks(torch, session.loss),
        install_dataloader(torch, session.data),
        session.reads.install(torch),
        amp.install(torch, session.amp),
        session.device.install(torch),
    ]
    if session.observed.enabled:  # on unless GPUPERF_OBSERVE=0: cheap enough for every run
        undo += [observe_constructors.install(torch, session.observed), observe_calls.install(torch, session.observed)]
    if guarded is not None:
        undo.append(guarded)
    if world_size > 1:  # all-reduce timing: only a launched world has more than one process
        undo.append(ddp.install(torch, session.comm))
    if os.environ.get(amp.FP32_ENV) == "1":  # the fp32 reference run of --precision-check
        undo.append(amp.force_fp32(torch))
    return undo


def run(script: str | None, args: list[str], *, out: str, steps: int, warmup: int, seed: int,
        trace_dir: str | None, module: str | None = None) -> int:
    """Run ``script`` (or ``module``, as ``python -m`` does; ``script`` is then its file, if
    known) under the shim, write the JSON to ``out``; return the process exit code."""
    import torch  # the user's torch, imported before their script like any `import torch` would

    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    script = os.path.abspath(script) if script is not None else f"-m {module}"
    session = Session(torch, steps=steps, warmup=warmup, trace_dir=trace_dir, rank=rank, project=script)
    running = [True]

    def on_sigterm(signum: int, frame: Any) -> None:
        if running[0]:
            running[0] = False
            raise Terminated()

    signal.signal(signal.SIGTERM, on_sigterm)
    undo = _install_hooks(torch, session, out, trace_dir, world_size)
    t0 = time.perf_counter()

    def finish(status: str, exit_code: int, error: str | None) -> int:
        running[0] = False
        wall = time.perf_counter() - t0
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fn in reversed(undo):  # last wrapped, first restored
            fn()
        if session.stopping:  # reached the limit, however the script reacted to StopProfiling
            status, exit_code, error = "step_limit", 0, None
        elif status == "completed" and session.steps_done == 0:
            status = "no_steps"
        doc = session.build(script, args, status, exit_code, error, wall, world_size, rank, seed)
        write_json_atomic(out, doc)
        return exit_code

    def finish_now() -> None:
        # Results first, then a hard exit: at the step limit of a one-process run (nothing after
        # it is measured), and for a script that caught StopProfiling with a bare except (one that
        # swallows BaseException cannot be stopped any other way).
        code = finish("step_limit", 0, None)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    session.finish_now = finish_now
    # Under a launcher every rank must leave its collectives together: they unwind as before.
    session.exit_at_limit = world_size == 1 and trace_dir is None
    seed_everything(seed, torch)
    try:
        script = entry.prepare(script, module)  # sys.path as `python` sets it; the file that runs
    except BaseException as exc:  # noqa: BLE001 - as `python -m`: a message, exit status 1
        return finish("crashed", 1, entry.spec_error(module, exc))
    sys.argv = [script, *args]
    status, exit_code, error = "completed", 0, None
    session.clock.start()
    try:
        entry.execute(script, module)
    except StopProfiling:
        pass
    except Terminated:
        status, exit_code, error = "crashed", 128 + signal.SIGTERM, "terminated by SIGTERM"
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0):
            if not isinstance(code, int):
                print(code, file=sys.stderr)  # what the interpreter would have printed
                code = 1
            status, exit_code, error = "crashed", code, f"SystemExit({exc.code!r})"
    except BaseException as exc:  # noqa: BLE001 - any script failure is a result, not our crash
        print_script_traceback(exc, script)
        entry.print_hint(exc, script, module)
        status, exit_code, error = "crashed", 1, f"{type(exc).__name__}: {exc}"[:2000]
    return finish(status, exit_code, error)


def exit_soon(code: int, grace_s: float = 10.0) -> None:
    """Exit normally (atexit, DataLoader worker shutdown), but never hang on a stuck thread."""
    sys.stdout.flush()
    sys.stderr.flush()
    timer = threading.Timer(grace_s, os._exit, args=(code,))
    timer.daemon = True
    timer.start()
    sys.exit(code)
