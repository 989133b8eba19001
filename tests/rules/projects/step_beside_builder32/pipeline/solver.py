import torch

from .zoo import make_network


def one_pass(network, feeder, opt, crit):
    network.train()
    for step, (tokens, tags) in enumerate(feeder):
        scores = network(tokens.cuda(non_blocking=True))
        loss = crit(scores.flatten(0, 1), tags.cuda(non_blocking=True).flatten())
        if step % 4 == 0:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        if step % 4 == 3:
            opt.step()


def run(cfg, feeder):
    network = make_network(cfg).cuda()
    opt = torch.optim.AdamW(network.parameters(), lr=cfg["lr"], fused=True)
    crit = torch.nn.CrossEntropyLoss()
    for _ in range(cfg["epochs"]):
        one_pass(network, feeder, opt, crit)
