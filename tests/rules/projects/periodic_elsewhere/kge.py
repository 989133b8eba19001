"""A knowledge-graph model in the shape of the popular KGE code: train_step and test_step are
static methods; run_kge.py calls test_step only every `valid_steps` steps."""
import torch


class KGEModel(torch.nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.emb = torch.nn.Embedding(n, dim)

    def forward(self, sample):
        return self.emb(sample).sum(-1)

    @staticmethod
    def train_step(model, optimizer, iterator, device):
        model.train()
        optimizer.zero_grad()
        sample = next(iterator).to(device, non_blocking=True)
        loss = -model(sample).mean()
        loss.backward()
        optimizer.step()
        return {"loss": loss}

    @staticmethod
    def test_step(model, test_loader, device):
        model.eval()
        ranks = []
        with torch.no_grad():
            for sample in test_loader:
                score = model(sample.to(device, non_blocking=True))
                ranking = (score > score[0]).sum()
                ranks.append(1 + ranking.item())
        return ranks
