# Held-out shape of the Hugging Face "Fine-Tune Whisper" blog script (Apache-2.0): condensed and
# rewritten here, not the original text. Seq2SeqTrainingArguments built directly with fp16.
from dataclasses import dataclass

import torch
from datasets import Audio, load_dataset
from transformers import (
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    WhisperForConditionalGeneration,
    WhisperProcessor,
)

processor = WhisperProcessor.from_pretrained("openai/whisper-small", language="Hindi", task="transcribe")
common_voice = load_dataset("mozilla-foundation/common_voice_11_0", "hi", split="train")
common_voice = common_voice.cast_column("audio", Audio(sampling_rate=16000))


@dataclass
class DataCollatorSpeechSeq2SeqWithPadding:
    processor: object

    def __call__(self, features):
        inputs = [{"input_features": f["input_features"]} for f in features]
        batch = self.processor.feature_extractor.pad(inputs, return_tensors="pt")
        labels = self.processor.tokenizer.pad([{"input_ids": f["labels"]} for f in features], return_tensors="pt")
        batch["labels"] = labels["input_ids"].masked_fill(labels.attention_mask.ne(1), -100)
        return batch


model = WhisperForConditionalGeneration.from_pretrained("openai/whisper-small")
training_args = Seq2SeqTrainingArguments(
    output_dir="./whisper-small-hi",
    per_device_train_batch_size=16,
    gradient_accumulation_steps=1,
    learning_rate=1e-5,
    warmup_steps=500,
    max_steps=4000,
    gradient_checkpointing=True,
    fp16=True,
    eval_strategy="steps",
    per_device_eval_batch_size=8,
    predict_with_generate=True,
    generation_max_length=225,
    save_steps=1000,
    eval_steps=1000,
    logging_steps=25,
    report_to=["tensorboard"],
    load_best_model_at_end=True,
    metric_for_best_model="wer",
    greater_is_better=False,
)
trainer = Seq2SeqTrainer(
    args=training_args,
    model=model,
    train_dataset=common_voice,
    data_collator=DataCollatorSpeechSeq2SeqWithPadding(processor=processor),
    processing_class=processor.feature_extractor,
)
trainer.train()
torch.cuda.empty_cache()
