# Held-out shape of the Hugging Face course / notebooks-turned-scripts that write
# `transformers.TrainingArguments(...)` through the module (Apache-2.0): condensed and rewritten
# here, not the original text.
import evaluate
import numpy as np
import transformers
from datasets import load_dataset

checkpoint = "bert-base-uncased"
raw = load_dataset("glue", "mrpc")
tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
tokenized = raw.map(lambda e: tokenizer(e["sentence1"], e["sentence2"], truncation=True), batched=True)
collator = transformers.DataCollatorWithPadding(tokenizer=tokenizer)
model = transformers.AutoModelForSequenceClassification.from_pretrained(checkpoint, num_labels=2)
metric = evaluate.load("glue", "mrpc")


def compute_metrics(eval_preds):
    logits, labels = eval_preds
    return metric.compute(predictions=np.argmax(logits, axis=-1), references=labels)


args = transformers.TrainingArguments("test-trainer", eval_strategy="epoch", fp16=True,
                                      dataloader_num_workers=4)
trainer = transformers.Trainer(model, args, train_dataset=tokenized["train"],
                               eval_dataset=tokenized["validation"], data_collator=collator,
                               processing_class=tokenizer, compute_metrics=compute_metrics)
trainer.train()
