"""``gpuperf-rewrite report RESULT.json [-o page.html]``: the HTML page of a saved JSON document."""

from __future__ import annotations

from pathlib import Path

import click

from gpuperf_rewrite.cli.options import check_html, write_html


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("result", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, metavar="PATH",
              help="Where to write the page [default: RESULT with .html instead of .json].")
def report(result: str, output: str | None) -> None:
    """Render RESULT (the --json output of profile, ab, --apply, baseline, regress or
    regress --history, or a GPU-proof summary) as one self-contained HTML page with charts.

    Needs the report extra: pip install 'gpuperf-rewrite[report]'. Exit 2 when RESULT is not such
    a document.
    """
    from gpuperf_rewrite.report.errors import ReportError
    from gpuperf_rewrite.report.render import load, loads

    check_html(output or result)
    try:
        doc = loads(click.get_text_stream("stdin").read()) if result == "-" else load(result)
    except ReportError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    if output is None:
        if result == "-":
            raise click.UsageError("-o PATH is needed when RESULT is read from stdin")
        output = str(Path(result).with_suffix(".html"))
    if result != "-" and Path(output).resolve() == Path(result).resolve():
        raise click.UsageError(f"the page would replace {result} itself: give -o PATH")
    write_html(output, doc, label="")
