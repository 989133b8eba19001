import contextlib

import torch
from transformers import AutoModelForCausalLM


class GraphLM(torch.nn.Module):
    """A frozen LLM with a trained graph projector; the model picks its own precision."""

    def __init__(self, args):
        super().__init__()
        self.lm = AutoModelForCausalLM.from_pretrained(args.llm_path, torch_dtype=torch.float16)
        self.projector = torch.nn.Sequential(torch.nn.Linear(args.gnn_dim, 2048), torch.nn.Sigmoid())

    @property
    def device(self):
        return next(self.parameters()).device

    def maybe_autocast(self, dtype=torch.bfloat16):
        # no autocast on the CPU; on a GPU, autocast with the given dtype
        if self.device != torch.device("cpu"):
            return torch.autocast(device_type="cuda", dtype=dtype)
        return contextlib.nullcontext()

    def forward(self, samples):
        embeds = self.projector(samples["graph"])
        with self.maybe_autocast():
            out = self.lm(inputs_embeds=embeds, labels=samples["labels"])
        return out.loss
