"""The learner comes from the registry by its configured name and runs its own step."""
import torch

from learners import create_learner

torch.backends.cudnn.benchmark = True


def main(cfg, loader):
    learner = create_learner(cfg)
    for epoch in range(cfg["epochs"]):
        for batch in loader:
            learner.learn(batch)


if __name__ == "__main__":
    main({"learner": "denoise", "device": "cuda", "lr": 1e-3, "epochs": 10}, [])
