# Held-out shape of a popular QLoRA fine-tune (philschmid-style "fine-tune LLMs in 2024 with TRL";
# MIT): condensed and rewritten here, not the original text. SFTConfig built directly.
import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
from trl import SFTConfig, SFTTrainer

dataset = load_dataset("json", data_files="train_dataset.json", split="train")
model_id = "codellama/CodeLlama-7b-hf"
bnb_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_use_double_quant=True, bnb_4bit_quant_type="nf4",
                                bnb_4bit_compute_dtype=torch.bfloat16)
model = AutoModelForCausalLM.from_pretrained(model_id, device_map="auto", attn_implementation="flash_attention_2",
                                             dtype=torch.bfloat16, quantization_config=bnb_config)
tokenizer = AutoTokenizer.from_pretrained(model_id)
peft_config = LoraConfig(lora_alpha=128, lora_dropout=0.05, r=256, bias="none", target_modules="all-linear",
                         task_type="CAUSAL_LM")
args = SFTConfig(
    output_dir="code-llama-7b-text-to-sql",
    num_train_epochs=3,
    per_device_train_batch_size=3,
    gradient_accumulation_steps=2,
    gradient_checkpointing=True,
    optim="adamw_torch_fused",
    logging_steps=10,
    save_strategy="epoch",
    learning_rate=2e-4,
    bf16=True,
    tf32=True,
    max_grad_norm=0.3,
    warmup_ratio=0.03,
    lr_scheduler_type="constant",
    push_to_hub=True,
    report_to="tensorboard",
)
trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, peft_config=peft_config,
                     processing_class=tokenizer)
trainer.train()
trainer.save_model()
