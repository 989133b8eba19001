import torch
from torch.utils.data import DataLoader, TensorDataset

from nets.generator import create_model
from options.train_options import TrainOptions


def loss_backward(opt, loss, optimizer):
    optimizer.zero_grad(set_to_none=True)
    if opt.fp16:
        from apex import amp
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
    else:
        loss.backward()
    optimizer.step()


def main():
    opt = TrainOptions().parse()
    frames = TensorDataset(torch.randn(64, 3, 32, 32), torch.randn(64, 3, 32, 32))
    loader = DataLoader(frames, batch_size=opt.batch_size, shuffle=True, num_workers=4, pin_memory=True,
                        persistent_workers=True)
    model = create_model(opt)
    optimizer = torch.optim.Adam(model.parameters(), lr=opt.lr, fused=True)
    for epoch in range(opt.niter):
        for prev, label in loader:
            prev = prev.cuda(non_blocking=True)
            label = label.cuda(non_blocking=True)
            loss = (model(prev, label) - prev).abs().mean()
            loss_backward(opt, loss, optimizer)


if __name__ == "__main__":
    main()
