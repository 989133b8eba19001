"""Qualified names of the torch APIs the rules recognise, in one place.

Names are matched through LibCST's qualified-name resolution, so ``from torch.utils.data import
DataLoader as DL`` and ``torch.utils.data.DataLoader`` resolve the same, while a user's own class
called ``DataLoader`` resolves to itself and never matches.
"""

# Libraries' DataLoader subclasses that hand ``num_workers``/``pin_memory``/``persistent_workers`` to
# torch's and take the dataset and batch size first; their batches are the library's own objects
# (a PyG ``Batch``, a DGL graph), collated by the library (``host_data.default_collate`` says no).
LIBRARY_LOADERS = frozenset({
    "torch_geometric.loader.DataLoader", "torch_geometric.loader.DenseDataLoader",
    "torch_geometric.loader.DataListLoader", "torch_geometric.data.DataLoader", "torch_geometric.data.DenseDataLoader",
    "torch_geometric.data.DataListLoader", "dgl.dataloading.GraphDataLoader", "monai.data.DataLoader",
})
# Other libraries' loaders that hand every argument, as given, to torch's DataLoader and yield what
# it yields (webdataset's ``WebLoader(dataset, batch_size=None, num_workers=...)``, torchdata's
# resumable ``StatefulDataLoader``): the same settings, the same defaults.
WRAPPED_LOADERS = frozenset({
    "webdataset.WebLoader", "webdataset.compat.WebLoader", "webdataset.pipeline.WebLoader",
    "torchdata.stateful_dataloader.StatefulDataLoader",
    "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
})
DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}) | LIBRARY_LOADERS | \
    WRAPPED_LOADERS
OPTIMIZERS = frozenset({"torch.optim.*"})
LR_SCHEDULERS = frozenset({"torch.optim.lr_scheduler.*", "torch.optim.swa_utils.*"})
GRAD_SCALERS = frozenset({
    "torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.amp.grad_scaler.GradScaler",
    "torch.cpu.amp.GradScaler",
})
NN_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# Containers of modules are modules too: a ``MetricsManager(nn.ModuleDict)`` whose ``forward``
# computes every metric on every call (only the forward question: not a model for other rules).
NN_CONTAINER_BASES = frozenset({"torch.nn.ModuleDict", "torch.nn.ModuleList", "torch.nn.Sequential",
                                "torch.nn.modules.container.ModuleDict", "torch.nn.modules.container.ModuleList",
                                "torch.nn.modules.container.Sequential"})
# Classes of ``torch.nn`` that are tensors, not modules (``self.gamma = nn.Parameter(...)``: its
# ``.item()`` reads a tensor that moves with the module).
NN_TENSORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.UninitializedParameter",
                        "torch.nn.Buffer", "torch.nn.parameter.Buffer", "torch.nn.UninitializedBuffer"})
# Bases of a custom autograd Function (its ``forward``/``backward`` run on every ``Fn.apply(...)``).
AUTOGRAD_FUNCTIONS = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
AUTOCAST = frozenset({
    "torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast",
    "torch.amp.autocast_mode.autocast",
})
# FSDP's mixed-precision policies: the sharded model's parameters and compute take their dtype
# (``fully_shard(m, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))``), no autocast needed.
FSDP_MIXED_PRECISION = frozenset({
    "torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.MixedPrecisionPolicy",
    "torch.distributed._composable.fsdp.MixedPrecisionPolicy",
    "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision",
})
NO_GRAD = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
    "torch.set_grad_enabled",
})

# nn.Module methods that return the module itself (or a moved or cast copy), so that
# ``Net().to(device).train()`` is still the model: the one list every "is this a model" asks.
MODULE_CHAIN = ("to", "cuda", "cpu", "train", "eval", "float", "half", "bfloat16", "double")
# Optimizers with a fused implementation (GP305).
FUSABLE = frozenset({
    "torch.optim.Adam", "torch.optim.AdamW", "torch.optim.SGD", "torch.optim.adam.Adam",
    "torch.optim.adamw.AdamW", "torch.optim.sgd.SGD",
})


# The settings a training script makes once (GP302, GP304), and that a module of the user's may make
# for it (``syntax.project``: ``TF32``/``CUDNN`` in a function's or module's ``settings``).
TF32_SETTINGS = frozenset({
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.fp32_precision",
})
SET_PRECISION = frozenset({"torch.set_float32_matmul_precision"})
CUDNN_CHOICES = frozenset({"torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic"})
DETERMINISM = frozenset({"torch.use_deterministic_algorithms"})

# Optimizer builders of installed libraries that build a torch optimizer over a model's parameters
# from a configuration: qualified name -> the position of the model argument (also ``model=``).
# What they build (fused or not) is in the configuration; the model handed to them trains.
OPTIMIZER_BUILDERS = {
    "mmcv.runner.build_optimizer": 0, "mmcv.runner.optimizer.build_optimizer": 0,
    "mmcv.runner.optimizer.builder.build_optimizer": 0, "mmengine.optim.build_optim_wrapper": 0,
    "mmengine.optim.optimizer.build_optim_wrapper": 0, "mmengine.optim.optimizer.builder.build_optim_wrapper": 0,
    "detectron2.solver.build_optimizer": 1, "detectron2.solver.build.build_optimizer": 1,
    "timm.optim.create_optimizer_v2": 0, "timm.optim.create_optimizer": 1,
    "timm.optim.optim_factory.create_optimizer_v2": 0, "timm.optim.optim_factory.create_optimizer": 1,
}


def hf_model_name(name: str) -> bool:
    """``BertPreTrainedModel``, ``BertModel``, ``BertForTokenClassification``, ``GPT2LMHeadModel``: a PyTorch
    model class of Hugging Face by its name (not ``TFBertModel``/``FlaxBertModel``, ``AutoModel``); by the
    text alone, for the glance before LibCST too."""
    last = name.rsplit(".", 1)[-1]
    return (last.endswith("Model") or "For" in last[1:]) and not last.startswith(("TF", "Flax", "Auto"))

# Methods of torch's tensors and modules that user classes define too (a ``cpu()`` override moving a
# module's buffers): ``pred.cpu()`` on a value of no known class runs torch's, never a user method
# found by its name alone. (Not ``train``/``eval``/``to``/``zero_grad``/``state_dict``: a trainer's or an
# optimizer wrapper's own API often.)
TORCH_OBJECT_METHODS = frozenset({
    "cpu", "cuda", "item", "numpy", "tolist", "float", "half", "double", "long", "int", "bool", "detach",
    "clone", "contiguous", "size", "view", "reshape", "sum", "mean", "parameters", "named_parameters", "requires_grad_",
})
