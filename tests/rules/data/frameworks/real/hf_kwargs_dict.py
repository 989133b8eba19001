# Held-out shape of public training scripts that collect TrainingArguments keywords in a dict
# before the call (sweep launchers; MIT): condensed and rewritten here, not the original text.
import argparse

from datasets import load_dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments


def build_args(out_dir: str, lr: float, batch_size: int) -> TrainingArguments:
    kwargs = dict(
        output_dir=out_dir,
        learning_rate=lr,
        per_device_train_batch_size=batch_size,
        num_train_epochs=2,
        save_strategy="no",
        report_to=[],
    )
    kwargs["dataloader_num_workers"] = 2
    return TrainingArguments(**kwargs)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--bs", type=int, default=32)
    a = p.parse_args()
    tok = AutoTokenizer.from_pretrained("distilbert-base-uncased")
    ds = load_dataset("imdb").map(lambda e: tok(e["text"], truncation=True), batched=True)
    model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased", num_labels=2)
    trainer = Trainer(model=model, args=build_args("out", a.lr, a.bs), train_dataset=ds["train"],
                      processing_class=tok)
    trainer.train()


if __name__ == "__main__":
    main()
