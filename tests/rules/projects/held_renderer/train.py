"""A NeRF-style project: the loop runs a wrapper module whose forward hands the batch to a renderer
object it holds; the renderer's per-ray work (another module) runs on every step."""
import importlib

import torch


def main():
    net = torch.nn.Sequential(torch.nn.Linear(63, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4)).cuda()
    network = importlib.import_module("nets.wrapper").NetworkWrapper(net).cuda()  # picked by name
    optimizer = torch.optim.Adam(network.parameters(), lr=5e-4, fused=True)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 1024, 3)), batch_size=4,
                                         num_workers=2, pin_memory=True, persistent_workers=True)
    for batch in loader:
        batch = {"ray_o": batch[0].cuda(non_blocking=True), "near": torch.zeros(4, 1024, device="cuda")}
        loss = network(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
