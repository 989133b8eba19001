"""Research-code style: torch and nn come with the network through a star import."""
from nets.segmenter import *


def train(loader, epochs=30):
    model = Segmenter(num_classes=21).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    for epoch in range(epochs):
        for image, target in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(image.cuda()), target.cuda())
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    train(loader=None)
