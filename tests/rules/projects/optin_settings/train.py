# The script's settings block: mixed precision exists in utils/fit.py, behind `fp16`, which is off.
import torch
import torch.backends.cudnn as cudnn
import torchvision

from utils.fit import fit_one_epoch

if __name__ == "__main__":
    Cuda = True
    fp16 = False
    epochs = 100
    model = torchvision.models.resnet50(num_classes=10)
    model_train = model.train().cuda()
    cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    model_train = torch.compile(model_train)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    if fp16:
        from torch.cuda.amp import GradScaler
        scaler = GradScaler()
    else:
        scaler = None
    dataset = torchvision.datasets.CIFAR10("data", download=True, transform=torchvision.transforms.ToTensor())
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True,
                                         persistent_workers=True)
    for epoch in range(epochs):
        fit_one_epoch(model_train, optimizer, loader, epoch, Cuda, fp16, scaler)
