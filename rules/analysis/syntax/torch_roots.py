"""The packages that make a file torch code, and a text test for whether a file can import one.

Every rule reports nothing in a file that imports none of these (``RuleContext.uses_torch``), so a
file for which :func:`may_import_torch` is false cannot have a finding and is never parsed: an
import statement spells its top-level package out as a whole word, on the logical line that holds
its ``import`` keyword.
"""

from __future__ import annotations

import re

TORCH_IMPORT_ROOTS = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "torchdata", "torchmetrics", "functorch",
    "lightning", "pytorch_lightning", "lightning_fabric", "accelerate", "transformers", "timm",
    "diffusers", "peft", "trl", "deepspeed", "fairscale", "apex", "torch_xla", "ignite",
    "composer", "fastai", "detectron2", "mmengine", "mmcv", "monai", "kornia", "torchrl",
    "torch_geometric", "dgl", "segmentation_models_pytorch", "open_clip", "sentence_transformers",
})

# Tensor methods no other common library's objects have: a file calling one runs torch code on
# tensors handed to it though it imports no torch package (a re-ID engine subclass whose
# ``forward_backward`` does ``imgs.cuda()`` and ``loss.backward()``; its base class imports torch).
TORCH_ONLY_METHODS = frozenset({"cuda", "backward"})


def calls_torch_methods(text: str) -> bool:
    """Can ``text`` call a tensor method no other library's objects have (``.cuda(``,
    ``.backward(``)? A text test: the parsed file's ``RuleContext.uses_torch`` decides."""
    return ".cuda(" in text or ".backward(" in text


_ROOTS = "(?:%s)(?!\\w)" % "|".join(sorted(TORCH_IMPORT_ROOTS, key=len, reverse=True))
# A root as an import statement spells it: right after ``from`` (a relative import names no root),
# or among the names after ``import``; a whole word each time ("Ctrl" is not ``trl``, "accelerated"
# not ``accelerate``, ``x.torch`` not an import).
_FROM_A_ROOT = re.compile(r"(?<![\w.])from(?:\s|\\)+" + _ROOTS)
_A_ROOT = re.compile(r"(?<![\w.])" + _ROOTS)
# Where the names after an ``import`` keyword end: a statement separator, a comment, or the next
# ``import`` (so the spans searched never overlap and the work stays linear in the text).
_IMPORT_OR_END = re.compile(r"(?<![\w.])import(?!\w)|[;#]")


def may_import_torch(text: str) -> bool:
    """Can ``text`` import torch or a torch framework? One C-speed scan for the ``import`` keyword,
    then each logical line that holds it (backslash continuations included) is searched for an
    import of a root, in time linear in the line. It may say yes for a file that does not (an
    import in a string or a comment): that file is parsed and the rules' own gate decides."""
    find, rfind = text.find, text.rfind
    at = find("import")
    while at != -1:
        start = rfind("\n", 0, at) + 1
        while start > 1 and _continued(text, start - 1):  # the line before continues into this one
            start = rfind("\n", 0, start - 1) + 1
        end = find("\n", at)
        while end != -1 and _continued(text, end):  # this line continues
            end = find("\n", end + 1)
        end = len(text) if end == -1 else end
        if _FROM_A_ROOT.search(text, start, end) or _imports_a_root(text, start, end):
            return True
        at = find("import", end)
    return False


def _imports_a_root(text: str, start: int, end: int) -> bool:
    """Does a root follow an ``import`` keyword between ``start`` and ``end``, before the
    statement, a comment or the next ``import`` begins?"""
    names_from = None
    for m in _IMPORT_OR_END.finditer(text, start, end):
        if names_from is not None and _A_ROOT.search(text, names_from, m.start()):
            return True
        names_from = m.end() if m.group() == "import" else None
    return names_from is not None and _A_ROOT.search(text, names_from, end) is not None


def _continued(text: str, newline: int) -> bool:
    """Does the physical line that ends at ``text[newline]`` end with a backslash (LF or CRLF)?"""
    before = text[max(newline - 2, 0):newline]
    return before.endswith("\\") or before == "\\\r"
