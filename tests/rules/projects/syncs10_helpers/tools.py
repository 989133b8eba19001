"""Project helpers: a reading lambda, an optimizer wrapper whose __call__ is a whole step, a stats
helper built on the lambda, a TensorBoard logger that reads tensors it is handed, a metric."""
import torch

to_np = lambda x: x.detach().cpu().numpy()


class Optimizer:
    def __init__(self, name, parameters, lr, clip=100.0):
        self._name = name
        self._clip = clip
        self._opt = torch.optim.Adam(parameters, lr=lr)

    def __call__(self, loss, params):
        self._opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, self._clip)
        self._opt.step()
        return {f"{self._name}_grad_norm": norm}


def tensorstats(tensor, prefix):
    return {f"{prefix}_mean": to_np(torch.mean(tensor)), f"{prefix}_max": to_np(torch.max(tensor))}


class TensorboardLogger:
    def __init__(self, writer):
        self.writer = writer
        self.step = 0

    def set_step(self, step=None):
        self.step = step if step is not None else self.step + 1

    def update(self, head="scalar", step=None, **kwargs):
        for k, v in kwargs.items():
            if v is None:
                continue
            if isinstance(v, torch.Tensor):
                v = v.item()
            self.writer.add_scalar(head + "/" + k, v, self.step if step is None else step)


def batch_accuracy(output, target):
    correct = torch.sum(output.argmax(1) == target).item()
    return correct, target.numel()


class AccuracyMetric:
    def __init__(self):
        self.correct = 0
        self.total = 0

    def update(self, preds, labels):
        def worker(self, pred, label):
            correct, total = batch_accuracy(pred, label)
            self.correct += correct
            self.total += total

        if isinstance(preds, torch.Tensor):
            worker(self, preds, labels)
        else:
            for p, lab in zip(preds, labels):
                worker(self, p, lab)

    def get(self):
        return self.correct / max(self.total, 1)
