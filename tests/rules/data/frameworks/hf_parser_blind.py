"""Configured on the command line through HfArgumentParser: the file cannot see the settings.

Expected rule codes (--select ALL): GP106 GP201 GP301 GP302 GP303
(GP106/GP201/GP301/GP303: the Trainer's slow defaults, reported without a fix: a run must pass
--logging_nan_inf_filter False, --dataloader_num_workers, --bf16, --torch_compile)
"""
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

parser = HfArgumentParser(TrainingArguments)
(training_args,) = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("gpt2")
Trainer(model=model, args=training_args, train_dataset=train_dataset).train()
