"""``gpuperf-rewrite profile``: run a script under the runtime shim, print the report, write JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpuperf_rewrite.cli.options import (MAX_SECONDS, SEED, STEPS, WARMUP, FiniteFloat, check_html, given,
                                         html_option, json_option, launch_from_options, launcher_options,
                                         module_option, script_entry, write_html, write_json)
from gpuperf_rewrite.runtime.diagnosis.bottlenecks import diagnose
from gpuperf_rewrite.runtime.diagnosis.report import format_report
from gpuperf_rewrite.runtime.schema import OK_STATUSES
from gpuperf_rewrite.validate.run.profiling import profile_runner
from gpuperf_rewrite.validate.run.runs import run_request


@click.command("profile", context_settings={"ignore_unknown_options": True})
@click.argument("script", required=False)
@module_option
@click.option("--steps", type=STEPS, default=50, show_default=True,
              help="Optimizer steps to measure after warmup.")
@click.option("--warmup", type=WARMUP, default=10, show_default=True,
              help="Optimizer steps to run before measuring (compilation, allocator warm-up).")
@click.option("--timeout", type=FiniteFloat(0, MAX_SECONDS, min_open=True), default=600, show_default=True,
              help="Seconds before the script's process group is stopped.")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed for random, numpy and torch before the script starts.")
@json_option("The run's JSON document (docs/runtime.md).")
@html_option("the report")
@click.option("--trace", "trace_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write a torch.profiler trace of a few steps after the measured window here.")
@click.option("--python", "python", type=str, default=None,
              help="Interpreter to run the script with (default: this one).")
@launcher_options
@click.option("--precision-check", is_flag=True,
              help="When the run uses float16/bfloat16 autocast or a GradScaler, run it again with both "
                   "off and compare the losses step by step (a second run).")
@click.option("--probe-batch", is_flag=True,
              help="Re-run with the --batch-arg argument doubled until memory, --probe-time or "
                   "--probe-max-batch stops it; report steps/s and samples/s per size (advice only).")
@click.option("--batch-arg", default="--batch-size", show_default=True,
              help="The script's batch-size argument for --probe-batch (give its start value after --).")
@click.option("--probe-time", type=FiniteFloat(1, MAX_SECONDS), default=300, show_default=True,
              help="Seconds for all --probe-batch runs together.")
@click.option("--probe-max-batch", type=click.IntRange(1, 2**31 - 1), default=65536, show_default=True,
              help="Largest value --probe-batch tries.")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def profile(ctx: click.Context, script: str | None, module: str | None, steps: int, warmup: int,
            timeout: float, seed: int, json_path: str | None, html_path: str | None, trace_dir: Path | None, python: str | None,
            launcher: str | None, nproc_per_node: int, launcher_args: str | None, precision_check: bool,
            probe_batch: bool, batch_arg: str, probe_time: float, probe_max_batch: int,
            script_args: tuple[str, ...]) -> None:
    """Measure SCRIPT's (or -m MODULE's) training steps: throughput, where the time goes, what to
    fix first.

    Arguments after `--` are passed to the script unchanged. SCRIPT runs where it is, as
    `python SCRIPT` would: what it writes (checkpoints, logs) lands in your files, as its own
    doing. (`ab`, `--apply`, `baseline` and `regress` run it in a scratch copy of the checkout
    instead, where no write of the script reaches your files.)
    """
    path, mod, script_args = script_entry(ctx, script, module, script_args)
    launch = launch_from_options({"launcher": launcher, "nproc_per_node": nproc_per_node,
                                  "launcher_args": launcher_args})
    if not probe_batch:
        for name in ("batch_arg", "probe_time", "probe_max_batch"):
            if given(ctx, name):
                raise click.UsageError(f"--{name.replace('_', '-')} needs --probe-batch")
    check_html(html_path)
    request = run_request(path, script_args, steps=steps, warmup=warmup, timeout=timeout, seed=seed,
                          python=python, trace_dir=None if trace_dir is None else str(trace_dir),
                          module=mod[0] if mod else None, **launch)
    doc: dict[str, Any] = dict(profile_runner(request))
    if precision_check:
        from gpuperf_rewrite.validate.run.precision import precision_check as check

        doc["amp"]["precision_check"] = check(doc, request, run=profile_runner)  # type: ignore[arg-type]
        doc["diagnosis"] = diagnose(doc) if doc.get("measured_steps") else []
    to_stderr = json_path == "-"  # stdout carries only the JSON with `--json -`
    click.echo(format_report(doc), err=to_stderr)
    _findings(doc, path, to_stderr)
    if probe_batch:
        from gpuperf_rewrite.validate.run.batchprobe import format_probe, probe

        doc["batch_probe"] = probe(request, doc, arg=batch_arg, time_limit=probe_time,  # type: ignore[arg-type]
                                   max_size=probe_max_batch, run=profile_runner)
        click.echo("", err=to_stderr)
        click.echo(format_probe(doc["batch_probe"]), err=to_stderr)
    if json_path is not None:
        write_json(json_path, doc)
    if html_path is not None:
        write_html(html_path, doc)
    raise SystemExit(0 if doc["status"] in OK_STATUSES else 1)


def _findings(doc: dict[str, Any], path: str, to_stderr: bool) -> None:
    """The lint's findings on the script and its modules merged with what the run saw
    (docs/runtime.md, "Findings from the run"): printed in the lint's format, kept in the JSON."""
    from gpuperf_rewrite.validate.run.findingsmerge import format_findings, profile_findings

    kept, dropped = profile_findings(doc, path, warn=lambda m: click.echo(f"warning: {m}", err=True))
    doc["findings"] = [f.to_json() for f in kept]
    doc["findings_dropped"] = dropped
    text = format_findings(kept, dropped)
    if text:
        click.echo("", err=to_stderr)
        click.echo(text, err=to_stderr)
