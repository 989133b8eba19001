"""The floor for any LibCST-based linter: read and ``libcst.parse_module`` every file, nothing else.

Usage: python bare_parse.py FILELIST [--jobs N]   (FILELIST: one path per line)

Stdlib + libcst only, so it runs in any virtual environment (ours, or TorchFix's older libcst).
Every file is parsed (no "mentions torch" prefilter): that is what a tool without one pays.
"""

from __future__ import annotations

import argparse
import sys
from multiprocessing import Pool

import libcst as cst


def parse_one(path: str) -> int:
    """Parse ``path``; 1 when LibCST rejects it (the tree is dropped at once, as a linter would)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        cst.parse_module(data)
    except Exception:  # noqa: BLE001 - a syntax error is a result here, not a failure
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("filelist")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    with open(args.filelist, encoding="utf-8") as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    if args.jobs <= 1:
        failed = sum(map(parse_one, paths))
    else:
        # Same chunking as our runner: a few dozen files per task keeps IPC negligible.
        chunk = max(1, min(32, len(paths) // (args.jobs * 8)))
        with Pool(args.jobs) as pool:
            failed = sum(pool.imap_unordered(parse_one, paths, chunksize=chunk))
    print(f"parsed {len(paths) - failed} files, {failed} rejected", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
