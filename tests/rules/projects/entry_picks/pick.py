# A trainer object picked in an if/elif chain runs the networks' steps; this loop calls its updates.
import torch

from trainers import PairTrainer, SharedTrainer


def run(config, loader_a, loader_b, kind="pair"):
    if kind == "pair":
        trainer = PairTrainer(config)
    elif kind == "shared":
        trainer = SharedTrainer(config)
    else:
        raise ValueError(kind)
    trainer.cuda()
    for it, (a, b) in enumerate(zip(loader_a, loader_b)):
        a, b = a.cuda(non_blocking=True), b.cuda(non_blocking=True)
        trainer.dis_update(a, b)
        trainer.gen_update(a, b)
