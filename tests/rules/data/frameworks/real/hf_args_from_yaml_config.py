# Held-out shape of a public SFT fine-tune whose values come from a YAML config dict
# (trainer_cfg = load_config()[...]; bf16 chosen at run time; MIT): condensed and rewritten here,
# not the original text. The keys the call passes are visible; only their values come from the file.
import datetime

import torch
import yaml
from transformers import TrainingArguments
from trl import SFTTrainer

run_name = f"finetune-{datetime.datetime.now().strftime('%Y%m%d-%H%M')}"


def load_config(path="config.yaml"):
    with open(path) as f:
        return yaml.safe_load(f)


def get_trainer(model, tokenizer, dataset):
    trainer_cfg = load_config()["fine_tune"]["training"]
    bf16_supported = torch.cuda.is_bf16_supported()
    training_args = TrainingArguments(
        output_dir=trainer_cfg["output_dir"],
        run_name=run_name,
        num_train_epochs=int(trainer_cfg["num_train_epochs"]),
        learning_rate=float(trainer_cfg["learning_rate"]),
        per_device_train_batch_size=int(trainer_cfg["batch_size"]),
        gradient_accumulation_steps=int(trainer_cfg["grad_accum"]),
        logging_steps=int(trainer_cfg["logging_steps"]),
        fp16=not bf16_supported,
        bf16=bf16_supported,
        report_to="none",
    )
    return SFTTrainer(model=model, processing_class=tokenizer, train_dataset=dataset, args=training_args)


if __name__ == "__main__":
    get_trainer("gpt2", None, None).train()
