import torch


class TrainLoop:
    """Steps a denoiser; with use_fp16 the model's fp16 weights get float32 masters and a dynamic loss scale."""

    def __init__(self, model, data, lr, use_fp16=False, loss_scale=2.0 ** 20):
        self.model = model
        self.data = data
        self.use_fp16 = use_fp16
        self.loss_scale = loss_scale if use_fp16 else 1.0
        self.master = [p.detach().float().requires_grad_() for p in model.parameters()]
        self.opt = torch.optim.AdamW(self.master, lr=lr, fused=True)

    def run_step(self, batch):
        t = torch.rand(batch.size(0), device=batch.device)
        noise = torch.randn_like(batch)
        loss = ((self.model(batch + t.view(-1, 1, 1, 1) * noise, t) - noise) ** 2).mean()
        (loss * self.loss_scale).backward()
        for master, p in zip(self.master, self.model.parameters()):
            master.grad = p.grad.float() / self.loss_scale
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        for master, p in zip(self.master, self.model.parameters()):
            p.data.copy_(master.data)

    def run(self):
        for batch in self.data:
            self.run_step(batch.cuda(non_blocking=True))
