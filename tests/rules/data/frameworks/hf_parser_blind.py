"""Configured on the command line through HfArgumentParser: the file cannot see the settings.

Expected rule codes (--select ALL): GP302 (without a fix: --tf32 may be given)
"""
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

parser = HfArgumentParser(TrainingArguments)
(training_args,) = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("gpt2")
Trainer(model=model, args=training_args, train_dataset=train_dataset).train()
