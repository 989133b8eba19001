# Held-out shape of public GRPO scripts that forward an argparse namespace with **vars(args)
# (MIT): condensed and rewritten here, not the original text.
import argparse

from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer


def reward_len(completions, **kwargs):
    return [-abs(20 - len(c)) for c in completions]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--output_dir", default="Qwen2-0.5B-GRPO")
    p.add_argument("--learning_rate", type=float, default=1e-6)
    p.add_argument("--per_device_train_batch_size", type=int, default=8)
    args = p.parse_args()
    dataset = load_dataset("trl-lib/tldr", split="train")
    training_args = GRPOConfig(**vars(args), logging_steps=10)
    trainer = GRPOTrainer(model="Qwen/Qwen2-0.5B-Instruct", reward_funcs=reward_len, args=training_args,
                          train_dataset=dataset)
    trainer.train()


if __name__ == "__main__":
    main()
