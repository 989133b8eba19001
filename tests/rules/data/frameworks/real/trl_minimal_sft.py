# Held-out shape of huggingface/trl examples/scripts/minimal/sft.py
# (267c96ee5e9ff8c19d1f0ceaa8fc0236bf28b7e0, Apache-2.0): condensed and rewritten here, not the
# original text. SFTConfig parsed by HfArgumentParser at module level.
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling, HfArgumentParser
from trl import SFTConfig, SFTTrainer

if __name__ == "__main__":
    parser = HfArgumentParser(SFTConfig)
    args = parser.parse_args_into_dataclasses()[0]
    tokenizer = AutoTokenizer.from_pretrained("EleutherAI/pythia-160m")
    tokenizer.add_special_tokens({"pad_token": "[PAD]"})
    model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-160m")
    raw = load_dataset("trl-internal-testing/descriptiveness-sentiment-trl-style", split="descriptiveness")
    default_collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=False)

    def data_collator(x):
        batch = default_collator(x)
        batch["input_ids"].masked_fill_(~batch["attention_mask"].bool(), 0)
        return batch

    trainer = SFTTrainer(model=model, args=args, train_dataset=raw, processing_class=tokenizer,
                         data_collator=data_collator)
    trainer.train()
    print(trainer.evaluate())
