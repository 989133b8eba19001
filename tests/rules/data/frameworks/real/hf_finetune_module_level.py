# Held-out shape of gongahkia/jikai src/pretrained/finetune.py and many blog fine-tunes (MIT):
# condensed and rewritten here, not the original text. TrainingArguments at module level, every
# speed setting on its default.
import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

model_name = "gpt2"
tokenizer = AutoTokenizer.from_pretrained(model_name)
tokenizer.pad_token = tokenizer.eos_token
model = AutoModelForCausalLM.from_pretrained(model_name)
dataset = load_dataset("text", data_files={"train": "corpus.txt"})


def tokenize_function(examples):
    out = tokenizer(examples["text"], truncation=True, padding="max_length", max_length=128)
    out["labels"] = out["input_ids"].copy()
    return out


tokenized_dataset = dataset.map(tokenize_function, batched=True)["train"]

training_args = TrainingArguments(
    output_dir="./results",
    evaluation_strategy="epoch",
    per_device_train_batch_size=4,
    per_device_eval_batch_size=4,
    num_train_epochs=3,
    logging_dir="./logs",
)

trainer = Trainer(
    model=model,
    args=training_args,
    train_dataset=tokenized_dataset,
    eval_dataset=tokenized_dataset,
)
trainer.train()
model.save_pretrained("./final_model")
torch.save(model.state_dict(), "./final_model/weights.pt")
