"""Issue 28: tensor reads to Python count the training step's, not the input pipeline's (a real
MNIST script reported 192 reads per step, all in its dataset's ``__getitem__``). One child
interpreter per test."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from gpuperf_rewrite.validate.run.profiling import run_profile  # noqa: E402
from gpuperf_rewrite.runtime.diagnosis import bottlenecks as diagnosis  # noqa: E402
from gpuperf_rewrite.runtime.diagnosis import report  # noqa: E402

SCRIPT = """
import torch, torch.nn as nn
from torch.utils.data import DataLoader, Dataset

class Digits(Dataset):
    def __init__(self):
        self.x, self.y = torch.randn(64, 8), torch.randint(0, 2, (64,))

    def __len__(self):
        return 64

    def label(self, i):  # a helper the dataset calls: still the dataset's read
        return int(self.y[i].item())

    def __getitem__(self, i):
        scale = self.x[i].abs().max().item()  # CPU reads while loading: not the step's
        _ = self.x[i].tolist()
        return self.x[i] / (scale + 1), self.label(i)

def collate(items):
    xs = torch.stack([x for x, _ in items])
    ys = torch.tensor([y for _, y in items])
    _ = float(xs.mean())  # a read in the collate function
    return xs, ys

data = Digits()
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loader = DataLoader(data, batch_size=8, collate_fn=collate, num_workers={workers})
for epoch in range(100):
    for x, y in loader:
        _ = data[0]  # the dataset indexed in the loop: its reads are still the dataset's
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())  # the one read of the training step
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_only_the_training_steps_reads_count(tmp_path, workers: int) -> None:
    script = tmp_path / "mnist_like.py"
    script.write_text(SCRIPT.replace("{workers}", str(workers)))
    doc = run_profile(script, steps=6, warmup=2, timeout=180)
    assert doc["status"] == "step_limit", doc["stderr_tail"]
    assert doc["host_reads_per_step"] == 1.0  # loss.item(); none of the 8 x 3 + 1 loading reads
    assert doc["host_reads_counted"] == "cpu_would_sync"
    assert "Tensor reads to Python/step: 1.00 (CPU run: reads in the training step" in report.format_report(doc)


def test_the_report_and_diagnosis_say_what_was_counted() -> None:
    doc = {"measured_steps": 10, "host_reads_per_step": 3.0, "host_reads_counted": "cpu_would_sync",
           "fingerprint": {"device": "cpu"}, "step_time_s": {}}
    (latent,) = [f for f in diagnosis.diagnose(doc) if f["kind"] == "latent_syncs"]
    assert "in the training step" in latent["evidence"] and "data loading not counted" in latent["evidence"]
    assert "would each sync if those tensors lived on a GPU" in report.READS_COUNTED["cpu_would_sync"]
    assert "a host sync each" in report.READS_COUNTED["device"]


def test_reads_of_device_tensors_and_of_cpu_tensors_are_told_apart() -> None:
    """In process, with a tensor that says it is not on the CPU (no GPU needed)."""
    import torch

    from gpuperf_rewrite.runtime.measure.syncs import HostReadCounter

    class OnDevice(torch.Tensor):
        is_cpu = False

    counter = HostReadCounter()
    undo = counter.install(torch)
    try:
        dev, host = torch.Tensor._make_subclass(OnDevice, torch.tensor(2.0)), torch.tensor(3.0)
        dev.item()
        host.item()
        assert (counter.count, counter.cpu) == (1, 1)
        counter.loading += 1  # a DataLoader producing a batch
        dev.item(), host.tolist()
        counter.loading -= 1
        assert (counter.count, counter.cpu) == (1, 1)
        counter.device_run = True  # CUDA is up: a CPU tensor's read is no sync and no longer stands for one
        host.item()
        dev.item()
        assert (counter.count, counter.cpu) == (2, 1)
    finally:
        undo()
