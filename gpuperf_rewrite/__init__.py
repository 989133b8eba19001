"""gpuperf-rewrite: find, rewrite and prove faster PyTorch training scripts.

Kept import-free on purpose: ``python -m gpuperf_rewrite.runtime`` imports this package inside
the user's training process, where libcst and click may be absent.
"""

__version__ = "0.1.0"
