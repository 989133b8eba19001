import torch
import torch.nn.functional as F

from .base import RecipeCallback, RecipeTrainer


class DistillTrainer(RecipeTrainer):
    def __init__(self, teacher, temperature=2.0, **kwargs):
        super().__init__(**kwargs)
        self.teacher = teacher
        self.temperature = temperature

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        with torch.no_grad():
            teacher_logits = self.teacher(**inputs).logits
        kl = self._kl(outputs.logits, teacher_logits)
        loss = outputs.loss + kl
        if self.state.global_step % self.args.logging_steps == 0:
            self.log_scalar("kl", kl.item())  # once per logging step: fine
        return (loss, outputs) if return_outputs else loss

    def _kl(self, student, teacher):
        t = self.temperature
        kl = F.kl_div(F.log_softmax(student / t, -1), F.softmax(teacher / t, -1), reduction="batchmean")
        if torch.isnan(kl):
            raise FloatingPointError("kl is nan")
        return kl * t * t

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        loss, logits, labels = super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        self.eval_lengths.extend((labels != -100).sum(-1).tolist())
        return loss, logits, labels


class TemperatureProbe(RecipeCallback):
    def on_step_end(self, args, state, control, model=None, **kwargs):
        state.log_history.append({"lm_head_norm": model.lm_head.weight.norm().item()})

    def on_evaluate(self, args, state, control, model=None, metrics=None, **kwargs):
        metrics["lm_head_norm"] = model.lm_head.weight.norm().item()  # once per evaluation
