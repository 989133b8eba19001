"""A detector trained by an engine that is handed its loss as a callable (functools.partial)."""
from functools import partial

import torch

from engine import fit
from lib import losses

if __name__ == "__main__":
    model = torch.nn.Linear(16, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 16)), batch_size=8,
                                         num_workers=4, pin_memory=True, persistent_workers=True)
    fit(model, opt, loader, partial(losses.weighted_loss, scale=2.0))
