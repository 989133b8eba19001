"""The rule API: what a rule declares, what it reports, and how a fix is expressed.

Rules are pure: they receive a parsed module wrapped in a :class:`RuleContext` and yield
:class:`Finding` objects. Nothing here does I/O or knows about the engine that drives it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Union

import libcst as cst

if TYPE_CHECKING:
    from .analysis.syntax.glance import Glance
    from .analysis.syntax.context import RuleContext

FixSafety = Literal["safe", "unsafe", "none"]
Severity = Literal["error", "warning", "info"]
GainsOn = Literal["any", "cuda"]


# --------------------------------------------------------------------------------------------
# Edits: the building blocks of a fix. Nodes are identified by identity in the parsed module.
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Replace:
    """Replace ``node`` by ``new`` (a node, a ``FlattenSentinel`` or ``RemoveFromParent()``)."""

    node: cst.CSTNode
    new: Any


@dataclasses.dataclass(frozen=True)
class InsertBefore:
    """Insert statements before the statement ``stmt`` (same block, same indentation)."""

    stmt: cst.BaseStatement
    new: tuple[cst.BaseStatement, ...]


@dataclasses.dataclass(frozen=True)
class InsertAfter:
    """Insert statements after the statement ``stmt``."""

    stmt: cst.BaseStatement
    new: tuple[cst.BaseStatement, ...]


@dataclasses.dataclass(frozen=True)
class AddImport:
    """Make sure ``import module`` (or ``from module import name``) exists, once, at the top."""

    module: str
    name: str | None = None
    asname: str | None = None


Edit = Union[Replace, InsertBefore, InsertAfter, AddImport]


@dataclasses.dataclass(frozen=True)
class Fix:
    description: str
    edits: tuple[Edit, ...]
    safety: Literal["safe", "unsafe"] = "safe"


@dataclasses.dataclass(frozen=True)
class NoFix:
    """Why a finding that could have a fix gets none: what a fix builder returns instead of an
    edit or a fix. Reporters show it after the message, one way (``lint.diagnostics.Diagnostic.text``)."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Finding:
    """One problem at one node. ``code`` is filled in by the engine from the rule.
    ``no_fix_reason``: why there is no fix, when the rule says (never with a fix)."""

    node: cst.CSTNode
    message: str
    fix: Fix | None = None
    severity: Severity | None = None  # None: the rule's default
    no_fix_reason: str | None = None

    @classmethod
    def of(cls, node: cst.CSTNode, message: str, outcome: Fix | NoFix | None) -> Finding:
        """A finding with a fix builder's outcome: the fix, why there is none, or neither."""
        if isinstance(outcome, NoFix):
            return cls(node, message, no_fix_reason=outcome.reason)
        return cls(node, message, outcome)


# --------------------------------------------------------------------------------------------
# Embedded examples, turned into tests by tests/rules/test_rule_examples.py.
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Valid:
    """Code on which the rule must report nothing."""

    code: str
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Invalid:
    """Code on which the rule must report; ``fixed`` is the expected source after its fixes
    (unsafe included) or ``None`` when the rule offers no fix here. ``count`` is the expected
    number of findings when given."""

    code: str
    fixed: str | None = None
    count: int | None = None
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def dedent(text: str) -> str:
    """Examples are written indented inside the class body; strip the common indentation."""
    return textwrap.dedent(text).lstrip("\n")


# --------------------------------------------------------------------------------------------
# The rule base class.
# --------------------------------------------------------------------------------------------
_CODE_RE = re.compile(r"^GP\d{3}$")


class Rule:
    """Base class of every rule. Subclasses set the metadata and implement :meth:`check`.

    The metadata is the rule's documentation (``docs/rules.md``, ``explain``, ``rules --output-format
    json``), as ruff documents a rule: what it finds, why it is slow, the fix and its safety (and
    why), where the gain exists, known limitations and references."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line: what it finds
    rationale: ClassVar[str]  # why it is slow (or wrong)
    fix_description: ClassVar[str] = "No automatic fix."
    # The least safe fix the rule can emit: "safe" when every fix is, "unsafe" when some or all
    # may change numerics or behaviour, "none" when it only reports. tests check it against the
    # fixes the examples produce.
    fix_safety: ClassVar[FixSafety] = "none"
    # Why (and when) a fix is unsafe: what may change. Required exactly when fix_safety is "unsafe".
    fix_safety_reason: ClassVar[str] = ""
    # Where the speed or memory gain exists: "cuda" when it needs a CUDA device (on CPU the fix
    # is a no-op or costs time), "any" when it holds on every device. Each rule says why.
    gains_on: ClassVar[GainsOn]
    # True when the gain exists only in a job of several processes (DDP ranks): in one process the
    # code the fix changes does not run or has nothing to act on, so a single-process A/B cannot
    # show it (``--apply`` lists such fixes as not measurable without a multi-process launcher).
    gains_only_with_ranks: ClassVar[bool] = False
    # Known false negatives and false positives, one sentence each.
    limitations: ClassVar[tuple[str, ...]] = ()
    # What the rule follows into the user's other modules (issue 27: the facts the engine passes
    # in ``RuleContext.project``) and what it does not.
    across_modules: ClassVar[str] = (
        "Reads the checked file only: calls into the user's other modules are not followed.")
    # https URLs that document the problem and the fix (PyTorch documentation first).
    references: ClassVar[tuple[str, ...]] = ()
    severity: ClassVar[Severity] = "warning"
    default_enabled: ClassVar[bool] = True
    # Source prefilter: the rule can only fire when one of these substrings occurs.
    keywords: ClassVar[tuple[str, ...]] = ("torch",)
    # File prefilter, checked with ``keywords`` and after the torch gate (the engine parses no file
    # for which ``torch_roots.may_import_torch`` is false: every rule reports nothing there, see
    # ``__init_subclass__``): the rule can only fire in a file that mentions one of these. None:
    # ``keywords`` alone decide.
    file_markers: ClassVar[tuple[str, ...] | None] = None
    # Option name -> default value (``[tool.gpuperf.rules.CODE]``; lint/config.py checks the
    # configured value's type against the default's), and option name -> what it does.
    options: ClassVar[Mapping[str, Any]] = {}
    option_descriptions: ClassVar[Mapping[str, str]] = {}
    # One to three teaching examples (docs/rules.md shows the first valid and invalid one); the
    # regression cases live in tests/rules/fixtures/<CODE>/ with reviewed snapshots.
    examples: ClassVar[Sequence[Valid | Invalid]] = ()
    # The training frameworks (and versions) whose configuration the rule reads, and the examples
    # about them (also in ``examples``); docs/rules.md shows the first framework example apart.
    frameworks: ClassVar[tuple[str, ...]] = ()
    framework_examples: ClassVar[Sequence[Valid | Invalid]] = ()

    def check(self, ctx: RuleContext) -> Iterator[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def may_report(cls, glance: Glance) -> bool:
        """A cheap precondition of any finding, asked before LibCST parses the file (text and
        ``ast`` tree: ``syntax.glance``): False only when ``check`` would report nothing there, so
        the engine need not parse a file on which every selected rule says False. True: no
        precondition stated (the default)."""
        return True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every rule's ``check`` reports nothing on a file that imports neither torch nor a
        torch framework (``RuleContext.uses_torch``): one gate for all rules, so no rule can
        mistake a user's own ``DataLoader``/``Adam`` class for torch's."""
        super().__init_subclass__(**kwargs)
        check = cls.__dict__.get("check")
        if check is not None and not getattr(check, "_torch_gated", False):
            @functools.wraps(check)
            def gated(self: Rule, ctx: RuleContext) -> Iterator[Finding]:
                if ctx.uses_torch:
                    yield from check(self, ctx)
            gated._torch_gated = True  # type: ignore[attr-defined]
            cls.check = gated  # type: ignore[method-assign]

    @classmethod
    def validate_metadata(cls) -> None:
        """Raise ValueError naming the rule when its metadata is incomplete or inconsistent."""
        if not _CODE_RE.match(cls.code):
            raise ValueError(f"{cls.__name__}: bad rule code {cls.code!r}")
        for attr in ("name", "summary", "rationale"):
            if not getattr(cls, attr, ""):
                raise ValueError(f"{cls.code}: missing {attr}")
        if cls.fix_safety not in ("safe", "unsafe", "none"):
            raise ValueError(f"{cls.code}: bad fix_safety {cls.fix_safety!r}")
        if bool(cls.fix_safety_reason.strip()) != (cls.fix_safety == "unsafe"):
            raise ValueError(f"{cls.code}: fix_safety_reason is required exactly when fix_safety is 'unsafe'")
        if getattr(cls, "gains_on", None) not in ("any", "cuda"):
            raise ValueError(f"{cls.code}: gains_on must be 'any' or 'cuda'")
        if not isinstance(cls.gains_only_with_ranks, bool):
            raise ValueError(f"{cls.code}: gains_only_with_ranks must be True or False")
        if not isinstance(cls.across_modules, str) or not cls.across_modules.strip():
            raise ValueError(f"{cls.code}: across_modules must say what the rule follows across modules")
        for attr in ("limitations", "references"):
            value = getattr(cls, attr)
            if not isinstance(value, tuple) or not value or \
                    not all(isinstance(v, str) and v.strip() for v in value):
                raise ValueError(f"{cls.code}: {attr} must be a non-empty tuple of non-empty strings")
        if not all(url.startswith("https://") for url in cls.references):
            raise ValueError(f"{cls.code}: references must be https URLs")
        if set(cls.option_descriptions) != set(cls.options) or \
                not all(isinstance(d, str) and d.strip() for d in cls.option_descriptions.values()):
            raise ValueError(f"{cls.code}: every option needs a description in option_descriptions")
