# Held-out shape of a public LLM fine-tune (get_fine_tuning_trainer_args returning TrainingArguments,
# a BitsAndBytes 4-bit model; MIT): condensed and rewritten here, not the original text.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, Trainer, TrainingArguments
from transformers.training_args import OptimizerNames


def get_fine_tuning_trainer_args(output_path):
    return TrainingArguments(
        output_dir=output_path + "training/",
        logging_dir=output_path + "logs/",
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        eval_strategy="steps",
        num_train_epochs=1,
        save_steps=200,
        eval_steps=200,
        logging_steps=20,
        learning_rate=2e-4,
        optim=OptimizerNames.PAGED_ADAMW_8BIT,
        gradient_checkpointing=True,
        fp16=True,
    )


def load_model(name):
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
    return AutoModelForCausalLM.from_pretrained(name, quantization_config=bnb, token=os.getenv("HF_TOKEN"))


def get_trainer(model, train_ds, eval_ds, output_path):
    return Trainer(model=model, args=get_fine_tuning_trainer_args(output_path),
                   train_dataset=train_ds, eval_dataset=eval_ds)


if __name__ == "__main__":
    tok = AutoTokenizer.from_pretrained("mistralai/Mistral-7B-v0.1")
    model = load_model("mistralai/Mistral-7B-v0.1")
    trainer = get_trainer(model, None, None, "out/")
    trainer.train()
