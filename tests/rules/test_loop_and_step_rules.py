"""Behaviour of GP102-105, GP203 and GP401-404 that the embedded examples cannot express:
fixes of several rules converging together, and a fixed script still running on CPU."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import libcst as cst

from gpuperf_rewrite.lint.engine import RuleSet, check_source, fix_text
from tests.helpers.paths import FIXTURES

MINE = ("GP102", "GP103", "GP104", "GP105", "GP203", "GP401", "GP402", "GP403", "GP404")


def _codes(source: str, codes=MINE) -> list[str]:
    res = check_source(source.encode(), "t.py", RuleSet(tuple(codes)), "none")
    return [d.code for d in res.diagnostics]


def test_dataloader_fixes_converge_to_persistent_workers():
    src = textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        def main():
            loader = DataLoader(ds, batch_size=8)
            for epoch in range(3):
                for x in loader:
                    step(x.to(device))
        if __name__ == "__main__":
            main()
    """)
    out = fix_text(src, ["GP201", "GP202", "GP203"])
    assert "num_workers=min(8, os.cpu_count() or 1)" in out
    assert "persistent_workers=True" in out and "pin_memory=torch.cuda.is_available()" in out
    assert fix_text(out, ["GP201", "GP202", "GP203"]) == out
    assert _codes(out, ["GP201", "GP202", "GP203"]) == []


def test_safe_mode_does_not_add_persistent_workers_without_workers():
    # GP201's fix is unsafe: in safe mode there are no workers, so GP203 must stay quiet.
    src = "from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
    assert fix_text(src, ["GP201", "GP203"], mode="safe") == src


def test_two_unguarded_prints_share_one_interval_and_counter():
    src = textwrap.dedent("""
        import torch
        for x, y in loader:
            loss = model(x.cuda()).mean()
            loss.backward()
            opt.step()
            print(loss)
            print(f"{loss:.3f}")
    """)
    out = fix_text(src, ["GP102"])
    assert out.count("log_interval = 100") == 1
    assert out.count("enumerate(") == 1
    assert out.count("if step % log_interval == 0:") == 2
    cst.parse_module(out)
    assert fix_text(out, ["GP102"]) == out


def test_missing_zero_grad_is_an_error():
    src = "import torch\nfor x in loader:\n    model(x).sum().backward()\n    opt.step()\n"
    res = check_source(src.encode(), "t.py", RuleSet(("GP401",)), "none")
    assert [(d.code, d.severity) for d in res.diagnostics] == [("GP401", "error")]


def test_user_classes_named_like_torch_are_not_flagged():
    src = textwrap.dedent("""
        class DataLoader:
            def __init__(self, ds, num_workers=0):
                pass
        class Adam:
            def __init__(self, params):
                pass
            def step(self):
                pass
        opt = Adam([])
        loader = DataLoader(ds, num_workers=4)
        for x in loader:
            model(x).sum().backward()
            opt.step()
    """)
    assert _codes(src) == []


SCRIPT = textwrap.dedent('''
    """Tiny training script with the anti-patterns of GP102-105, GP203 and GP401-404."""
    import os

    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workers = int(os.environ.get("WORKERS", "0"))  # like args.workers: may be 0 (a literal 0 is read as 0)
    ds = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(ds, batch_size=8, num_workers=workers)
    model = nn.Linear(4, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    opt.zero_grad()
    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
        scale = torch.ones(1).to(device)
        loss = nn.functional.mse_loss(model(x) * scale, y)
        loss.backward()
        opt.step()
        total += loss
        print(loss)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    opt.zero_grad(set_to_none=False)
    model.eval()
    correct = 0
    for x, y in loader:
        correct += (model(x.to(device)) - y.to(device)).abs().lt(1).sum().item()
    print("RESULT", float(total), correct)
''')


def test_fixed_script_still_runs_on_cpu(tmp_path):
    assert set(_codes(SCRIPT)) == set(MINE)
    fixed = fix_text(SCRIPT, MINE)
    assert set(_codes(fixed)) == set(), fixed
    assert "persistent_workers=workers > 0" in fixed  # never True with 0 workers
    path = tmp_path / "train.py"
    path.write_text(fixed, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120,
                          env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "RESULT" in proc.stdout


def test_fixtures_get_exactly_the_expected_codes_of_these_rules():
    import re

    scripts = sorted(FIXTURES.glob("*.py"))
    assert scripts, f"no fixtures in {FIXTURES}"
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        match = re.search(r"Expected rule codes:([^\n]*)", text)
        expected = set(match.group(1).split()) if match else set()
        got = set(_codes(text))
        assert got == expected & set(MINE), f"{script.name}: got {sorted(got)}"


def test_gp101_advice_fits_how_the_value_is_used():
    """A running total can stay on the device ("accumulate"); a value the CPU computes with can
    only be read less often or the work moved to the device: the message says which."""
    head = "import torch\nmodel.cuda()\ntotal = 0.0\nfor x, y in loader:\n    loss = criterion(model(x), y)\n" \
           "    loss.backward()\n    optimizer.step()\n"
    total = check_source((head + "    total += loss.item()\n").encode(), "t.py", RuleSet(("GP101",)))
    used = check_source((head + "    host = cpu_metric(loss.cpu(), y)\n").encode(), "t.py", RuleSet(("GP101",)))
    [acc], [other] = total.diagnostics, used.diagnostics
    assert "accumulate on device" in acc.message and acc.fix is not None
    assert "accumulate" not in other.message and "keep the work that needs it on the device" in other.message


_PREPARED_LOOP = textwrap.dedent("""
    import torch
    from accelerate import Accelerator

    {name} = Accelerator({args})
    device = {name}.device
    model = torch.nn.Linear(8, 2).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    loader = torch.utils.data.DataLoader(data, batch_size=8, pin_memory=True)
    model, optimizer, loader = {name}.prepare(model, optimizer, loader)
    for (x,) in loader:
        x = x.to(device)
        {name}.backward(model(x).sum())
        optimizer.step()
        optimizer.zero_grad()
""")


def test_gp104_trusts_accelerate_placement_only_when_it_places():
    # A prepared loader yields batches already on the device (the copy is a no-op), whatever the
    # Accelerator's variable is called; with device_placement=False the copy is real.
    for name in ("accelerator", "acc"):
        assert _codes(_PREPARED_LOOP.format(name=name, args=""), ("GP104",)) == []
        assert _codes(_PREPARED_LOOP.format(name=name, args="device_placement=False"), ("GP104",)) == ["GP104"]
