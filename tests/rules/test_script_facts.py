"""The program-level script facts other rules ask for (rules/analysis/facts/script_facts.py and program.py):
framework-managed precision and placement, CPU-only programs, the model's chosen dtype, scripts
versus library modules, and where fixes add imports."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpuperf_rewrite.lint.engine import fix_text
from gpuperf_rewrite.rules.analysis.facts import program as program
from gpuperf_rewrite.rules.analysis.facts import script_facts as sf
from gpuperf_rewrite.rules._api import AddImport
from gpuperf_rewrite.rules.analysis.syntax.context import RuleContext
from gpuperf_rewrite.rules.analysis.fixes.edits import add_imports, torch_alias


def ctx_of(source: str) -> RuleContext:
    source = textwrap.dedent(source)
    return RuleContext(cst.parse_module(source), source)


# ---- framework_manages_precision / framework_places_batches ------------------------------------

@pytest.mark.parametrize("source", [
    "from accelerate import Accelerator\nacc = Accelerator(mixed_precision='bf16')\n",
    "import accelerate\nacc = accelerate.Accelerator()\n",  # precision from `accelerate launch`
    "import lightning as L\nL.Trainer(precision='bf16-mixed').fit(m)\n",
    "from pytorch_lightning import Trainer\nTrainer(precision=16).fit(m)\n",
    "from lightning.fabric import Fabric as F\nfabric = F(precision='bf16-mixed')\n",
    "from transformers import TrainingArguments\nargs = TrainingArguments('o', bf16=True)\n",
    "from transformers import Seq2SeqTrainer\nSeq2SeqTrainer(model=m).train()\n",
    "import deepspeed\nengine, opt, _, _ = deepspeed.initialize(model=m, config=cfg)\n",
    "import lightning.pytorch as pl\nclass M(pl.LightningModule):\n    pass\n",
    "from apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O1')\n",
])
def test_frameworks_that_own_precision(source):
    assert sf.framework_manages_precision(ctx_of(source))


@pytest.mark.parametrize("source", [
    "import torch\nmodel = torch.nn.Linear(2, 2)\n",
    "class Accelerator:\n    pass\nacc = Accelerator()\n",  # the user's own class
    "from transformers import AutoTokenizer\ntok = AutoTokenizer.from_pretrained('gpt2')\n",
])
def test_no_framework(source):
    ctx = ctx_of(source)
    assert not sf.framework_manages_precision(ctx)
    assert not sf.framework_places_batches(ctx)
    assert not sf.framework_trains(ctx)


def _name_nodes(ctx: RuleContext, text: str) -> list[cst.CSTNode]:
    return [n for n in ctx.nodes(cst.Name, cst.Subscript) if ctx.code_for(n) == text]


def test_accelerate_prepared_loader_batches_are_placed():
    ctx = ctx_of("""
        from accelerate import Accelerator
        accelerator = Accelerator()
        model, opt, train_dl, eval_dl = accelerator.prepare(model, opt, train_dl, eval_dl)
        raw_dl = make_loader()
        def train():
            for step, batch in enumerate(train_dl):
                x, y = batch
                out = model(batch["input_ids"].to(dev), x.to(dev))
            for raw in raw_dl:
                raw.to(dev)
    """)
    assert sf.framework_places_batches(ctx)
    assert {"model", "opt", "train_dl", "eval_dl"} <= sf.framework_prepared_names(ctx)
    for text in ("batch", "x", 'batch["input_ids"]'):
        assert any(sf.placed_by_framework(ctx, n) for n in _name_nodes(ctx, text)), text
    assert not any(sf.placed_by_framework(ctx, n) for n in _name_nodes(ctx, "raw"))


def test_accelerator_without_device_placement_places_nothing():
    ctx = ctx_of("""
        from accelerate import Accelerator
        accelerator = Accelerator(device_placement=False)
        dl = accelerator.prepare(dl)
        for batch in dl:
            batch.to(accelerator.device)
    """)
    assert sf.framework_manages_precision(ctx)
    assert not any(sf.placed_by_framework(ctx, n) for n in _name_nodes(ctx, "batch"))


def test_lightning_and_hf_step_parameters_are_placed():
    ctx = ctx_of("""
        import lightning as L
        from transformers import Trainer
        class Lit(L.LightningModule):
            def training_step(self, batch, batch_idx):
                x, y = batch
                return self(x.to(self.device))
            def helper(self, batch):
                return batch.to(self.device)
        class MyTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False):
                return model(**inputs).loss
    """)
    assert sf.framework_trains(ctx) and sf.framework_places_batches(ctx)
    xs = _name_nodes(ctx, "x")
    assert xs and all(sf.placed_by_framework(ctx, n) for n in xs)
    helper_batch = [n for n in _name_nodes(ctx, "batch")
                    if ctx.enclosing(n, cst.FunctionDef).name.value == "helper"]
    assert helper_batch and not any(sf.placed_by_framework(ctx, n) for n in helper_batch)
    assert any(sf.placed_by_framework(ctx, n) for n in _name_nodes(ctx, "inputs"))


# ---- cpu_only -----------------------------------------------------------------------------------

@pytest.mark.parametrize("source", [
    """
    import torch
    model = torch.nn.Linear(1, 1).double()
    opt = torch.optim.LBFGS(model.parameters())
    for i in range(3):
        opt.step(closure)
    """,
    """
    import torch
    device = torch.device("cpu")
    x = torch.zeros(3).to(device, torch.float64)
    if __name__ == "__main__":
        main()
    """,
    """
    import torch
    '''Runs on a GPU if you have one.'''  # docstrings and comments are prose
    net = torch.nn.Linear(2, 2)
    for x in loader:
        net(x.to(x.device)).sum().backward()
    """,
])
def test_cpu_only_programs(source):
    assert program.cpu_only(ctx_of(source))


@pytest.mark.parametrize("source", [
    "import torch\nmodel = torch.nn.Linear(1, 1).cuda()\nfor x in l:\n    model(x).sum().backward()\n",
    "import torch\nngpu = 1\nfor x in l:\n    m(x).sum().backward()\n",
    "import torch\nfor x in l:\n    m(x.to(args.device)).sum().backward()\n",
    "import torch\nfor x in l:\n    m(x.to(self.device)).sum().backward()\n",
    "import torch\ndev = 'mps'\nfor x in l:\n    m(x.to(dev)).sum().backward()\n",
    "import torch\nfor x in l:\n    m(x.to(f'cuda:{rank}')).sum().backward()\n",
    "import torch\ndist.init_process_group('nccl')\nfor x in l:\n    m(x).sum().backward()\n",
    # a library module: its caller may hand it CUDA models and batches
    "import torch\ndef train(model, loader, opt):\n    for x in loader:\n        model(x).sum().backward()\n",
    "from accelerate import Accelerator\nimport torch\nfor x in l:\n    m(x).sum().backward()\n",
])
def test_programs_that_may_reach_a_gpu(source):
    assert not program.cpu_only(ctx_of(source))


# ---- model_precision -----------------------------------------------------------------------------

@pytest.mark.parametrize("source,dtype", [
    ("import torch\nmodel = Net().cuda().half()\nopt = torch.optim.SGD(model.parameters())\n", "float16"),
    ("import torch\nmodel = Net()\nmodel.to(device, dtype=torch.bfloat16)\n", "bfloat16"),
    ("import torch\nmodel = Net().to(torch.bfloat16)\n", "bfloat16"),
    ("import torch\nptdtype = torch.bfloat16\nmodel = Net()\nmodel = model.to(ptdtype)\n", "bfloat16"),
    ("import torch\nclass T:\n    def __init__(self, m):\n        self.model = m.double()\n"
     "        self.opt = torch.optim.SGD(self.model.parameters())\n", "float64"),
    ("import torch\ntorch.set_default_dtype(torch.float64)\n", "float64"),
    ("import torch\nfrom transformers import AutoModel\nm = AutoModel.from_pretrained('x', torch_dtype=torch.float16)\n",
     "float16"),
    ("import torch\nlayer = torch.nn.Linear(4, 4, dtype=torch.bfloat16)\n", "bfloat16"),
])
def test_model_precision(source, dtype):
    assert program.model_precision(ctx_of(source)) == dtype


@pytest.mark.parametrize("source", [
    "import torch\nmodel = Net().cuda()\nx = batch.half()\n",  # data, not the model
    "import torch\ny = torch.nn.functional.softmax(x, -1, dtype=torch.float64)\n",
    "import torch\nmodel = Net().to(device)\n",
])
def test_float32_models(source):
    assert program.model_precision(ctx_of(source)) is None


# ---- is_script --------------------------------------------------------------------------------

@pytest.mark.parametrize("source,expected", [
    ("import torch\nif __name__ == '__main__':\n    main()\n", True),
    ("import torch\nfor x in loader:\n    model(x).sum().backward()\n", True),
    ("import torch\ndef train(m, loader, opt):\n    for x in loader:\n        m(x).sum().backward()\n"
     "        opt.step()\ntrain(m, loader, opt)\n", True),
    ("import argparse\nargs = parser.parse_args()\n", True),
    ("import torch\ndef train(m, loader, opt):\n    for x in loader:\n        m(x).sum().backward()\n"
     "        opt.step()\n", False),
    ("import torch\nclass Net(torch.nn.Module):\n    pass\nlogger = get_logger()\n", False),
])
def test_is_script(source, expected):
    assert program.is_script(ctx_of(source)) is expected


# ---- imports ------------------------------------------------------------------------------------

def test_torch_alias_sees_any_module_level_import():
    assert torch_alias(ctx_of("import torch as th\n")) == "th"
    assert torch_alias(ctx_of("import torch.nn\n")) == "torch"
    assert torch_alias(ctx_of("try:\n    import torch\nexcept ImportError:\n    pass\n")) == "torch"
    assert torch_alias(ctx_of("from torch import nn\n")) is None
    assert torch_alias(ctx_of("def f():\n    import torch\n")) is None


def test_add_imports_goes_below_environment_lines_and_never_twice():
    source = textwrap.dedent('''\
        """Doc."""
        import os
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        from torch import nn
        x = 1
    ''')
    out = add_imports(cst.parse_module(source), [AddImport("torch"), AddImport("torch")]).code
    lines = out.splitlines()
    assert lines.count("import torch") == 1
    assert lines.index("import torch") > lines.index("from torch import nn")
    assert lines.index("import torch") > 2  # below os.environ
    # Already imported, under any spelling of the same binding: nothing added.
    for existing in ("import torch\n", "try:\n    import torch\nexcept ImportError:\n    torch = None\n"):
        module = cst.parse_module(existing + "x = 1\n")
        assert add_imports(module, [AddImport("torch")]).code == module.code
    module = cst.parse_module("from torch.utils.checkpoint import checkpoint\n")
    assert add_imports(module, [AddImport("torch.utils.checkpoint", "checkpoint")]).code == module.code


def test_fixes_reuse_an_existing_torch_alias_and_keep_environment_lines_first():
    source = textwrap.dedent('''\
        import os
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        import torch as th
        from torch import nn, optim
        device = th.device("cuda")
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.LazyLinear(2)).to(device)
        opt = optim.Adam(model.parameters())
        for x, y in loader:
            out = model(x.to(device))
            loss = nn.functional.cross_entropy(out, y.to(device))
            loss.backward()
            opt.step()
    ''')
    fixed = fix_text(source, ["GP301", "GP302", "GP303", "GP304", "GP305"])
    lines = fixed.splitlines()
    assert "import torch" not in lines  # th is torch
    assert lines[:3] == source.splitlines()[:3]
    assert 'th.set_float32_matmul_precision("high")' in lines
    assert "th.backends.cudnn.benchmark = True" in lines
    assert "    with th.autocast(device_type=device.type, dtype=th.bfloat16):" in lines
    compile(fixed, "fixed", "exec")


@pytest.mark.parametrize("header", [
    "import lightning as L\nfabric = L.Fabric(precision='bf16-mixed')\n",
    "from apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O1')\n",
])
def test_gp301_leaves_framework_precision_alone(header):
    body = textwrap.dedent("""\
        import torch
        device = torch.device("cuda")
        model = torch.nn.Linear(4, 1).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
    """)
    from gpuperf_rewrite.lint.engine import RuleSet, check_source

    def codes(src: str) -> list[str]:
        return [d.code for d in check_source(src.encode(), "t.py", RuleSet(("GP301",))).diagnostics]
    assert codes(body) == ["GP301"]
    assert codes(header + body) == []


def test_module_settings_go_before_a_top_level_training_loop():
    """A tutorial imports more after its training loop: the setting must still come first."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn
        model = nn.Linear(4, 4).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x.cuda()).sum().backward()
            opt.step()
        import matplotlib.pyplot as plt
        plt.plot(losses)
    ''')
    lines = fix_text(source, ["GP302"]).splitlines()
    assert lines.index('torch.set_float32_matmul_precision("high")') < lines.index("for x in loader:")


def _added(source: str, *imports: AddImport) -> str:
    out = add_imports(cst.parse_module(textwrap.dedent(source)), list(imports)).code
    cst.parse_module(out)
    return out


def test_a_standard_library_import_goes_after_the_last_one_not_after_local_imports():
    out = _added('''\
        """Doc."""
        import argparse

        import torch
        from models import build_model

        x = 1
    ''', AddImport("os"))
    assert out.startswith('"""Doc."""\nimport argparse\nimport os\n\nimport torch\nfrom models import build_model\n')


def test_a_standard_library_import_goes_first_when_there_is_none_keeping_future_docstring_and_comments():
    out = _added('''\
        """Doc."""
        from __future__ import annotations

        # third party
        import torch
        from models import build_model
    ''', AddImport("contextlib"))
    assert out == ('"""Doc."""\nfrom __future__ import annotations\n\nimport contextlib\n\n# third party\n'
                   'import torch\nfrom models import build_model\n')
    out = _added("import torch\nx = 1\n", AddImport("os"))
    assert out == "import os\n\nimport torch\nx = 1\n"


def test_a_third_party_import_goes_after_the_last_third_party_one_before_the_projects_own():
    out = _added('''\
        import os

        import numpy as np
        from models import build_model
        from .utils import helper

        x = 1
    ''', AddImport("torch"))
    assert out == ("import os\n\nimport numpy as np\nimport torch\n\nfrom models import build_model\n"
                   "from .utils import helper\n\nx = 1\n")
    # No third-party import yet: after the standard library, a section of its own.
    out = _added("import argparse\nfrom models import build_model\n\nx = 1\n", AddImport("torch"))
    assert out == "import argparse\n\nimport torch\n\nfrom models import build_model\n\nx = 1\n"


def test_imports_of_two_sections_each_go_to_their_own_and_below_environment_lines():
    out = _added('''\
        import os
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        from models import build_model
        x = 1
    ''', AddImport("torch"), AddImport("contextlib"))
    lines = out.splitlines()
    assert lines[:2] == ["import os", "import contextlib"]
    env = lines.index('os.environ["CUDA_VISIBLE_DEVICES"] = "0"')
    assert env == 2 and lines.index("import torch") > env  # torch still imported after the variable
    assert lines.index("import torch") < lines.index("from models import build_model")
    # A module without imports: after its docstring, stdlib first.
    assert _added('"""Doc."""\nx = 1\n', AddImport("torch"), AddImport("os")) == \
        '"""Doc."""\nimport os\n\nimport torch\n\nx = 1\n'
