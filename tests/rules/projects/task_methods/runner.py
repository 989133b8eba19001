import torch


class Runner:
    def __init__(self, args, problem, net):
        self.problem = problem
        self.net = net.to("cuda" if torch.cuda.is_available() else "cpu")
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=args.lr, fused=True)

    def step(self, batch):
        loss = self.problem.loss(self.net, batch)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
