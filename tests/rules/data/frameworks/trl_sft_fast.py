"""TRL's SFTConfig inherits TrainingArguments with its own defaults (bf16 unless fp16,
logging_steps=10, gradient checkpointing on).

Expected rule codes (--select ALL): none
"""
from datasets import Dataset
from trl import SFTConfig, SFTTrainer

train = Dataset.from_dict({"text": ["hello world"] * 64})
config = SFTConfig(output_dir="out", tf32=True, torch_compile=True, dataloader_num_workers=2,
                   dataloader_persistent_workers=True, optim="adamw_torch_fused",
                   logging_nan_inf_filter=False)
trainer = SFTTrainer(model="tiny-model", args=config, train_dataset=train)
trainer.train()
