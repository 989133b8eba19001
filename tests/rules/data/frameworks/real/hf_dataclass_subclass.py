# Held-out shape of public LLM fine-tunes that subclass TrainingArguments in a @dataclass with
# their own defaults (tatsu-lab/stanford_alpaca train.py style; Apache-2.0): condensed and
# rewritten here, not the original text. Here the subclass is built directly, not parsed.
from dataclasses import dataclass, field
from typing import Optional

import transformers
from transformers import Trainer


@dataclass
class TrainingArguments(transformers.TrainingArguments):
    cache_dir: Optional[str] = field(default=None)
    optim: str = field(default="adamw_torch")
    model_max_length: int = field(default=512)
    bf16: bool = field(default=True)


def train() -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained("facebook/opt-125m")
    tokenizer = transformers.AutoTokenizer.from_pretrained("facebook/opt-125m", model_max_length=512)
    training_args = TrainingArguments(output_dir="out", num_train_epochs=3, per_device_train_batch_size=4,
                                      gradient_accumulation_steps=8, logging_steps=1)
    trainer = Trainer(model=model, processing_class=tokenizer, args=training_args)
    trainer.train()
    trainer.save_state()


if __name__ == "__main__":
    train()
