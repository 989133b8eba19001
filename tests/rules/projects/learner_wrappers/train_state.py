"""The step function closes over a state dict: the model is never handed to it by name."""
import torch

import steps

torch.backends.cuda.matmul.allow_tf32 = True


def train(cfg, batches):
    net = steps.build_net(cfg)
    optimizer = steps.make_optimizer(cfg, net.parameters())
    state = {"model": net, "optimizer": optimizer, "step": 0}
    step_fn = steps.make_step_fn(cfg["sigma"])
    for batch in batches:
        step_fn(state, batch.to(cfg["device"], non_blocking=True))
        state["step"] += 1


if __name__ == "__main__":
    train({"dim": 512, "device": "cuda", "lr": 2e-4, "sigma": 0.5}, [])
