"""The project's trainer and callback bases: the framework runs their subclasses' hooks."""
from transformers import Seq2SeqTrainer, TrainerCallback


class RecipeTrainer(Seq2SeqTrainer):
    def log_scalar(self, name, value):
        self.state.log_history.append({name: value, "step": self.state.global_step})


class RecipeCallback(TrainerCallback):
    pass
