class Solver:
    def __init__(self, data, model, optimizer, epochs):
        self.tr_loader = data["tr_loader"]
        self.model = model
        self.optimizer = optimizer
        self.epochs = epochs

    def train(self):
        for epoch in range(self.epochs):
            self.model.train()
            for feats, tokens in self.tr_loader:
                feats, tokens = feats.cuda(non_blocking=True), tokens.cuda(non_blocking=True)
                loss = self.model(feats, tokens)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
