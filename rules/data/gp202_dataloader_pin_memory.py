"""GP202 dataloader-pin-memory."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .._api import AddImport, Finding, Fix, Invalid, NoFix, Rule, Valid, dedent
from ..analysis.facts.cli_defaults import false_default_flag
from ..analysis.facts.device_datasets import device_dataset
from ..analysis.facts.framework_docs import FRAMEWORK_LOADERS, HF, LIGHTNING, blind_silent
from ..analysis.facts.gpu_use import may_use_cuda
from ..analysis.facts.kwargs import call_keywords
from ..analysis.facts.loader_builders import built_loaders
from ..analysis.facts.loaders import host_list_batches, index_dataset, loader_calls, may_build_loader
from ..analysis.fixes.edits import torch_alias
from ..analysis.fixes.frameworks import FRAMEWORK_KEYWORDS, framework_findings
from ..analysis.syntax.calls import literal_value
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.glance import Glance
from ..analysis.syntax.launch import launched_with, project_runs
from ._loader_args import AMBIGUOUS, FROM_YAML, config_settings, new_key_edit, set_setting, settings_of
from ._loader_iteration import takes_one_batch
from ._unresolved_loaders import forwarded_key, handed_on, options_here, pinned_elsewhere, unresolved_placement, unseen_dict


class DataloaderPinMemory(Rule):
    code = "GP202"
    name = "dataloader-pin-memory"
    summary = "A DataLoader feeding a model that may run on CUDA does not pin host memory."
    rationale = (
        "Copies from pageable host memory to the GPU go through a staging buffer and cannot overlap "
        "with compute: the driver first copies into pinned memory, then DMAs it. With "
        "`pin_memory=True` the loader hands out batches already in page-locked memory, the copy runs "
        "at full PCIe/NVLink bandwidth and, with `non_blocking=True`, overlaps with the previous step."
    )
    fix_description = (
        "Add `pin_memory=torch.cuda.is_available()` (so the script still runs on machines without a "
        "GPU; through torch's alias where it has one), importing torch if needed."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Safe where the file shows that its data reaches CUDA (on a machine without a GPU the fix "
        "evaluates to `pin_memory=False`). Unsafe where the device was not resolved (a loader "
        "returned, stored on `self` or handed to other code, or iterated in a library module): "
        "pinning batches that stay on the CPU costs page-locked memory for nothing. A pin value "
        "the tool cannot resolve (`self.hparams.pin_memory`) is reported without a fix."
    )
    # gains_on 'cuda': pinned memory only speeds host-to-GPU copies; on CPU the fix evaluates to
    # `pin_memory=False`.
    gains_on = "cuda"
    limitations = (
        "Reported only when the file shows that its data can reach CUDA: it names CUDA (a "
        "`\"cuda\"` string, `.cuda()`, `torch.cuda.*`, `torch.accelerator.*`, `\"nccl\"`), places "
        "something on a device chosen at run time (`args.device`, an environment variable or "
        "rank, a parameter named like a device, `accelerator.device`), or uses a framework that "
        "places batches (Accelerate, Lightning, the Hugging Face Trainer); in a loader module "
        "without a `__main__` guard (`get_loader(...)` in data_loader.py), when a script that "
        "imports it, or a module of the user's that script imports, names CUDA. Other placement "
        "done only in another module is missed; a program that always runs on the CPU or MPS is not reported, "
        "while one that names CUDA and still trains on the CPU is.",
        "`pin_memory` set to anything but a literal `False` is trusted, except a command-line switch "
        "that is off by default (`pin_memory=args.pin_mem` from an `argparse` `store_true` option or "
        "`default=False` (or an int switch, `type=int, default=0`) in the file or in a module of the "
        "user's it imports, also stored on `self` (`self.pin_memory = args.pin_memory`), or a `bool` field "
        "defaulting to False of a typed arguments class of the user's modules): reported without a fix, naming the flag, unless the project's launch "
        "scripts pass it.",
        "`**` dicts built in the same file are read (see GP201); a DataLoader with `*args` or a "
        "`**` dict the file cannot see into is skipped. The fix writes `pin_memory` next to "
        "`num_workers` (or into the dict's only literal definition) when that dict feeds nothing "
        "but DataLoaders, else the finding comes without a fix.",
        "A loader only asked for its first batch (`next(iter(loader))`), over a range of indices "
        "(`DataLoader(torch.arange(n))`: a few bytes a batch), or whose `collate_fn` (a function or method of the "
        "file, a lambda) returns only Python lists (`[frame[c].tolist() for c in frame]` of captions and file paths, "
        "a dict of `.tolist()`s: nothing to pin) is not reported.",
        "`pin_memory`/`num_workers` read from a configuration node's key whose default the user's module sets off "
        "(yacs/GraphGym `cfg.pin_memory = False` in `set_cfg(cfg)`), or from `args` handed in by an entry script whose "
        "parser (its own or a module it imports) defines the option off by default, are named as the key or flag a "
        "run passes.",
        "A `DataLoader` subclass of the user's that passes DataLoader's arguments through counts as "
        "a DataLoader (see GP201); one with a signature of its own is reported at its "
        "`super().__init__(...)` when that leaves pin_memory out (its callers cannot set it). webdataset's "
        "`WebLoader` and torchdata's `StatefulDataLoader` hand their arguments to torch's DataLoader and "
        "count as one.",
        "Where the file does not show the device (issue 34: a datamodule, loader factory or trainer base "
        "class whose loader is returned, stored or handed on, in a module that is no script), the loader is "
        "reported saying the placement was not resolved, with the same fix marked unsafe; a file that names "
        "the CPU (or a framework set to the CPU) as its device, or a script that iterates its loader itself "
        "without placing anything on CUDA, is not reported.",
        "A `pin_memory` forwarded from a stored or configured value (`self.hparams.pin_memory`, "
        "`cfg.DATALOADER.PIN_MEMORY`, `getattr(cfg, \"pin_memory\", False)`, `opts.get(\"pin_memory\")`; not a "
        "parsed command line, see above), or left to a `**` mapping the file cannot see into, is reported "
        "without a fix unless something turns pinning on: a True for that name in the file (a parameter's "
        "default, an assignment, a dict entry, a keyword), a launch script passing the flag, or the project's "
        "shipped configuration files, launch scripts or typed Python defaults (`pin_memory: true` in a YAML, "
        "`--pin_mem` in a shell script, `pin_memory: bool = True`).",
        FROM_YAML,
        FRAMEWORK_LOADERS,
        blind_silent("the Trainer pins host memory by default (`dataloader_pin_memory=True`), so only an explicit False is slow"),
    )
    frameworks = (HF, LIGHTNING)
    references = (
        "https://docs.pytorch.org/docs/stable/data.html#memory-pinning",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = ("DataLoader", "Loader", "loader", *FRAMEWORK_KEYWORDS)  # "loader": a builder of the user's (build_dataloader)

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        # a DataLoader class named here, a framework's loader settings, or other modules' loaders
        return may_build_loader(glance)

    examples = [
        Valid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = "cuda" if torch.cuda.is_available() else "cpu"
            loader = DataLoader(ds, batch_size=8, pin_memory=True)
        """)),
        Invalid(dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            loader = DataLoader(ds, batch_size=8, shuffle=True)
        """), fixed=dedent("""
            import torch
            from torch.utils.data import DataLoader
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            loader = DataLoader(ds, batch_size=8, shuffle=True, pin_memory=torch.cuda.is_available())
        """)),
        Invalid(dedent("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_pin_memory=False)
        """), fixed=dedent("""
            from transformers import TrainingArguments
            args = TrainingArguments(output_dir="out", dataloader_pin_memory=True)
        """)),
    ]
    framework_examples = (examples[-1],)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from framework_findings(ctx, self.code)
        if may_use_cuda(ctx):
            for built in built_loaders(ctx):  # returned by a builder of the user's other modules
                if built.no_pin and not takes_one_batch(ctx, built.call):
                    where = " and ".join(built.no_pin)
                    yield Finding(built.call, "DataLoader does not pin host memory: every host-to-GPU copy goes through "
                                              f"a staging buffer and cannot overlap compute (the loader `{built.function}` "
                                              f"returns, {where}, does not set pin_memory)",
                                  no_fix_reason=f"the loader is built in {where}: set pin_memory there")
        calls = loader_calls(ctx)
        entries = project_runs(ctx).entries  # a loader factory module: the scripts that run it
        if not calls:
            return
        cuda = may_use_cuda(ctx) or bool(entries) and any("cuda" in e.settings for e in entries)
        for call in calls:
            if not cuda and not handed_on(ctx, call, entries):
                continue  # batches used here, on no device the file shows: they stay on the host
            if index_dataset(ctx, call):
                continue  # batches of a few integer indices: nothing worth pinning
            if host_list_batches(ctx, call):
                continue  # batches of Python lists (captions, file paths): nothing to pin
            if device_dataset(ctx, call):
                continue  # a dataset of tensors already on the GPU: nothing to pin
            settings = settings_of(ctx, call, "pin_memory")
            if call_keywords(ctx, call).opaque and (cfg := config_settings(ctx, call)) is not None:
                if cfg[1].get("pin_memory", False) is False and not takes_one_batch(ctx, call):
                    yield Finding(call, f"DataLoader does not pin host memory (`pin_memory` "
                                        f"{'is false' if 'pin_memory' in cfg[1] else 'is not set'} in {cfg[0]}): every "
                                        "host-to-GPU copy goes through a staging buffer and cannot overlap compute; "
                                        "set pin_memory", no_fix_reason=f"the loader's settings come from {cfg[0]}: "
                                                                        "set pin_memory there")
                continue
            if len(settings) == 1 and not call_keywords(ctx, call).opaque and \
                    (flag := false_default_flag(ctx, settings[0].value)) is not None:
                if launched_with(ctx, (flag,)) is None and not takes_one_batch(ctx, call):
                    code = ctx.code_for(settings[0].value).strip()
                    yield Finding(call, f"DataLoader does not pin host memory by default: `pin_memory` is `{code}`, off "
                                        f"unless a run passes {flag}; every host-to-GPU copy goes through a staging "
                                        "buffer and cannot overlap compute",
                                  no_fix_reason=f"pinning is opt-in on the command line: a run must pass {flag} (or "
                                                "its default be turned on)")
                continue
            unresolved = _unresolved_setting(ctx, call, settings)
            if unresolved is not None:
                yield from unresolved
                continue
            if call_keywords(ctx, call).opaque or any(literal_value(s.value) is not False for s in settings):
                continue  # unknown, or set to something the user chose
            if takes_one_batch(ctx, call):
                continue
            if not cuda:
                yield unresolved_placement(ctx, call, settings)
                continue
            alias = torch_alias(ctx)  # ``import torch as th`` -> ``th.cuda.is_available()``
            value = f"{alias or 'torch'}.cuda.is_available()"
            imports = () if alias is not None else (AddImport("torch"),)
            message = ("DataLoader does not pin host memory: every host-to-GPU copy goes through a "
                       "staging buffer and cannot overlap compute; set pin_memory")
            if not settings:
                edit = new_key_edit(ctx, call, "pin_memory", value)
            elif len(settings) == 1:
                edit = set_setting(ctx, call, settings[0], value)
            else:
                edit = AMBIGUOUS
            if isinstance(edit, NoFix):
                yield Finding.of(call, message, edit)
                continue
            yield Finding(call, message, Fix(f"set pin_memory={value}", (edit, *imports), "safe"))


def _unresolved_setting(ctx: RuleContext, call: cst.Call, settings: list) -> list[Finding] | None:
    """A ``pin_memory`` forwarded from a stored or configured value, or left to a ``**`` mapping the
    file cannot see into (issue 34): the findings (none when something turns pinning on), or None
    when the setting is neither."""
    opaque = call_keywords(ctx, call).opaque
    if len(settings) == 1 and not opaque and \
            (key := forwarded_key(settings[0].value, "pin")) is not None and not options_here(ctx, key):
        if pinned_elsewhere(ctx, key) or takes_one_batch(ctx, call):
            return []
        code = ctx.code_for(settings[0].value).strip()
        return [Finding(call, f"DataLoader may not pin host memory: `pin_memory` is `{code}`, which was not "
                              "resolved to True (no True default in this file, and no shipped configuration, "
                              f"launch script or typed default of the project turns `{key}` on); every "
                              "host-to-GPU copy from pageable memory goes through a staging buffer",
                        no_fix_reason=f"the value comes from `{code}`: turn it on where it is set")]
    if opaque and not settings and (unseen := unseen_dict(ctx, call, "pin_memory")) and \
            not takes_one_batch(ctx, call):
        return [Finding(call, "DataLoader may not pin host memory: `pin_memory` is not given here and "
                              f"`**{unseen}` was not resolved (nothing in this file or the project's shipped "
                              "configuration turns pin_memory on); every host-to-GPU copy from pageable "
                              "memory goes through a staging buffer",
                        no_fix_reason=f"the loader's other settings come from `{unseen}`: set pin_memory there")]
    return None
