"""``rules`` (the catalogue) and ``explain CODE`` (one rule's documentation)."""

from __future__ import annotations

import click


@click.command("rules")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_cmd(output_format: str) -> None:
    """List every rule: code, name, fix safety, where it gains, default on/off."""
    import json

    from gpuperf_rewrite.lint.docgen import rule_record
    from gpuperf_rewrite.lint.registry import all_rules

    rows = [rule_record(r) for r in all_rules().values()]
    if output_format == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'code':<6} {'name':<32} {'fix':<7} {'gains':<6} {'default':<8} summary")
    for row in rows:
        click.echo(f"{row['code']:<6} {row['name']:<32} {row['fix']:<7} {row['gains_on']:<6} "
                   f"{'on' if row['default'] else 'off':<8} {row['summary']}")


@click.command("explain")
@click.argument("rule")
def explain(rule: str) -> None:
    """Print a rule's documentation (by code, e.g. GP101, or by name)."""
    from gpuperf_rewrite.lint.docgen import rule_markdown
    from gpuperf_rewrite.lint.registry import rule_by_name_or_code

    cls = rule_by_name_or_code(rule)
    if cls is None:
        raise click.UsageError(f"unknown rule {rule!r}; `gpuperf-rewrite rules` lists them")
    click.echo(rule_markdown(cls))
