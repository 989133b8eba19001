"""GP104's non_blocking fix is safe only where the copied object is provably a tensor; GP105 and
GP104 know legacy typed tensors; copies in CPU branches and of on-device data are left alone."""

from __future__ import annotations

import textwrap

from gpuperf_rewrite.lint.engine import RuleSet, check_source, fix_text


def _fix(src: str, unsafe: bool) -> str:
    return fix_text(textwrap.dedent(src), ["GP104"], mode="unsafe" if unsafe else "safe")


def _found(src: str, code: str = "GP104"):
    res = check_source(textwrap.dedent(src).encode(), "t.py", RuleSet((code,)), "none")
    return [d for d in res.diagnostics if d.code == code]


def test_fields_of_a_default_collated_batch_are_tensors_so_the_fix_is_safe():
    src = """
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, shuffle=True)
        for step, batch in enumerate(loader):
            x = batch[0].to(device)
            m = batch["mask"].cuda()
            a, b = batch
            b = b.to(device)
            loss = model(x, m, b).mean()
            loss.backward()
            opt.step()
    """
    out = _fix(src, unsafe=False)
    assert out.count("non_blocking=True") == 3


def test_a_whole_batch_or_a_custom_collate_gets_an_unsafe_fix_only():
    for src in ("""
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8)
        for batch in loader:
            batch = batch.to(device)
            loss = model(**batch).loss
            loss.backward()
            opt.step()
    """, """
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, collate_fn=pad_collate)
        for x, y in loader:
            x = x.to(device)
            loss = model(x).mean()
            loss.backward()
            opt.step()
    """):
        assert _found(src), src
        assert "non_blocking" not in _fix(src, unsafe=False)
        assert "non_blocking=True" in _fix(src, unsafe=True)


def test_no_fix_at_all_on_a_batch_encoding_or_an_unknown_batch_next_to_transformers():
    src = """
        import torch
        from transformers import AutoModelForSequenceClassification
        for batch in train_dataloader:
            batch = batch.to(device)
            enc = tokenizer(batch["text"], return_tensors="pt").to(device)
            loss = model(**enc).loss
            loss.backward()
            optimizer.step()
    """
    assert len(_found(src)) == 2
    assert "non_blocking" not in _fix(src, unsafe=True)


def test_preloaded_slices_say_move_it_once_and_helper_built_batches_are_found():
    src = """
        import torch
        data = torch.from_numpy(np.load("tokens.npy"))
        for it in range(1000):
            j = it * 64
            x = data[j:j + 64].to("cuda")
            loss = model(x).mean()
            loss.backward()
            opt.step()
    """
    (finding,) = _found(src)
    assert "move it to the device once" in finding.message
    assert "non_blocking=True" in _fix(src, unsafe=False)


def test_copies_of_device_data_or_in_cpu_branches_are_not_reported():
    src = """
        import torch
        data = torch.tensor(values, device="cuda")
        for it in range(1000):
            x = data[it:it + 8].to("cuda")
            if device.type == "cpu":
                y = torch.stack(rows[it]).to(device)
            loss = model(x).mean()
            loss.backward()
            opt.step()
    """
    assert _found(src) == []


# A custom collate's batch of the project's own type, whose ``to()`` takes only a device: adding
# ``non_blocking=True`` to its copy would raise TypeError at the first step.
NESTED = '''
import torch


class PaddedImages:
    def __init__(self, tensors, mask):
        self.tensors, self.mask = tensors, mask

    def to(self, device):
        return PaddedImages(self.tensors.to(device), self.mask.to(device))


def collate(items):
    return PaddedImages(torch.stack([i[0] for i in items]), None), [i[1] for i in items]
'''
ENGINE = '''
import torch
from torch.utils.data import DataLoader
{imports}

def train_one_epoch(model, criterion, loader, optimizer, device):
    for images, targets in loader:
        images = images.to(device)
        loss = criterion(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    loader = DataLoader(ds, batch_size=2, collate_fn={collate})
    train_one_epoch(model, criterion, loader, optimizer, torch.device("cuda"))
'''


def _project_copy(tmp_path, two_modules: bool, kwargs: str = ""):
    nested = NESTED.replace("def to(self, device):", f"def to(self, device{kwargs}):")
    if two_modules:
        (tmp_path / "structures.py").write_text(nested)
        engine = ENGINE.format(imports="from structures import collate\n", collate="collate")
    else:
        engine = nested + ENGINE.format(imports="", collate="collate")
    (tmp_path / "engine.py").write_text(engine)
    path = tmp_path / "engine.py"
    res = check_source(path.read_bytes(), "engine.py", RuleSet(("GP104",)), "unsafe", fs_path=str(path))
    return [d for d in res.diagnostics if d.code == "GP104"], res


def test_a_batch_type_of_the_project_whose_to_rejects_non_blocking_gets_no_fix(tmp_path):
    for two_modules in (False, True):
        found, res = _project_copy(tmp_path, two_modules)
        assert len(found) == 1, (two_modules, found)  # still a blocking copy of the batch ...
        assert res.fixed is None or b"non_blocking" not in res.fixed  # ... but no fix that would crash
        assert "`PaddedImages` defines `.to()`" in found[0].no_fix_reason


def test_a_project_type_whose_to_takes_non_blocking_keeps_the_unsafe_fix(tmp_path):
    for kwargs in (", non_blocking=False", ", **kwargs"):
        found, res = _project_copy(tmp_path, True, kwargs)
        assert found == []  # fixed, so no longer reported
        assert res.fixed is not None and b"images.to(device, non_blocking=True)" in res.fixed
