class Engine:
    def __init__(self, args, model, optimizer):
        self.args = args
        self.model = model
        self.optimizer = optimizer

    def loss(self, out, target):
        raise NotImplementedError

    def run_epoch(self, loader, epoch):
        self.model.train()
        for image, target in loader:
            image, target = image.cuda(non_blocking=True), target.cuda(non_blocking=True)
            self.optimizer.zero_grad()
            loss = self.loss(self.model(image), target)
            loss.backward()
            self.optimizer.step()
