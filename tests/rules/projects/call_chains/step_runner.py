"""A runner that is handed its batch source and its loss by the script that builds it."""


class StepRunner:
    def __init__(self, model, optimizer, fetch, loss_fn, on_end=None):
        self.model, self.optimizer = model, optimizer
        self.fetch = fetch
        self.loss_fn = loss_fn
        self.on_end = on_end

    def run(self, steps):
        for _ in range(steps):
            inputs, targets = self.fetch()
            loss = self.loss_fn(self.model(inputs), targets)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        if self.on_end is not None:
            self.on_end(self.model)
