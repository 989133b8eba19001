# Held-out shape of public image-classification fine-tunes that import the Trainer under aliases
# (ViT on beans; Apache-2.0): condensed and rewritten here, not the original text.
import torch
from datasets import load_dataset
from transformers import Trainer as HFTrainer
from transformers import TrainingArguments as TA
from transformers import ViTForImageClassification, ViTImageProcessor

processor = ViTImageProcessor.from_pretrained("google/vit-base-patch16-224-in21k")
ds = load_dataset("beans")


def transform(batch):
    inputs = processor([x for x in batch["image"]], return_tensors="pt")
    inputs["labels"] = batch["labels"]
    return inputs


def collate_fn(batch):
    return {
        "pixel_values": torch.stack([x["pixel_values"] for x in batch]),
        "labels": torch.tensor([x["labels"] for x in batch]),
    }


prepared = ds.with_transform(transform)
model = ViTForImageClassification.from_pretrained("google/vit-base-patch16-224-in21k", num_labels=3)
training_args = TA(
    output_dir="./vit-base-beans",
    per_device_train_batch_size=16,
    eval_strategy="steps",
    num_train_epochs=4,
    fp16=True,
    save_steps=100,
    eval_steps=100,
    logging_steps=10,
    learning_rate=2e-4,
    save_total_limit=2,
    remove_unused_columns=False,
    load_best_model_at_end=True,
)
trainer = HFTrainer(model=model, args=training_args, data_collator=collate_fn,
                    train_dataset=prepared["train"], eval_dataset=prepared["validation"])
trainer.train()
