"""The facts one of the user's modules offers its importers (rules/analysis/facts/module_facts.py),
read from its source alone: no files, no imports of its own resolved here (those come from the
lint layer through ``RuleContext.project``)."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpuperf_rewrite.rules._framework import ModuleFacts, RuleContext, module_facts
from gpuperf_rewrite.rules.analysis.syntax.project import CONV, MATMUL, FunctionFacts


def facts(source: str, project: dict[str, ModuleFacts] | None = None) -> ModuleFacts:
    source = textwrap.dedent(source)
    return module_facts(RuleContext(cst.parse_module(source), source, "m.py", project))


def test_a_training_function_and_what_its_parameters_are() -> None:
    got = facts("""
        import torch

        def train_one_epoch(model, loader, optimizer, device, scaler, epoch):
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = model(x.to(device)).sum()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()

        def evaluate(model, loader):
            for x in range(3):
                model(x)
    """).functions
    step = got["train_one_epoch"]
    assert step.trains and step.zeroes_grads and step.autocast
    assert dict(step.roles) == {"model": "model", "loader": "loader", "optimizer": "optimizer",
                                "device": "device", "scaler": "scaler"}
    assert step.params == ("model", "loader", "optimizer", "device", "scaler", "epoch")
    assert not got["evaluate"].trains and not got["evaluate"].zeroes_grads


def test_builders_of_models_parameter_groups_optimizers_loaders_and_batches() -> None:
    got = facts("""
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                self.fc = nn.Linear(8, 2)

        def resnet(n=10):
            return Net()

        def build_model(arch):
            return globals()[arch]()

        def get_params_groups(model):
            return [{"params": [p for p in model.parameters() if p.ndim > 1]}]

        def build_optimizer(config, model):
            opt = torch.optim.AdamW(model.parameters(), lr=config.lr)
            return opt

        def make_loader(ds):
            return DataLoader(ds, batch_size=8)

        def zero_grad(params):
            for p in params:
                p.grad = None

        class Loader:
            def next_batch(self):
                return self.x, self.y

            def __iter__(self):
                while True:
                    yield self.next_batch()
    """)
    f = got.functions
    assert got.workload == {CONV, MATMUL} and got.models == {"Net"}
    assert f["resnet"].returns_model and f["build_model"].returns_model
    assert f["get_params_groups"].params_of == "model" and not f["get_params_groups"].returns_model
    assert f["build_optimizer"].returns_optimizer and f["build_optimizer"].params_of == "model"
    assert f["build_optimizer"].unfused_optimizer_line is not None
    assert f["make_loader"].builds_loader
    assert f["zero_grad"].zeroes_grads and not f["zero_grad"].trains
    assert f["Loader.next_batch"].yields_batches and f["Loader.__iter__"].yields_batches
    assert got.batch_methods() == {"next_batch", "__iter__"}
    assert ModuleFacts.from_json(got.to_json()) == got  # what the lint cache stores


def test_helpers_of_its_own_imports_count() -> None:
    utils = ModuleFacts({"clear": FunctionFacts(params=("opt",), zeroes_grads=True)}, frozenset({MATMUL}))
    got = facts("""
        from .utils import clear

        def fit(model, loader, opt):
            for x in loader:
                model(x).backward()
                opt.step()
                clear(opt)
    """, {".utils": utils})
    assert got.functions["fit"].trains and got.functions["fit"].zeroes_grads
    assert got.workload == {MATMUL}  # what the modules it imports compute


def test_a_logger_that_reads_the_tensors_it_is_handed_says_which_parameters() -> None:
    got = facts("""
        import torch

        class Board:
            def record(self, *scalars, **named):
                for s in scalars:
                    self.rows.append(float(s))
                for key, value in named.items():
                    if torch.is_tensor(value):
                        value = value.detach().cpu().item()
                    self.cols[key] = value

            def note(self, value, step):
                self.last = value.item() if isinstance(value, torch.Tensor) else value
                if step % 100 == 0:
                    print(step.item())

            def plain(self, loss):
                self.total += loss.item()  # a tensor in every call: its own module reports it
    """)
    board = got.functions
    assert {p for p, _ in board["Board.record"].arg_reads} == {"*scalars", "**named"}
    assert board["Board.note"].arg_reads and {p for p, _ in board["Board.note"].arg_reads} == {"value"}
    assert board["Board.plain"].arg_reads == ()
    assert ModuleFacts.from_json(got.to_json()) == got  # what the lint cache stores


def test_a_method_that_says_when_to_log_returns_a_rare_result() -> None:
    got = facts("""
        class Schedule:
            def __init__(self, freq):
                self.freq = freq
            def should_log(self, step):
                return step == 1 or step % self.freq == 0
            def is_main(self, rank):
                return rank == 0
            def always(self, step):
                return True
    """).functions
    assert got["Schedule.should_log"].rare_result
    assert not got["Schedule.is_main"].rare_result and not got["Schedule.always"].rare_result


def test_models_that_train_themselves_inherited_and_reexported() -> None:
    base = facts("""
        import torch
        from torch import nn

        class Estimator(nn.Module):
            def forward(self, x):
                return x

            def train_on(self, loader, epochs=1):
                opt = torch.optim.SGD(self.parameters(), lr=0.1)
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = (self(x) - y).pow(2).mean()
                        loss.backward()
                        opt.step()
                        opt.zero_grad()

            def score(self, loader):
                return [self(x) for x, _ in loader]
    """)
    assert base.self_training == {"Estimator.train_on"}
    child = facts("""
        from torch import nn
        from .estimator import Estimator

        class Ridge(Estimator):
            def __init__(self, n):
                super().__init__()
                self.lin = nn.Linear(n, 1)

        class Custom(Estimator):
            def train_on(self, loader, epochs=1):
                pass
    """, {".estimator": base})
    # (the module imports Estimator: it offers it too); Custom overrides the loop
    assert child.self_training == {"Ridge.train_on", "Estimator.train_on"}
    package = facts("from .ridge import Ridge as Linear\n", {".ridge": child})
    assert package.self_training == {"Linear.train_on"}
    assert ModuleFacts.from_json(package.to_json()) == package


def test_a_loader_class_that_keeps_one_iterator_for_its_life() -> None:
    got = facts("""
        from torch.utils.data import DataLoader

        class Endless(DataLoader):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.it = super().__iter__()

            def __iter__(self):
                for _ in range(len(self)):
                    yield next(self.it)

        class Shards(Endless):
            pass

        class Fresh(DataLoader):
            def __iter__(self):
                return super().__iter__()
    """)
    assert got.kept_loaders == {"Endless", "Shards"}
    assert ModuleFacts.from_json(got.to_json()) == got


def test_model_classes_a_decorator_registers_and_aliased_conv_builders() -> None:
    """``@catalog.register(name=...)``, ``@HEADS.register_module()``: model classes a builder picks by
    a configuration string (a plain class, a loss or an undecorated model is not registered); a
    module-level alias of an imported conv builder (``down = blocks.conv_bn``) makes its callers
    convolve."""
    layers = ModuleFacts(conv_models=frozenset({"conv_bn"}), workload=frozenset({CONV}))
    got = facts("""
        from torch import nn
        from . import blocks, catalog
        from .registry import HEADS

        down = blocks.conv_bn

        @catalog.register(name="small")
        class SmallNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = down(3, 16)

        @HEADS.register_module()
        class LinearHead(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 10)

        class Plain(nn.Module):
            pass

        @catalog.register
        class Settings:
            pass
    """, {".blocks": layers, ".catalog": ModuleFacts(), ".registry": ModuleFacts()})
    assert got.registered == {"SmallNet", "LinearHead"}
    assert "SmallNet" in got.conv_models and "LinearHead" not in got.conv_models
    assert ModuleFacts.from_json(got.to_json()).registered == got.registered


def test_an_output_wrapper_says_which_parameters_it_writes_out() -> None:
    got = facts("""
        import logging
        import os

        log = logging.getLogger(__name__)

        def print_master(*args, **kwargs):
            if int(os.environ.get("RANK", 0)) == 0:
                print(*args, **kwargs)

        def info_main(message, step):
            if is_main_process():
                log.info(f"[{step}] {message}")

        def every(step, message):
            if step % 50 == 0:
                print(message)

        def converted(value):
            print(value.item())
    """).functions
    assert got["print_master"].outputs == ("*args",)
    assert set(got["info_main"].outputs) == {"message", "step"}
    assert got["every"].outputs == () and got["converted"].outputs == ()


def test_a_move_helper_says_which_parameter_it_moves() -> None:
    got = facts("""
        import torch

        def to_gpu(t):
            return t.cuda() if torch.cuda.is_available() else t

        def put(sample, device):
            def _put(x, device):
                if torch.is_tensor(x):
                    return x.to(device, non_blocking=True)
                if isinstance(x, dict):
                    return {k: _put(v, device) for k, v in x.items()}
                return x
            return _put(sample, device)

        def cast(x, device):
            return x.float().to(device)

        def normalise(x, device):
            return (x / 255).to(device)

        def to_dtype(x, dtype):
            return x.to(dtype)

        class Runner:
            def _move(self, batch):
                return batch.to(self.device)
    """)
    got_fns = got.functions
    assert got_fns["to_gpu"].moves == ("t",)
    assert got_fns["put"].moves == ("sample",)
    assert got_fns["cast"].moves == ("x",)
    assert got_fns["Runner._move"].moves == ("batch",)
    # computes on what it is handed, or casts it: not a move of the parameter
    assert got_fns["normalise"].moves == () and got_fns["to_dtype"].moves == ()
    assert ModuleFacts.from_json(got.to_json()).functions["to_gpu"].moves == ("t",)


def test_the_batch_keys_a_copy_loop_leaves_on_the_host() -> None:
    found = facts("""
        import torch

        def run_epoch(model, loader, device):
            for batch in loader:
                for k in batch:
                    if k != "meta":
                        batch[k] = batch[k].to(device=device, non_blocking=True)
                for k in batch.keys():
                    if k in ("names", "ids"):
                        continue
                    batch[k] = batch[k].cuda()
                model(batch)
    """)
    assert found.host_keys == frozenset({"meta", "names", "ids"})
    assert ModuleFacts.from_json(found.to_json()).host_keys == found.host_keys
    assert facts("def f(batch):\n    for k in batch:\n        if k != 'meta':\n            print(k)\n").host_keys == frozenset()
