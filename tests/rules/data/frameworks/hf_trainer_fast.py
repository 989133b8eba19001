"""The same fine-tune with the fast settings: bf16, TF32, compile, worker processes, fused AdamW.

Expected rule codes (--select ALL): none
"""
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n: int = 256) -> None:
        self.ids = torch.randint(0, 1000, (n, 32))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=128)
args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=16,
    num_train_epochs=1,
    bf16=True,
    tf32=True,
    torch_compile=True,
    dataloader_num_workers=4,
    dataloader_persistent_workers=True,
    optim="adamw_torch_fused",
    logging_nan_inf_filter=False,
    report_to=[],
)
trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Pairs())
trainer.train()
