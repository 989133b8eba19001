"""Program facts the run-time findings ask of the lint (parse only, nothing run): may a file's
data reach a CUDA device? The rules' own answer (``rules/analysis/facts/gpu_use.py``), so a
run-time finding of a rule that gains only on CUDA is reported exactly where the lint would
report that rule, even when the run was on a CPU."""

from __future__ import annotations

from pathlib import Path


def may_use_cuda(path: str | Path) -> bool:
    """The file may put its data on a CUDA device; False when it cannot be read or parsed."""
    from gpuperf_rewrite.lint.parsing import ParseFailure, parse
    from gpuperf_rewrite.lint.sourceio import decode_source
    from gpuperf_rewrite.rules._framework import RuleContext
    from gpuperf_rewrite.rules._framework import may_use_cuda as cuda_fact

    try:
        data = Path(path).read_bytes()
        module = parse(data, str(path))
        return bool(cuda_fact(RuleContext(module, decode_source(data), str(path), None)))
    except (OSError, ParseFailure, SyntaxError, UnicodeDecodeError, LookupError, RecursionError):
        return False
