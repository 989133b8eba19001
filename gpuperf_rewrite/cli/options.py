"""Option groups shared by several commands, and the A/B configuration built from them."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import click

F = Callable[..., Any]

# ctx.meta key under which the group keeps the arguments after `--` (passed to the script).
SCRIPT_ARGS_KEY = "gpuperf.script_args"

# Option names (click parameter names) of each group: `check` uses them to refuse options that
# mean nothing without --apply.
MEASUREMENT = ("runs", "max_runs", "steps", "warmup", "timeout", "seed")
DECISION = ("alpha", "min_speedup", "loss_rtol", "allow_unchecked_loss")
LAUNCH = ("launcher", "nproc_per_node", "launcher_args")


class FiniteFloat(click.FloatRange):
    """A ``click.FloatRange`` that also refuses nan and inf (nan compares false with every bound,
    so a plain FloatRange lets it through: ``--timeout nan`` would disable the timeout)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        import math

        number = click.types.FloatParamType.convert(self, value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


# Ranges shared by every command, so that no value reaches the code that would overflow on it.
MAX_RUNS = 1000  # per side: more would take days and only grows the statistics' memory
MAX_STEPS = 1_000_000
MAX_SECONDS = 30 * 24 * 3600  # timeouts and budgets: 30 days
SEED_MAX = 2**31 - 1  # seed + run index + 1000 must stay a valid PYTHONHASHSEED / numpy seed (< 2**32)
RUNS = click.IntRange(2, MAX_RUNS)
STEPS = click.IntRange(1, MAX_STEPS)
WARMUP = click.IntRange(0, MAX_STEPS)
SEED = click.IntRange(0, SEED_MAX)
TIMEOUT = FiniteFloat(1, MAX_SECONDS)
ALPHA = FiniteFloat(0, 1, min_open=True, max_open=True)


def _stack(f: F, opts: list[Callable[[F], F]]) -> F:
    for opt in reversed(opts):
        f = opt(f)
    return f


def measurement_options(f: F) -> F:
    """How each side is run: shared by ab, --apply, baseline and regress (None = ABConfig's default)."""
    return _stack(f, [
        click.option("--runs", type=RUNS, default=None,
                     help="Planned runs per side [default: 10]; fewer when decisive early."),
        click.option("--max-runs", type=click.IntRange(2, 2 * MAX_RUNS), default=None,
                     help="Most runs per side when the result is borderline, at least --runs [default: 2x --runs]."),
        click.option("--steps", type=STEPS, default=None,
                     help="Measured optimizer steps per run [default: 30]."),
        click.option("--warmup", type=WARMUP, default=None,
                     help="Warmup steps per run, not measured [default: 5]."),
        click.option("--timeout", type=TIMEOUT, default=None,
                     help="Seconds before a run is killed [default: 600]."),
        click.option("--seed", type=SEED, default=None,
                     help="Base seed: pair k of runs uses seed+k on both sides; also orders the pairs [default: 0]."),
    ])


def launcher_options(f: F) -> F:
    """``--launcher``, ``--nproc-per-node``, ``--launcher-args``: the same on profile, ab, --apply,
    baseline and regress (checked by :func:`launch_from_options`)."""
    from gpuperf_rewrite.validate.run.launchers import LAUNCHERS

    return _stack(f, [
        click.option("--launcher", type=click.Choice(LAUNCHERS), default=None,
                     help="Run under a launcher (torchrun, or `accelerate launch`); every rank is measured."),
        click.option("--nproc-per-node", type=click.IntRange(1, 1024), default=1, show_default=True,
                     help="Processes per node for --launcher (accelerate's --num_processes)."),
        click.option("--launcher-args", default=None, metavar="ARGS",
                     help="Options for the launcher, passed through as one string, e.g. "
                          "--launcher-args='--config_file acc.yaml --mixed_precision bf16'."),
    ])


def launch_from_options(opts: Mapping[str, Any]) -> dict[str, Any]:
    """The launcher options as ``ABConfig``/``RunRequest`` fields; UsageError on a bad combination."""
    from gpuperf_rewrite.validate.run.launchers import launch_problem, split_launcher_args

    launcher, nproc = opts.get("launcher"), opts.get("nproc_per_node") or 1
    try:
        args = split_launcher_args(opts.get("launcher_args"))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    why = launch_problem(launcher, nproc, args)
    if why:
        raise click.UsageError(why)
    return {"launcher": launcher, "nproc_per_node": nproc, "launcher_args": args}


def decision_options(f: F) -> F:
    """How the A/B is decided: ab and --apply."""
    return _stack(f, [
        click.option("--alpha", type=ALPHA, default=None,
                     help="Significance level [default: 0.05]."),
        click.option("--min-speedup", type=FiniteFloat(1, 100), default=None,
                     help="Faster means the 95% CI's lower end of the speedup is at least this [default: 1.02]."),
        click.option("--loss-rtol", type=FiniteFloat(min=0), default=None,
                     help="Relative tolerance on the end-of-window loss, on top of 3 seed-to-seed sd "
                          "[default: 0.02, 0.10 for bf16/fp16 rewrites]."),
        click.option("--allow-unchecked-loss", is_flag=True, default=None,
                     help="Accept `faster` when no loss could be compared (otherwise the verdict is `unchecked`)."),
    ])


def json_option(help_text: str) -> Callable[[F], F]:
    """``--json PATH``: the same on profile, ab, baseline and regress (``-`` for stdout)."""
    return click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), default=None,
                        metavar="PATH", help=f"{help_text} Write it to PATH ('-' for stdout).")


def write_json(path: str, doc: Any) -> None:
    """Write ``doc`` as JSON to ``path`` atomically (readers never see half a file), or to stdout for ``-``."""
    import json

    from gpuperf_rewrite.lint.sourceio import WriteRefused, write_output

    text = json.dumps(doc, indent=2, default=str) + "\n"
    if path == "-":
        click.echo(text, nl=False)
        return
    try:
        write_output(path, text.encode())
    except (WriteRefused, OSError) as exc:
        raise click.ClickException(f"cannot write {path}: {exc}") from exc


def html_option(what: str) -> Callable[[F], F]:
    """``--html PATH``: the same on profile, ab, --apply, baseline and regress."""
    return click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None, metavar="PATH",
                        help=f"Also write {what} as one self-contained HTML page with charts (needs the "
                             "report extra: pip install 'gpuperf-rewrite[report]').")


def check_html(html_path: str | None) -> None:
    """Before anything is measured: --html needs matplotlib (exit 2 naming the pip command)."""
    if html_path is None:
        return
    from gpuperf_rewrite.report.charts import pyplot
    from gpuperf_rewrite.report.errors import ReportError

    try:
        pyplot()
    except ReportError as exc:
        click.echo(f"error: --html: {exc}", err=True)
        raise SystemExit(2) from None


def write_html(path: str, doc: Any, *, label: str = "--html: ") -> None:
    """Render ``doc`` (a command's JSON document) to ``path``; a failure is an error (exit 2)
    that loses nothing the command already wrote."""
    from gpuperf_rewrite.report.errors import ReportError
    from gpuperf_rewrite.report.render import write_html as write_page

    try:
        size = write_page(path, doc)
    except ReportError as exc:
        click.echo(f"error: {label}{exc}", err=True)
        raise SystemExit(2) from None
    click.echo(f"Wrote {path} ({size / 1024:,.0f} KiB)", err=True)


def config_from_options(opts: Mapping[str, Any], *, decides: bool = False) -> Any:
    """An ``ABConfig`` from option values (None means the default); UsageError when inconsistent,
    or, with ``decides`` (an A/B verdict), when the configuration can never reach one."""
    from gpuperf_rewrite.validate.judge.abtest import ABConfig
    from gpuperf_rewrite.validate.judge.stats import undecidable_reason

    kw: dict[str, Any] = {}
    for name in (*MEASUREMENT, *DECISION):
        if opts.get(name) is not None:
            kw[name] = opts[name]
    if "runs" in kw and "max_runs" in kw and kw["max_runs"] < kw["runs"]:
        raise click.UsageError(f"--max-runs {kw['max_runs']} is below --runs {kw['runs']}: --max-runs is "
                               f"the most runs per side, --runs the planned number")
    if "runs" in kw and "max_runs" not in kw:
        kw["max_runs"] = 2 * kw["runs"]  # room to settle a borderline result
    if "max_runs" in kw and "runs" not in kw:
        kw["runs"] = min(ABConfig.runs, kw["max_runs"])  # the default plan fits within the user's cap
    kw.update(launch_from_options(opts))
    try:
        cfg = ABConfig(**kw)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    why = undecidable_reason(cfg) if decides else None
    if why:
        raise click.UsageError(why)
    return cfg


class Duration(click.ParamType):
    """Seconds, from ``900``, ``90s``, ``15m`` or ``1h30m`` (``--budget``)."""

    name = "duration"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        from gpuperf_rewrite.validate.plan import parse_duration

        try:
            seconds = parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if not seconds <= MAX_SECONDS:  # inf too: "9" * 400 seconds parses as inf
            self.fail(f"{value!r} is more than {MAX_SECONDS // 86400} days", param, ctx)
        return seconds


def given(ctx: click.Context, name: str) -> bool:
    """True when the user set option ``name`` (on the command line or through the environment)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source not in (click.core.ParameterSource.DEFAULT,
                                                  click.core.ParameterSource.DEFAULT_MAP)


def module_option(f: F) -> F:
    """``-m MODULE``: run a module as ``python -m MODULE`` does (package-relative imports work)."""
    return click.option("-m", "--module", default=None, metavar="MODULE",
                        help="Run MODULE as `python -m MODULE` does, from the current directory (or "
                             "PYTHONPATH), instead of a SCRIPT; all arguments then go to the module.")(f)


def existing_script(ctx: click.Context, name: str, value: str | None) -> str:
    """``value`` checked as the SCRIPT argument would have been (an existing file)."""
    param = next(p for p in ctx.command.params if p.name == name)
    if value is None:
        raise click.UsageError(f"Missing argument '{name.upper()}' (or -m MODULE).", ctx)
    return str(click.Path(exists=True, dir_okay=False).convert(value, param, ctx))


def resolve_module_option(module: str) -> Any:
    """The :class:`~gpuperf_rewrite.validate.run.entrypoint.EntryPoint` of ``-m MODULE``; UsageError if none."""
    from gpuperf_rewrite.validate.run.entrypoint import EntryPointError, resolve_module

    try:
        return resolve_module(module)
    except EntryPointError as exc:
        raise click.UsageError(str(exc)) from exc


def script_entry(ctx: click.Context, script: str | None, module: str | None,
                 script_args: tuple[str, ...]) -> tuple[str, tuple[str, Any] | None, tuple[str, ...]]:
    """(the file to run, (module, its sys.path root) or None, the script's arguments). With -m,
    every positional argument is the module's, as after ``python -m MODULE``."""
    if module is None:
        return existing_script(ctx, "script", script), None, tuple(script_args)
    ep = resolve_module_option(module)
    return str(ep.path), (ep.module, ep.root), (*(() if script is None else (script,)), *script_args)
