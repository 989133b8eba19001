"""Configured on the command line through HfArgumentParser: the file cannot see the settings."""
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

parser = HfArgumentParser(TrainingArguments)
(training_args,) = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("gpt2")
Trainer(model=model, args=training_args, train_dataset=train_dataset).train()
