import torch


class Updater:
    """One call of update() is one optimizer step over the micro-batches it is given."""

    def __init__(self, model, optimizer, max_norm=1.0, device="cuda"):
        self.model = model.to(device)
        self.optimizer = optimizer
        self.max_norm = max_norm
        self.device = device
        self.skipped = 0

    def update(self, micro_batches):
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for x, y in micro_batches:
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(self.model(x), y) / len(micro_batches)
            loss.backward()
            total += loss.detach()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        if torch.isinf(norm) or torch.isnan(norm):
            self.skipped += 1
            return None
        self.optimizer.step()
        return {"loss": total, "grad_norm": norm}

    def lr(self):
        return self.optimizer.param_groups[0]["lr"]
