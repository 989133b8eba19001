"""How the chunked pool would spread a corpus over 2, 4, 8 and 16 workers: a model, not a measurement.

    python benchmarks/chunk_model.py                  # the installed torch package
    python benchmarks/chunk_model.py --corpus DIR

The lint pool (``gpuperf_rewrite/lint/parallel.py``) cuts the files that need parsing into
contiguous chunks (``plan_chunks``) and hands them to the workers largest first, a new chunk
whenever a worker is free (path order is shown too: what the pool did before). This replays that schedule with each file's cost taken as proportional to its
size in bytes (LibCST's parse dominates and is roughly linear in the source), and reports the
modelled speed-up over one worker and what bounds it: the largest single chunk, and the chunk
that starts last. It says nothing about memory bandwidth, start-up or IPC; those need a machine
with that many cores.
"""

from __future__ import annotations

import argparse
import heapq
import importlib.util
from pathlib import Path

from gpuperf_rewrite.lint.engine import RuleSet, rules_for
from gpuperf_rewrite.lint.parallel import plan_chunks
from gpuperf_rewrite.lint.registry import all_rules
from gpuperf_rewrite.lint.sourceio import decode_source


def needs_parsing(files: list[Path]) -> list[int]:
    """Sizes, in path order, of the files some default rule can fire on (the rest never reach a worker)."""
    rs = RuleSet(tuple(c for c, r in all_rules().items() if r.default_enabled))
    sizes = []
    for p in files:
        data = p.read_bytes()
        try:
            keep = bool(rules_for(decode_source(data), rs))
        except (SyntaxError, UnicodeDecodeError, LookupError):
            keep = False
        if keep:
            sizes.append(len(data))
    return sizes


def makespan(chunk_costs: list[int], workers: int, largest_first: bool = False) -> int:
    order = sorted(chunk_costs, reverse=True) if largest_first else chunk_costs
    free = [0] * workers
    for cost in order:
        heapq.heappush(free, heapq.heappop(free) + cost)
    return max(free)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path)
    args = ap.parse_args()
    corpus = args.corpus or Path(importlib.util.find_spec("torch").origin).parent
    sizes = needs_parsing(sorted(p for p in corpus.rglob("*.py") if p.is_file()))
    total = sum(sizes)
    print(f"{corpus}: {len(sizes)} files need parsing, {total / 2**20:.1f} MB; largest file "
          f"{max(sizes) / 2**20:.2f} MB ({max(sizes) / total:.1%} of the work)\n")
    print("| workers | chunks | largest chunk, % of work | modelled speed-up, chunks in path order (before) | "
          "largest chunks first (now) | ideal |")
    print("|---|---|---|---|---|---|")
    for workers in (1, 2, 4, 8, 16):
        chunks = [sum(sizes[i] for i in r) for r in plan_chunks(sizes, workers)]
        print(f"| {workers} | {len(chunks)} | {max(chunks) / total:.1%} | "
              f"{total / makespan(chunks, workers):.2f}x | {total / makespan(chunks, workers, True):.2f}x | "
              f"{workers}x |")


if __name__ == "__main__":
    main()
