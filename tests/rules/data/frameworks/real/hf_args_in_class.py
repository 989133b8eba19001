# Held-out shape of a public Llama fine-tune wrapper (class Finetune with set_training_arguments,
# TRL's SFTTrainer fed transformers.TrainingArguments; MIT): condensed and rewritten here, not the
# original text.
import os

import torch
from transformers import TrainingArguments
from trl import SFTTrainer


class Finetune:
    def __init__(self, model, tokenizer, dataset) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.dataset = dataset
        self.training_args = self.set_training_arguments()

    def set_training_arguments(self, output_dir: str = "./results", epochs: int = 1):
        return TrainingArguments(
            output_dir=output_dir,
            num_train_epochs=epochs,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=1,
            optim="paged_adamw_32bit",
            save_steps=25,
            logging_steps=25,
            learning_rate=2e-4,
            weight_decay=0.001,
            fp16=False,
            bf16=False,
            max_grad_norm=0.3,
            max_steps=-1,
            warmup_ratio=0.03,
            group_by_length=True,
            lr_scheduler_type="constant",
        )

    def train(self) -> None:
        trainer = SFTTrainer(
            model=self.model,
            train_dataset=self.dataset,
            processing_class=self.tokenizer,
            args=self.training_args,
        )
        trainer.train()
        trainer.model.save_pretrained(os.path.join(self.training_args.output_dir, "final"))
        torch.cuda.empty_cache()
