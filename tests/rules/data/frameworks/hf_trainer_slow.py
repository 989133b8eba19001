"""Fine-tune a small BERT classifier with the Hugging Face Trainer, on every slow default.

    torchrun --nproc_per_node 2 hf_trainer_slow.py

Expected rule codes (--select ALL): GP106 x2, GP201, GP301, GP302, GP303, GP305, GP505
"""
import torch
from torch import nn
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n: int = 256) -> None:
        self.ids = torch.randint(0, 1000, (n, 32))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=128)
        self.bert = BertForSequenceClassification(config)

    def forward(self, input_ids, labels=None):
        return self.bert(input_ids=input_ids, labels=labels)


def main() -> None:
    args = TrainingArguments(
        output_dir="out",
        per_device_train_batch_size=16,
        num_train_epochs=1,
        logging_steps=1,
        report_to=[],
    )
    trainer = Trainer(model=Classifier(), args=args, train_dataset=Pairs())
    trainer.train()


if __name__ == "__main__":
    main()
