"""GPU telemetry from NVML (pynvml / nvidia-ml-py), sampled in a background thread.

Optional: without pynvml, or when NVML fails, :func:`start` returns None and ``gpu`` is null.
Sampling every 100 ms costs a few NVML calls per sample, off the training thread.
"""

from __future__ import annotations

import threading
import time
from typing import Any

INTERVAL_S = 0.1


class Sampler(threading.Thread):
    def __init__(self, nvml: Any, handle: Any) -> None:
        super().__init__(name="gpuperf-nvml", daemon=True)
        self.nvml = nvml
        self.handle = handle
        self.samples: list[tuple[float, float | None, int | None, float | None, float | None, float | None]] = []
        self._stop_event = threading.Event()

    def _read(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(self.handle, *args)
        except Exception:
            return None

    def sample(self) -> None:
        n = self.nvml
        util = self._read(n.nvmlDeviceGetUtilizationRates)
        mem = self._read(n.nvmlDeviceGetMemoryInfo)
        clock = self._read(n.nvmlDeviceGetClockInfo, n.NVML_CLOCK_SM)
        power_mw = self._read(n.nvmlDeviceGetPowerUsage)
        energy_mj = self._read(n.nvmlDeviceGetTotalEnergyConsumption)
        self.samples.append((
            time.perf_counter(),
            float(util.gpu) if util is not None else None,
            int(mem.used) if mem is not None else None,
            float(clock) if clock is not None else None,
            power_mw / 1e3 if power_mw is not None else None,
            energy_mj / 1e3 if energy_mj is not None else None,
        ))

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(INTERVAL_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=1.0)

    def summary(self, t0: float, t1: float, steps: int) -> dict[str, Any] | None:
        """Aggregate samples taken inside the measured window [t0, t1] (perf_counter)."""
        win = [s for s in self.samples if t0 <= s[0] <= t1]
        if not win:
            return None

        def mean(i: int) -> float | None:
            vals = [s[i] for s in win if s[i] is not None]
            return sum(vals) / len(vals) if vals else None

        mems = [s[2] for s in win if s[2] is not None]
        energy = [(s[0], s[5]) for s in win if s[5] is not None]
        per_step = None
        if len(energy) >= 2 and steps > 0 and energy[-1][0] > energy[0][0]:
            # Average power from the energy counter, scaled to the whole window.
            watts = (energy[-1][1] - energy[0][1]) / (energy[-1][0] - energy[0][0])
            per_step = watts * (t1 - t0) / steps
        return {
            "utilization_pct_mean": mean(1),
            "memory_used_bytes_max": max(mems) if mems else None,
            "sm_clock_mhz_mean": mean(3),
            "power_w_mean": mean(4),
            "energy_j_per_step": per_step,
            "samples": len(win),
        }


def start(torch: Any) -> Sampler | None:
    try:
        import pynvml  # type: ignore[import-not-found]
    except Exception:
        return None
    try:
        pynvml.nvmlInit()
        handle = None
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        # Match by UUID: CUDA_VISIBLE_DEVICES renumbers CUDA devices, not NVML's indices.
        uuid = str(getattr(props, "uuid", "") or "")
        for candidate in (uuid if uuid.startswith("GPU-") else f"GPU-{uuid}", uuid):
            if handle is not None or not uuid:
                break
            try:
                handle = pynvml.nvmlDeviceGetHandleByUUID(candidate)
            except Exception:
                handle = None
        if handle is None:
            handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        sampler = Sampler(pynvml, handle)
        sampler.start()
        return sampler
    except Exception:
        return None
