import torch.utils.data

from .folder import ImageFolder


def create_dataloader(opt):
    dataset = ImageFolder(opt.dataroot)
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=opt.batch_size,
        shuffle=True,
        num_workers=int(opt.nThreads),
        drop_last=True,
    )
