class TrainLogger:
    def __init__(self, writer):
        self.writer = writer
        self.total = 0.0
        self.step = 0

    def log_losses(self, loss):
        self.total = self.total + loss.detach()
        self.step += 1
        self.writer.add_scalar("loss/avg", (self.total / self.step).item(), self.step)


class EvalLogger:
    def __init__(self):
        self.rows = []

    def log_losses(self, loss, prefix="eval"):
        self.rows.append((prefix, loss))
