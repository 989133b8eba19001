"""The lint engine's fixes as ``--apply``'s rewriters: one per file, from the configuration that
applies to it, with the facts of the modules it imports (lint/project.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from gpuperf_rewrite.validate.changeset import Rewriter, RewriterFor, no_fixes

if TYPE_CHECKING:
    from gpuperf_rewrite.lint.api import Settings
    from gpuperf_rewrite.lint.engine import RuleSet
    from gpuperf_rewrite.lint.fixes import FixMode

Echo = Callable[..., None]


class ApplyError(Exception):
    """Usage problems and refusals: exit 2, nothing changed."""


def engine_rewriter(path: str, ruleset: RuleSet, mode: FixMode, echo: Echo, entry: str | None = None) -> Rewriter:
    from gpuperf_rewrite.lint.engine import check_source

    def rewrite(data: bytes, codes: Sequence[str] | None) -> tuple[bytes | None, dict[str, int]]:
        # + its imports' facts, and the entry script that runs it (whose guard the loader fixes ask)
        res = check_source(data, path, ruleset, mode, fix_codes=codes, fs_path=path, entry=entry)
        if res.error:  # what `check` reports and exits 2 on (E999...), never "no fixes to apply"
            lines = [f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}" for d in res.diagnostics]
            raise ApplyError("\n".join(lines) + "\nthe file cannot be checked, so --apply cannot rewrite it; "
                                                 "nothing was changed")
        for w in res.warnings:
            echo(f"warning: {w}", err=True)
        return res.fixed, dict(res.applied)

    return rewrite


def engine_rewriters(settings: Settings | None, level: FixMode, echo: Echo) -> RewriterFor:
    """Each file's rules and fixes from the configuration that applies to it. A file's fixes
    depend on its bytes, its settings, the facts of the modules *it* imports and, for a module,
    on the entry script that runs it (DataLoader workers are safe under spawn when the *entry*
    guards its work: issue 34); the change set rewrites a module only where its fixes are the
    same for every entry point that runs it."""
    if settings is None:
        from gpuperf_rewrite.lint.api import SettingsError, load_settings

        try:
            settings = load_settings()
        except SettingsError as exc:
            raise ApplyError(str(exc)) from exc
    chosen = settings

    def rewriter_for(file: Path, entry: Path) -> Rewriter:
        if file != entry and chosen.is_excluded(file):  # a module the configuration excludes: no fixes
            return no_fixes
        return engine_rewriter(str(file), chosen.ruleset_for(file.resolve()), level, echo,
                               None if file == entry else str(entry))

    return rewriter_for
