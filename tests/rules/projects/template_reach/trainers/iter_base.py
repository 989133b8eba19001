"""An iteration-based trainer: ``while`` over ``next(it)``; each pass runs ``self.run_iter(batch)``,
which hands the batch to the subclass's ``train_step``."""


class IterTrainer:
    def __init__(self, data, max_iters, log_every=50):
        self.data = data
        self.max_iters = max_iters
        self.log_every = log_every
        self.iteration = 0

    def fit(self):
        it = iter(self.data)
        while self.iteration < self.max_iters:
            batch = next(it)
            self.run_iter(batch)
            self.iteration += 1

    def run_iter(self, batch):
        stats = self.train_step(batch)
        if self.iteration % self.log_every == 0:
            self.log(stats)

    def log(self, stats):
        print(stats)

    def train_step(self, batch):
        raise NotImplementedError
