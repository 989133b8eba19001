"""The fixes of the step-loop rules on a script that has every new shape at once (a loss scaler
of another module, legacy typed tensors, an eval loop over a generator, a straight-line eval
helper, a CUDA-checked sync): the rewrite re-parses, is idempotent and still runs on CPU."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import libcst as cst

from gpuperf_rewrite.lint.engine import RuleSet, check_source, fix_text

CODES = ("GP101", "GP102", "GP103", "GP104", "GP105", "GP401", "GP402", "GP403", "GP404")

HELPERS = textwrap.dedent('''
    def amp_step(loss, optimizer):
        loss.backward()
        optimizer.step()
''')

SCRIPT = textwrap.dedent('''
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset
    from helpers import amp_step

    cuda = torch.cuda.is_available()
    Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
    device = torch.device("cuda" if cuda else "cpu")
    model = nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)

    def batches(xs, bs):
        for i in range(0, len(xs), bs):
            yield xs[i:i + bs]

    def evaluate(net, xs):
        net.eval()
        total = 0.0
        with torch.no_grad():
            for xb in batches(xs, 8):
                total += net(xb.to(device)).sum().item()
        net.train()
        return total

    def predict(net, x):
        net.eval()
        out = net(x)
        net.train()
        return out

    running = 0.0
    for step, (x, y) in enumerate(loader):
        x = x.type(Tensor)
        noise = Tensor(np.random.normal(0, 0.01, (x.shape[0], 4)))
        loss = ((model(x + noise) - y.to(device)) ** 2).mean()
        amp_step(loss, optimizer)
        running += loss
        if cuda:
            torch.cuda.synchronize()

    def report():
        return predict(model, torch.randn(2, 4)).shape

    print("RESULT", float(running), evaluate(model, torch.randn(16, 4)), report())
''')


def test_every_new_shape_is_found():
    res = check_source(SCRIPT.encode(), "train.py", RuleSet(CODES), "none")
    found = sorted({d.code for d in res.diagnostics})
    assert found == ["GP101", "GP103", "GP104", "GP105", "GP401", "GP403", "GP404"], found


def test_fixed_script_reparses_is_idempotent_and_runs_on_cpu(tmp_path):
    fixed = fix_text(SCRIPT, list(CODES))
    cst.parse_module(fixed)
    assert fix_text(fixed, list(CODES)) == fixed
    assert "@torch.no_grad()\ndef predict" in fixed
    assert "x.type(Tensor, non_blocking=True)" in fixed
    assert "optimizer.zero_grad()" in fixed
    assert "running += loss.detach()" in fixed
    assert "torch.cuda.synchronize()" not in fixed and "if cuda:" not in fixed
    (tmp_path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (tmp_path / "train.py").write_text(fixed, encoding="utf-8")
    proc = subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "RESULT" in proc.stdout
