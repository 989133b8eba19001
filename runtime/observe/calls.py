"""Calls counted by the line that made them: ``zero_grad``, host-to-device copies
(``Tensor.to(device)``/``.cuda()``), ``Tensor.cpu()`` in the training step, and the config files
(YAML/JSON/TOML) the script opened.

Calls from torch itself are not counted (the first frame above ours is torch's or generated
code's, such as a compiled graph run by the eager backend), nor calls made
while a DataLoader produces a batch or in a forked worker (the input pipeline's, not the step's),
nor calls made while ``torch.compile`` traces (``is_compiling()`` first, so a compiled graph
sees the original method). Config files are seen through an audit hook (the ``open`` event): it
cannot be removed, so it goes quiet when the run ends.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from .observer import Observer

CONFIG_SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}
_WRITE_MODES = set("wax+")


def _device_of(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, bool]:
    """The target device of ``Tensor.to(...)`` (None for a dtype-only conversion) and non_blocking."""
    device = kwargs.get("device")
    nb = kwargs.get("non_blocking")
    if args:
        first = args[0]
        if isinstance(first, (str, int, torch.device)) and not isinstance(first, bool):
            device = first
            if nb is None and len(args) >= 3:  # to(device, dtype, non_blocking)
                nb = args[2]
        elif isinstance(first, torch.Tensor):
            device = first.device
            if nb is None and len(args) >= 2:  # to(other, non_blocking)
                nb = args[1]
    return device, bool(nb)


def _accelerator(torch: Any, device: Any) -> bool:
    try:
        return torch.device(device).type != "cpu" if not isinstance(device, int) else True
    except Exception:
        return False


def _copies(torch: Any, obs: Observer, torch_dir: str, undo: list[Callable[[], None]]) -> None:
    tensor = torch.Tensor
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
    orig_to, orig_cuda, orig_cpu = tensor.to, tensor.cuda, tensor.cpu

    def outside(frame: Any) -> bool:
        """Not torch's call, nor generated code's (a compiled graph run eagerly: ``<eval_with_key>``)."""
        name = frame.f_code.co_filename
        return not name.startswith(torch_dir) and name[:1] != "<" and not obs.in_pipeline()

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not compiling() and getattr(self, "is_cpu", False):
            frame = sys._getframe(1)
            if outside(frame):
                try:
                    device, nb = _device_of(torch, args, kwargs)
                except Exception:  # odd arguments: torch's own call below reports them
                    device, nb = None, False
                # On a CUDA run only copies to an accelerator; on a CPU run every .to(device), each a
                # host-to-device copy once the device is a GPU.
                if device is not None and (obs.device != "cuda" or _accelerator(torch, device)):
                    obs.count("h2d", frame, nb)
        return orig_to(self, *args, **kwargs)

    def cuda(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not compiling() and getattr(self, "is_cpu", False):
            frame = sys._getframe(1)
            if outside(frame):
                nb = kwargs.get("non_blocking", args[1] if len(args) >= 2 else False)
                obs.count("h2d", frame, bool(nb))
        return orig_cuda(self, *args, **kwargs)

    def cpu(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not compiling():
            frame = sys._getframe(1)
            if outside(frame) and (not getattr(self, "is_cpu", True) or obs.device in (None, "cpu")):
                obs.count("cpu", frame)
        return orig_cpu(self, *args, **kwargs)

    for name, fn, orig in (("to", to, orig_to), ("cuda", cuda, orig_cuda), ("cpu", cpu, orig_cpu)):
        fn.__name__, fn.__doc__ = name, getattr(orig, "__doc__", None)
        setattr(tensor, name, fn)
        undo.append(lambda name=name, orig=orig: setattr(tensor, name, orig))


def _zero_grad(torch: Any, obs: Observer, torch_dir: str, undo: list[Callable[[], None]]) -> None:
    for cls in (torch.optim.Optimizer, torch.nn.Module):
        orig = cls.__dict__.get("zero_grad")
        if orig is None:
            continue

        def zero_grad(self: Any, *args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
            set_to_none = kwargs.get("set_to_none", args[0] if args else True)
            obs.count("zero_grad", sys._getframe(1), bool(set_to_none))
            return _orig(self, *args, **kwargs)

        zero_grad.__doc__ = getattr(orig, "__doc__", None)
        setattr(cls, "zero_grad", zero_grad)
        undo.append(lambda cls=cls, orig=orig: setattr(cls, "zero_grad", orig))


_AUDITED: list[Observer | None] = []  # [the observer the audit hook reports to]: one hook per process


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _AUDITED or _AUDITED[0] is None:
        return
    obs = _AUDITED[0]
    try:
        path, mode = args[0], args[1]
        if not isinstance(path, str) or (isinstance(mode, str) and _WRITE_MODES & set(mode)):
            return
        fmt = CONFIG_SUFFIXES.get(os.path.splitext(path)[1].lower())
        if fmt is None:
            return
        full = os.path.abspath(path)
        if full not in obs.config_files:
            obs.config_files[full] = {"path": full, "format": fmt, "site": obs.sites.site(sys._getframe(1))}
    except Exception:
        pass


def _config_files(obs: Observer, undo: list[Callable[[], None]]) -> None:
    """Audit hooks cannot be removed: one per process, pointed at the run's observer, then at none."""
    if not _AUDITED:
        _AUDITED.append(None)
        sys.addaudithook(_audit)
    _AUDITED[0] = obs
    undo.append(lambda: _AUDITED.__setitem__(0, None))


def install(torch: Any, obs: Observer) -> Callable[[], None]:
    """Wrap the counted calls; return an undo (in reverse order)."""
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    undo: list[Callable[[], None]] = []
    for part in (_copies, _zero_grad):
        try:
            part(torch, obs, torch_dir, undo)
        except Exception as exc:  # an observation must never stop the run
            print(f"gpuperf runtime: observation of {part.__name__[1:]} off: {exc}", file=sys.stderr)
    _config_files(obs, undo)

    def restore() -> None:
        for fn in reversed(undo):
            fn()

    return restore
