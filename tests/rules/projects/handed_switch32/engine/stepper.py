import torch
import torch.nn as nn


class Stepper(nn.Module):
    """Runs one optimisation step of the model it was given (a module, so that .to() moves its losses)."""

    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.opt = opt

    def step(self, images, masks, use_bf16=False):
        self.opt.zero_grad(set_to_none=True)
        if use_bf16:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(self.model(images), masks)
        else:
            loss = torch.nn.functional.cross_entropy(self.model(images), masks)
        loss.backward()
        self.opt.step()
        return loss.detach()
