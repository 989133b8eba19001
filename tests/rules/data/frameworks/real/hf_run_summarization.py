# Held-out shape of huggingface/transformers examples/pytorch/summarization/run_summarization.py
# (2520420bd460a1bf5518b21bfe7f4b5ecd981a81, Apache-2.0): condensed and rewritten here, not the original text.
# Seq2SeqTrainingArguments parsed from the command line; the Seq2SeqTrainer runs the loop.
import sys
from dataclasses import dataclass, field

import nltk
import numpy as np
from datasets import load_dataset
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    HfArgumentParser,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
)


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="t5-small")


@dataclass
class DataTrainingArguments:
    dataset_name: str = field(default="cnn_dailymail")
    max_source_length: int = field(default=1024)


def main():
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, Seq2SeqTrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
    raw = load_dataset(data_args.dataset_name, "3.0.0")
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_args.model_name_or_path)
    label_pad_token_id = -100
    data_collator = DataCollatorForSeq2Seq(
        tokenizer, model=model, label_pad_token_id=label_pad_token_id,
        pad_to_multiple_of=8 if training_args.fp16 else None,
    )

    def compute_metrics(eval_preds):
        preds, labels = eval_preds
        preds = np.where(preds != -100, preds, tokenizer.pad_token_id)
        decoded = tokenizer.batch_decode(preds, skip_special_tokens=True)
        return {"gen_len": np.mean([len(nltk.sent_tokenize(d)) for d in decoded])}

    trainer = Seq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=raw["train"],
        eval_dataset=raw["validation"],
        processing_class=tokenizer,
        data_collator=data_collator,
        compute_metrics=compute_metrics if training_args.predict_with_generate else None,
    )
    trainer.train()
    trainer.evaluate(max_length=128, num_beams=4, metric_key_prefix="eval")


if __name__ == "__main__":
    sys.exit(main())
