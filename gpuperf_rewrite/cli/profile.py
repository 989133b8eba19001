"""``gpuperf-rewrite profile``: run a script under the runtime shim, print the report, write JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from gpuperf_rewrite.validate.profiling import LAUNCHERS, run_profile
from gpuperf_rewrite.runtime.report import format_report
from gpuperf_rewrite.runtime.schema import OK_STATUSES


@click.command("profile", context_settings={"ignore_unknown_options": True})
@click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--steps", type=click.IntRange(min=1), default=50, show_default=True,
              help="Optimizer steps to measure after warmup.")
@click.option("--warmup", type=click.IntRange(min=0), default=10, show_default=True,
              help="Optimizer steps to run before measuring (compilation, allocator warm-up).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600, show_default=True,
              help="Seconds before the script's process group is stopped.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed for random, numpy and torch before the script starts.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the JSON document here.")
@click.option("--trace", "trace_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write a torch.profiler trace of a few steps after the measured window here.")
@click.option("--python", "python", type=str, default=None,
              help="Interpreter to run the script with (default: this one).")
@click.option("--launcher", type=click.Choice(LAUNCHERS), default=None,
              help="Run under a distributed launcher; every rank is measured.")
@click.option("--nproc-per-node", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes per node for --launcher torchrun.")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def profile(script: Path, steps: int, warmup: int, timeout: float, seed: int, json_path: Path | None,
            trace_dir: Path | None, python: str | None, launcher: str | None, nproc_per_node: int,
            script_args: tuple[str, ...]) -> None:
    """Measure SCRIPT's training steps: throughput, where the time goes, what to fix first.

    Arguments after `--` are passed to the script unchanged.
    """
    if nproc_per_node > 1 and launcher is None:
        raise click.UsageError("--nproc-per-node needs --launcher torchrun")
    doc = run_profile(script, script_args, steps=steps, warmup=warmup, timeout=timeout, seed=seed,
                      python=python, trace_dir=trace_dir, launcher=launcher,
                      nproc_per_node=nproc_per_node)
    click.echo(format_report(doc))
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = json_path.with_name(f".{json_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str))
        os.replace(tmp, json_path)
    raise SystemExit(0 if doc["status"] in OK_STATUSES else 1)
