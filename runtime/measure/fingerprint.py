"""Environment fingerprint: two runs are comparable only when their env_hash matches."""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Any


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def file_sha256(path: str | Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:  # a script that could not be read is reported as crashed, not re-raised here
        return None


def env_hash(fp: dict[str, Any]) -> str:
    """sha256 over every fingerprint field except the script hash (and itself)."""
    rest = {k: v for k, v in fp.items() if k not in ("script_sha256", "env_hash")}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def collect(torch: Any, device: str, script: str | Path, world_size: int) -> dict[str, Any]:
    name = cpu_name()
    if device.startswith("cuda"):
        try:
            name = torch.cuda.get_device_name(torch.cuda.current_device())
        except Exception:
            pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 0
    fp: dict[str, Any] = {
        "device": device,
        "device_name": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu_count": cpus,
        "platform": platform.platform(),
        "world_size": world_size,
        "script_sha256": file_sha256(script),
    }
    fp["env_hash"] = env_hash(fp)
    return fp
