class Runner:
    def __init__(self, net, loader, optimizer):
        self.net, self.loader, self.optimizer = net, loader, optimizer

    def epoch(self):
        for x, y in self.loader:
            loss = (self.net(x.cuda()) - y.cuda()).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
