from transformers import AutoModelForSeq2SeqLM, Seq2SeqTrainingArguments

from recipes.distill import DistillTrainer, TemperatureProbe


def main():
    student = AutoModelForSeq2SeqLM.from_pretrained("t5-small")
    teacher = AutoModelForSeq2SeqLM.from_pretrained("t5-base").eval()
    args = Seq2SeqTrainingArguments("out", bf16=True, tf32=True, dataloader_num_workers=4,
                                    dataloader_persistent_workers=True, torch_compile=True,
                                    logging_nan_inf_filter=False, logging_steps=50, optim="adamw_torch_fused")
    DistillTrainer(teacher=teacher, model=student, args=args, callbacks=[TemperatureProbe()]).train()


if __name__ == "__main__":
    main()
