# Held-out shape of tatsu-lab/stanford_alpaca train.py (Apache-2.0): condensed and rewritten here,
# not the original text. A @dataclass TrainingArguments subclass parsed by HfArgumentParser.
from dataclasses import dataclass, field
from typing import Optional

import torch
import transformers
from transformers import Trainer


@dataclass
class ModelArguments:
    model_name_or_path: Optional[str] = field(default="facebook/opt-125m")


@dataclass
class TrainingArguments(transformers.TrainingArguments):
    cache_dir: Optional[str] = field(default=None)
    optim: str = field(default="adamw_torch")
    model_max_length: int = field(default=512)


class SupervisedDataset(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.ids = [torch.ones(8, dtype=torch.long) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return dict(input_ids=self.ids[i], labels=self.ids[i])


def train():
    parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    model = transformers.AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,
                                                              cache_dir=training_args.cache_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_args.model_name_or_path, use_fast=False)
    trainer = Trainer(model=model, processing_class=tokenizer, args=training_args,
                      train_dataset=SupervisedDataset(64))
    trainer.train()
    trainer.save_state()


if __name__ == "__main__":
    train()
