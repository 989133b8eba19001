"""The validation seam: one run of a script under the runtime shim, asked for with a typed
:class:`RunRequest` and answered with the shim's document (:class:`RunDoc`).

Every measuring path (A/B, baseline, regress, ``--apply``, ``profile --precision-check``, the
batch-size probe) calls a :class:`Runner`; the real one is
:func:`gpuperf_rewrite.validate.run.profiling.profile_runner`, tests pass
fakes, and :class:`gpuperf_rewrite.validate.run.workspace.Workspace` wraps one to run in a mirror.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, TypedDict

if TYPE_CHECKING:
    from gpuperf_rewrite.validate.run.config import ABConfig


@dataclass(frozen=True)
class RunRequest:
    """What one run is: the script, its arguments and how it is measured."""

    script: str
    args: tuple[str, ...] = ()
    steps: int = 50
    warmup: int = 10
    timeout: float = 600
    seed: int = 0
    cwd: str | None = None
    env: Mapping[str, str] | None = None  # None: the tool's own environment
    python: str | None = None
    trace_dir: str | None = None
    launcher: str | None = None
    nproc_per_node: int = 1
    module: str | None = None  # run as ``python -m module`` (``script`` is the module's file)
    launcher_args: tuple[str, ...] = ()

    def replace(self, **changes: Any) -> RunRequest:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ScriptVersion:
    """A version of a script to measure: the user's file it stands in for and its bytes (read or
    rewritten once); with ``module`` (name, sys.path root) it runs as ``python -m name``.
    ``companions`` are other files of the checkout (the modules the script imports) with the
    bytes this version's runs see in their place: --apply's version B of a whole project."""

    original: Path
    source: bytes
    module: tuple[str, Path] | None = None
    companions: tuple[tuple[Path, bytes], ...] = ()

    @classmethod
    def read(cls, original: str | Path, module: tuple[str, Path] | None = None) -> ScriptVersion:
        """The file as it is now."""
        path = Path(original)
        return cls(path, path.read_bytes(), module)

    def identity(self) -> bytes:
        """Every file of this version (script and companions): equal for equal versions."""
        return b"\0".join([self.source, *(str(p).encode() + b"\0" + data for p, data in self.companions)])

    @property
    def text(self) -> str:
        """The source as text, for the loss check's precision detection (the companions' too:
        an autocast added in an imported module changes the precision as much)."""
        return "\n".join(b.decode(errors="replace") for b in (self.source, *(data for _, data in self.companions)))


def run_request(script: str, args: Sequence[str] = (), **fields: Any) -> RunRequest:
    """A request with ``args`` (any sequence) as a tuple of strings."""
    return RunRequest(str(script), tuple(str(a) for a in args), **fields)


def measured_run(script: str | Path, args: Sequence[str], cfg: ABConfig, seed: int, *,
                 cwd: str | Path | None = None, env: Mapping[str, str] | None = None) -> RunRequest:
    """One run of an A/B, baseline or plan profile: ``cfg``'s steps, warmup, timeout and launcher."""
    return run_request(str(script), args, steps=cfg.steps, warmup=cfg.warmup, timeout=cfg.timeout, seed=seed,
                       cwd=None if cwd is None else str(cwd), env=env, launcher=cfg.launcher,
                       nproc_per_node=cfg.nproc_per_node, launcher_args=tuple(cfg.launcher_args))


class RunDoc(TypedDict, total=False):
    """The keys of the shim's result document the validation reads (all keys: runtime/schema.py,
    documented in docs/runtime.md). A fake runner may leave any of them out."""

    status: str
    exit_code: int | None
    error: str | None
    stderr_tail: str
    stdout_tail: str
    ended_early: bool
    measured_steps: int
    batch_size: int | None
    steps_per_s: float | None
    samples_per_s: float | None
    wall_time_s: float | None
    cpu_time_total_s: float | None  # CPU seconds of the measured window (docs/runtime.md)
    loss: list[float | None]
    loss_nonfinite_steps: list[int]
    memory: dict[str, Any]
    amp: dict[str, Any]
    gpu: dict[str, Any] | None
    fingerprint: dict[str, Any] | None
    diagnosis: list[dict[str, Any]]
    launcher: str | None  # under a launcher: merged over ranks (the slowest rank's step times, rank 0's loss)
    world_size: int


class Runner(Protocol):
    """Runs one request to its end (never hangs, never raises for a failed run) and returns its document."""

    def __call__(self, request: RunRequest) -> RunDoc: ...

