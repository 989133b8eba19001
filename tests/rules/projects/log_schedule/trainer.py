import torch

from schedule import Every


class Trainer:
    def __init__(self, model, optimizer, loader, cfg):
        self.model, self.optimizer, self.loader = model, optimizer, loader
        self.schedule = Every(cfg.log_freq, cfg.eval_freq)
        self.step = 0

    def train_step(self, tokens, labels):
        tokens = tokens.cuda(non_blocking=True)
        labels = labels.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.model(tokens, labels)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        log_now = self.schedule.should_log(self.step)
        if not log_now:
            return
        print({"loss": loss.item(), "grad_norm": grad_norm.item()})

    def fit(self):
        for tokens, labels in self.loader:
            self.step += 1
            self.train_step(tokens, labels)
            if self.schedule.should_evaluate(self.step):
                with torch.no_grad():
                    print("eval", self.model(tokens.cuda(), labels.cuda()).item())
