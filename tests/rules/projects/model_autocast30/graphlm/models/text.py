import torch
from transformers import AutoModelForCausalLM


class TextLM(torch.nn.Module):
    def __init__(self, args):
        super().__init__()
        self.lm = AutoModelForCausalLM.from_pretrained(args.llm_path, torch_dtype=torch.float16)

    def forward(self, samples):
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            return self.lm(input_ids=samples["input_ids"], labels=samples["labels"]).loss
