"""The trained model(s), found once at the first optimizer step, and the global switches then.

Every ``nn.Module`` construction is noted with its site (:mod:`.constructors`); at the first step
the *roots* among the live noted modules (not a child of another noted module) whose parameters
an optimizer holds are the trained models. Wrappers are looked through: ``torch.compile``'s
``OptimizedModule`` (compiled), ``DistributedDataParallel``/``DataParallel`` (ddp); the model
reported is the one inside, at the line that built it. Nothing here runs per step.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable

KIND_NAMES = {"Attention": "attention", "Attn": "attention"}  # user classes by name (nanoGPT's CausalSelfAttention)


def _kind_classes(torch: Any) -> list[tuple[tuple[type, ...], str]]:
    nn = torch.nn
    mods = nn.modules
    return [
        ((mods.conv._ConvNd,), "conv"),
        ((nn.Linear, nn.Bilinear, getattr(nn, "LazyLinear", nn.Linear)), "linear"),
        ((nn.MultiheadAttention,), "attention"),
        ((mods.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm, getattr(nn, "RMSNorm", nn.LayerNorm)), "norm"),
        ((nn.Embedding, nn.EmbeddingBag), "embedding"),
        ((nn.RNNBase,), "rnn"),
    ]


def kinds(torch: Any, model: Any) -> list[str]:
    """The module kinds present in ``model``, in the contract's order."""
    classes = _kind_classes(torch)
    found: set[str] = set()
    for m in model.modules():
        for types, kind in classes:
            if isinstance(m, types):
                found.add(kind)
        name = type(m).__name__
        if any(part in name for part in KIND_NAMES):
            found.add("attention")
    order = ["conv", "linear", "attention", "norm", "embedding", "rnn"]
    return [k for k in order if k in found]


def unwrap(torch: Any, model: Any) -> tuple[Any, bool, bool]:
    """(the model inside compile/DDP wrappers, compiled, ddp)."""
    compiled = ddp = False
    parallel = tuple(c for c in (getattr(torch.nn.parallel, "DistributedDataParallel", None),
                                 getattr(torch.nn, "DataParallel", None)) if c is not None)
    for _ in range(8):
        inner = getattr(model, "_orig_mod", None)
        if inner is not None and type(model).__name__ == "OptimizedModule":
            compiled, model = True, inner
        elif parallel and isinstance(model, parallel):
            ddp, model = True, model.module
        else:
            break
    if getattr(model, "_compiled_call_impl", None) is not None:  # model.compile(): in place
        compiled = True
    return model, compiled, ddp


def roots(torch: Any, noted: Iterable[Any], param_ids: set[int]) -> list[Any]:
    """The noted modules that hold optimized parameters and are no noted module's child, biggest first."""
    graph_module = getattr(getattr(torch, "fx", None), "GraphModule", None)
    live = [m for m in noted if not (graph_module is not None and isinstance(m, graph_module))]
    children: set[int] = set()
    for m in live:
        for c in m.children():
            children.add(id(c))
    out = []
    for m in live:
        if id(m) in children:
            continue
        n = sum(p.numel() for p in m.parameters() if id(p) in param_ids)
        if n:
            out.append((n, m))
    out.sort(key=lambda nm: -nm[0])
    return [m for _, m in out]


def param_dtype(model: Any) -> str | None:
    counts: dict[str, int] = {}
    for p in model.parameters():
        counts[str(p.dtype)] = counts.get(str(p.dtype), 0) + p.numel()
    return max(counts, key=lambda k: counts[k]) if counts else None


def device_type(model: Any) -> str | None:
    for p in model.parameters():
        return p.device.type
    return None


def watch_forward_autocast(torch: Any, root: Any, info: dict[str, Any]) -> None:
    """Note whether the next forward of ``root`` runs under autocast (then stop watching)."""
    dev = info.get("_device") or "cpu"

    def pre(module: Any, args: Any) -> None:
        try:
            if torch.is_autocast_enabled(dev):
                info["forward_autocast"] = str(torch.get_autocast_dtype(dev))
            info["_forward_seen"] = True
        finally:
            handle.remove()

    handle = root.register_forward_pre_hook(pre)


def switches(torch: Any, device: str) -> dict[str, Any]:
    """The global precision and cuDNN switches, read once (no warnings printed for us)."""
    out: dict[str, Any] = {"device": device}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, read in (
            ("float32_matmul_precision", lambda: torch.get_float32_matmul_precision()),
            ("cudnn_benchmark", lambda: bool(torch.backends.cudnn.benchmark)),
            ("cuda_matmul_allow_tf32", lambda: bool(torch.backends.cuda.matmul.allow_tf32)),
            ("cudnn_allow_tf32", lambda: bool(torch.backends.cudnn.allow_tf32)),
        ):
            try:
                out[key] = read()
            except Exception:
                out[key] = None
    return out
