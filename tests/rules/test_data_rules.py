"""What the DataLoader and distributed rules' rewrites do when the rewritten script runs (on CPU):
worker processes added by GP201 work under the spawn start method when the loop is guarded, the
fix the rule withholds from an unguarded script would really break it, GP201-GP203 edit the
``**kwargs`` dict that reaches the loader, and GP503's ``set_epoch`` makes each epoch reshuffle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuperf_rewrite.lint.engine import RuleSet, check_source, fix_text

pytest.importorskip("torch")

DATA_RULES = ["GP201", "GP202", "GP203"]


def _run(path: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=path.parent)


def _codes(source: str, codes) -> list[str]:
    res = check_source(source.encode(), "t.py", RuleSet(tuple(codes)), "none")
    return [d.code for d in res.diagnostics]


GUARDED = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset


    def main():
        torch.manual_seed(0)
        ds = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        loader_kwargs = {"batch_size": 16, "shuffle": True,
                         "multiprocessing_context": "spawn"}  # what macOS, Windows and 3.14 do
        loader = DataLoader(ds, **loader_kwargs)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        print("done", float(loss))


    if __name__ == "__main__":
        main()
""")


@pytest.mark.slow
def test_worker_fix_edits_the_kwargs_dict_and_runs_under_spawn(tmp_path):
    fixed = check_source(GUARDED.encode(), "train.py",
                         RuleSet(tuple(DATA_RULES), {"GP201": {"max-workers": 1}}), "unsafe").fixed
    assert fixed is not None
    out = fixed.decode()
    # Written into the dict that reaches the loader, not beside it in the call.
    assert '"num_workers": min(1, os.cpu_count() or 1)' in out and '"persistent_workers": True' in out
    assert "DataLoader(ds, **loader_kwargs)" in out
    assert _codes(out, DATA_RULES) == []
    script = tmp_path / "train.py"
    script.write_text(out)
    proc = _run(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("done")


UNGUARDED = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.randn(32, 4))
    loader = DataLoader(ds, batch_size=8, multiprocessing_context="spawn")
    for (x,) in loader:
        pass
    print("done")
""")


@pytest.mark.slow
def test_unguarded_script_gets_no_worker_fix_because_it_would_break_under_spawn(tmp_path):
    res = check_source(UNGUARDED.encode(), "train.py", RuleSet(("GP201",)), "unsafe")
    (diag,) = res.diagnostics
    assert res.fixed is None and "__main__" in diag.no_fix_reason and "spawn" in diag.no_fix_reason
    # The withheld fix, applied by hand: each spawned worker re-runs the script and fails.
    script = tmp_path / "train.py"
    script.write_text(UNGUARDED.replace("batch_size=8,", "batch_size=8, num_workers=1,"))
    proc = _run(script)
    assert proc.returncode != 0
    assert "bootstrapping phase" in proc.stderr or "__main__" in proc.stderr, proc.stderr[-2000:]


# Worker counts that are 0 when the script runs as written: a config dataclass field, argparse
# defaults, given positionally, set into a dict after it is built. ``persistent_workers=True``
# raises ValueError with 0 workers, so GP203's fix must make persistence depend on the count.
ZERO_WORKERS = textwrap.dedent("""\
    import argparse
    import dataclasses

    import torch
    from torch.utils.data import DataLoader, TensorDataset


    @dataclasses.dataclass
    class DataConfig:
        batch_size: int = 8
        num_workers: int = 0


    class DataModule:
        def __init__(self, cfg: DataConfig):
            self.cfg = cfg
            self.ds = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))

        def train_dataloader(self):
            return DataLoader(self.ds, batch_size=self.cfg.batch_size, shuffle=True, num_workers=self.cfg.num_workers)


    def fit(model, loader, epochs=2):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(epochs):
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--workers", type=int, default=0)
        parser.add_argument("--eval-workers", type=int, default=0)
        args = parser.parse_args()
        ds = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
        model = torch.nn.Linear(4, 1)
        common = dict(batch_size=8, num_workers=args.workers)
        fit(model, DataLoader(ds, shuffle=True, **common))
        fit(model, DataModule(DataConfig()).train_dataloader())
        fit(model, DataLoader(ds, 8, False, None, None, args.eval_workers))
        loader_cfg = {"batch_size": 8}
        loader_cfg["num_workers"] = args.workers
        fit(model, DataLoader(ds, **loader_cfg))
        print("done")


    if __name__ == "__main__":
        main()
""")


@pytest.mark.slow
def test_persistent_workers_fix_runs_with_zero_workers(tmp_path):
    codes = _codes(ZERO_WORKERS, DATA_RULES)
    # GP201, without a fix, where the count is --workers/--eval-workers (command-line default 0);
    # GP203 only on the config field: a count that is 0 by default on the command line has nothing
    # to persist on the default run (GP201 asks for workers there first)
    assert codes.count("GP203") == 1 and codes.count("GP201") == 3 and len(codes) == 4
    fixed = check_source(ZERO_WORKERS.encode(), "train.py", RuleSet(tuple(DATA_RULES)), "unsafe").fixed
    assert fixed is not None
    out = fixed.decode()
    assert "persistent_workers=True" not in out and "persistent_workers=self.cfg.num_workers > 0" in out
    assert "args.workers > 0" not in out and "args.eval_workers > 0" not in out
    script = tmp_path / "train.py"
    script.write_text(out)
    proc = _run(script)  # with the defaults: 0 workers everywhere
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("done")


DDP_SCRIPT = textwrap.dedent("""\
    import json
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler


    def build_loader(ds):
        return DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds, num_replicas=1, rank=0))


    class Trainer:
        def __init__(self, model, loader):
            self.model = DDP(model)
            self.loader = loader
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
            self.orders = []

        def run_epoch(self):
            seen = []
            for x, idx in self.loader:
                seen += idx.tolist()
                loss = self.model(x).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            self.orders.append(seen)

        def fit(self, epochs):
            for epoch in range(epochs):
                self.run_epoch()


    def main():
        dist.init_process_group("gloo", init_method="file://STORE", rank=0, world_size=1)
        ds = TensorDataset(torch.randn(32, 4), torch.arange(32))
        trainer = Trainer(torch.nn.Linear(4, 1), build_loader(ds))
        trainer.fit(3)
        print(json.dumps(trainer.orders))
        dist.destroy_process_group()


    if __name__ == "__main__":
        main()
""")


@pytest.mark.slow
def test_set_epoch_fix_reshuffles_every_epoch(tmp_path):
    # A file rendezvous, not a port picked in advance that another test's process could take.
    source = DDP_SCRIPT.replace("STORE", str(tmp_path / "store"))
    fixed = fix_text(source, ["GP502", "GP503"])
    assert "self.loader.sampler.set_epoch(epoch)" in fixed
    assert "DDP(model, gradient_as_bucket_view=True)" in fixed
    assert fix_text(fixed, ["GP502", "GP503"]) == fixed
    script = tmp_path / "train.py"
    script.write_text(fixed)
    proc = _run(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    orders = json.loads(proc.stdout.strip().splitlines()[-1])
    # Without set_epoch a DistributedSampler repeats one order every epoch (torch's documented
    # behaviour, the anti-pattern); the rewrite reshuffles each epoch and still covers the data.
    assert len({tuple(o) for o in orders}) == 3
    assert all(sorted(o) == list(range(32)) for o in orders)
