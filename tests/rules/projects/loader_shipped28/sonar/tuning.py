from torch.utils.data import DataLoader


def tuning_loader(dataset, options: dict):
    """A second loader of the project whose options are a mapping the caller builds."""
    return DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2, **options)
