"""When to log and evaluate: the project's own schedule object."""


class Every:
    def __init__(self, log_freq, eval_freq):
        self.log_freq = log_freq
        self.eval_freq = eval_freq

    def should_log(self, step):
        return step == 1 or step % self.log_freq == 0

    def should_evaluate(self, step):
        if self.eval_freq <= 0:
            return False
        return step % self.eval_freq == 0
