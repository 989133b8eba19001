from ..engine import Engine


class ImageSoftmaxEngine(Engine):
    def __init__(self, datamanager, model, optimizer, criterion, use_gpu=True):
        super().__init__(datamanager, use_gpu)
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion

    def forward_backward(self, data):
        imgs, pids = data["img"], data["pid"]
        if self.use_gpu:
            imgs = imgs.cuda()
            pids = pids.cuda()
        outputs = self.model(imgs)
        loss = self.criterion(outputs, pids)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {
            "loss": loss.item(),
            "acc": (outputs.argmax(1) == pids).float().mean().item(),
        }

    def export(self, name):
        # a hook the base class calls once per name after training: no step
        weights = self.model.state_dict()[name].cpu().numpy()
        return weights.tolist()
