import torch


def move_batch(batch, device):
    """Called every training step: numpy fields become tensors and go to the device."""
    mels, audio, lengths = batch
    mels = torch.from_numpy(mels).float().to(device)
    audio = torch.from_numpy(audio).to(device)
    lengths = torch.as_tensor(lengths).long().to(device)
    return mels, audio, lengths


def to_cpu(batch):
    return [t.cpu() for t in batch]
