"""A subclass of a subclass: the batch loop is the grandparent's (engines/engine.py)."""
from .softmax import ImageSoftmaxEngine


class RankedSoftmaxEngine(ImageSoftmaxEngine):
    def forward_backward(self, data):
        outputs = self.model(data["img"])
        loss = self.criterion(outputs, data["pid"])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.detach(), "top1": outputs.argmax(1).eq(data["pid"]).sum().item()}
