# Held-out shape of public DPO fine-tunes built on TRL's DPOConfig (Apache-2.0): condensed and
# rewritten here, not the original text. DPOConfig built in main() with a few settings.
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, DPOTrainer


def main() -> None:
    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2-0.5B-Instruct")
    tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen2-0.5B-Instruct")
    train_dataset = load_dataset("trl-lib/ultrafeedback_binarized", split="train")
    training_args = DPOConfig(output_dir="Qwen2-0.5B-DPO", logging_steps=10, per_device_train_batch_size=8,
                              gradient_accumulation_steps=2, learning_rate=5e-7, beta=0.1)
    trainer = DPOTrainer(model=model, args=training_args, processing_class=tokenizer, train_dataset=train_dataset)
    trainer.train()


if __name__ == "__main__":
    main()
