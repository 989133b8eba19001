import torch

from agents import make_agent
from options import parse

if __name__ == "__main__":
    opt = parse()
    agent = make_agent(opt)
    for epoch in range(opt.epochs):
        for batch in torch.load(opt.data):
            agent.feed(batch)
            agent.learn()
