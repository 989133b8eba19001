import torch.nn as nn


class BasicBlock(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        out = self.bn1(self.conv1(x)).relu()
        return (self.bn2(self.conv2(out)) + x).relu()


class ResNet(nn.Module):
    def __init__(self, depth, num_classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 3, padding=1, bias=False)
        self.blocks = nn.Sequential(*[BasicBlock(64) for _ in range(depth)])
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(x.mean((2, 3)))


def resnet18(num_classes=10):
    return ResNet(8, num_classes)


def resnet34(num_classes=10):
    return ResNet(16, num_classes)
