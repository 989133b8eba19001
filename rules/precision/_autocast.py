"""What GP301 needs to know about autocast in a file: whether the script already uses it (a
call, ``functools.partial(torch.autocast, ...)``, ``nullcontext() if ... else autocast(...)``,
a context factory handed to the loop), in which dtype, and which forward region a fix may wrap
(the model's forward inside, no op that autocast refuses)."""

from __future__ import annotations

import dataclasses
import re

import libcst as cst

from .._api import Fix, InsertAfter, InsertBefore, NoFix, Replace
from ..analysis.facts.script_facts import (
    assignments_in, body_of, device_name_at, device_type_expr, model_names_everywhere, names_in, param_names,
    trained_models,
)
from ..analysis.fixes.edits import torch_import, torch_name
from ..analysis.model.training import TrainingAnalysis
from ..analysis.syntax.calls import dotted_name, get_arg, literal_value, method_call
from ..analysis.syntax.context import RuleContext
from ..analysis.syntax.project import project_calls
from ..analysis.syntax.torch_names import AUTOCAST, GRAD_SCALERS, NO_GRAD
from ..analysis.syntax.tree import walk

FP16 = frozenset({"torch.float16", "torch.half"})
_FORBIDDEN_IN_FORWARD = ("backward", "step", "zero_grad")
_PARTIAL = frozenset({"functools.partial"})
# A ``with`` item named like an autocast context (``with self.amp_ctx:``, ``with autocast_ctx():``
# for a factory passed in as a parameter or built in another module).
_AUTOCAST_LIKE = re.compile(r"autocast|(^|_)amp(_|$)|mixed_precision|precision_ctx", re.IGNORECASE)
# CUDA autocast raises on these ("unsafe to autocast"), whatever the dtype.
BCE_NAMES = ("BCELoss", "binary_cross_entropy")

# A parameter named like a loss function is not the forward a region must start at.
_LOSS_LIKE = re.compile(r"loss|criterion|(^|_)crit(_|$)", re.IGNORECASE)
_NO_DEVICE = ("no device variable (`device = torch.device(...)`, `.to(device)`) is visible there to give "
              "autocast its device_type")
_BCE_WHY = ("CUDA autocast refuses binary_cross_entropy / nn.BCELoss (it raises, whatever the dtype): "
            "compute the loss on logits with BCEWithLogitsLoss (drop the final Sigmoid) before adding autocast")


@dataclasses.dataclass(frozen=True)
class AutocastUse:
    node: cst.CSTNode  # where to report
    func: cst.BaseExpression  # the autocast callable
    args: tuple[cst.Arg, ...]  # the arguments it is (or will be) called with, when known


def autocast_uses(ctx: RuleContext) -> list[AutocastUse]:
    """Every reference to an autocast API: calls, ``partial(autocast, ...)`` (with the bound
    arguments), and bare references (``amp = torch.autocast if args.amp else nullcontext``)."""
    def compute(c: RuleContext) -> list[AutocastUse]:
        out: list[AutocastUse] = []
        aliases = {local for local, full in c.import_aliases.items() if full.endswith("autocast")}
        candidates = [n for n in c.nodes(cst.Attribute) if n.attr.value == "autocast"] + \
            [n for n in c.nodes(cst.Name) if n.value in aliases]
        for node in candidates:
            if not c.matches(node, AUTOCAST):
                continue
            parent = c.parent(node)
            if isinstance(parent, cst.Call) and parent.func is node:
                out.append(AutocastUse(parent, node, tuple(parent.args)))
                continue
            arg = parent if isinstance(parent, cst.Arg) else None
            call = c.parent(arg) if arg is not None else None
            if isinstance(call, cst.Call) and c.matches(call.func, _PARTIAL) and call.args and call.args[0] is arg:
                out.append(AutocastUse(call, node, tuple(call.args[1:])))
            elif isinstance(parent, cst.Attribute) and parent.value is node:
                continue  # ``torch.autocast.__enter__``: not a use of its own
            else:
                out.append(AutocastUse(node, node, ()))
        return out
    return ctx.fact(compute)


def autocast_like_context(ctx: RuleContext) -> bool:
    """A ``with`` item that reads like an autocast context made elsewhere (a parameter, another
    module): ``with amp_ctx:``, ``with self.autocast():``."""
    for item in ctx.nodes(cst.WithItem):
        expr = item.item.func if isinstance(item.item, cst.Call) else item.item
        name = dotted_name(expr)
        if name is not None and _AUTOCAST_LIKE.search(name.rsplit(".", 1)[-1]):
            return True
    return False


def autocast_is_fp16(ctx: RuleContext, use: AutocastUse) -> bool:
    """Does this autocast run in float16 (float16 needs a GradScaler)? Only calls and partials
    whose arguments are known say yes."""
    if isinstance(use.node, (cst.Name, cst.Attribute)):
        return False  # a bare reference: the call's arguments are elsewhere
    call = cst.Call(func=use.func, args=use.args)
    enabled = get_arg(call, "enabled")
    if enabled is not None and literal_value(enabled.value) is False:
        return False
    dtype = get_arg(call, "dtype")
    if ctx.matches(use.func, {"torch.cuda.amp.autocast"}):
        return dtype is None or ctx.matches(dtype.value, FP16)
    if ctx.matches(use.func, {"torch.cpu.amp.autocast"}):
        return dtype is not None and ctx.matches(dtype.value, FP16)
    if dtype is None:
        dtype = get_arg(call, "dtype", 1)
    if dtype is not None:
        return ctx.matches(dtype.value, FP16)
    device = get_arg(call, "device_type", 0)
    # Without a dtype autocast picks float16 on CUDA (bfloat16 only on CPU).
    return device is None or literal_value(device.value) != "cpu"


def uses_bce(ctx: RuleContext) -> cst.CSTNode | None:
    """A use of ``binary_cross_entropy``/``BCELoss`` anywhere in the file (a loss helper, a
    criterion attribute, a model that computes its own loss): CUDA autocast raises on it."""
    for node in ctx.nodes(cst.Name):
        if node.value in BCE_NAMES:
            return node
    return None


# ---- the forward region ----------------------------------------------------------------------
def _assigned_names(stmt: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    out |= names_in(t.target) if not isinstance(t.target, cst.Attribute) else set()
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and isinstance(small.target, cst.Name):
                out.add(small.target.value)
    return out


def _model_calls(ctx: RuleContext, node: cst.CSTNode) -> list[cst.Call]:
    models = model_names_everywhere(ctx)
    return [n for n in walk(node, into_nested=True, include_self=True)
            if isinstance(n, cst.Call) and dotted_name(n.func) in models]


def _parameter_forwards(ctx: RuleContext, node: cst.CSTNode) -> list[cst.Call]:
    """Calls of a parameter of the enclosing function, never rebound there and not named like a
    loss (``out = model(x)`` in ``def train_one_epoch(model, loader, optimizer, device)``): the
    caller, maybe in another module, passes the model in."""
    fn = body_of(ctx, node)
    if fn is None:
        return []
    params = {p for p in param_names(fn) if p not in ("self", "cls") and not _LOSS_LIKE.search(p)}
    return [n for n in walk(node, into_nested=True, include_self=True)
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in params and
            not assignments_in(ctx, fn, n.func.value)]


def _loss_text(ctx: RuleContext, backward: cst.Call) -> str:
    """The loss a backward differentiates: ``loss`` for ``loss.backward()`` and for
    ``scaler.scale(loss).backward()``."""
    assert isinstance(backward.func, cst.Attribute)
    receiver = backward.func.value
    if isinstance(receiver, cst.Call) and receiver.args:
        receiver = receiver.args[0].value
    return ctx.code_for(receiver)


def forward_region(ctx: RuleContext, backward: cst.Call) -> tuple[list[cst.BaseStatement], int, int] | str:
    """The statements of the step from the model call (a model of this file, or a parameter the
    caller passes it in) through the loss computation, which end before the ``.backward()``
    statement: ``(block statements, first, last)``; else why no such region is there."""
    stmt = ctx.statement_of(backward)
    block = ctx.parent(stmt) if stmt is not None else None
    if not isinstance(backward.func, cst.Attribute):
        return (f"the backward runs inside `{ctx.code_for(backward.func)}(...)`, a helper: the statements "
                "that compute its loss are not `loss.backward()`'s own block that a fix could wrap")
    if not isinstance(block, cst.IndentedBlock):
        return "the backward shares its line with the loop or `if` header: there is no block of statements to wrap"
    stmts = list(block.body)
    index = next(i for i, s in enumerate(stmts) if s is stmt)
    wanted = names_in(backward.func.value)
    last = next((i for i in range(index - 1, -1, -1) if _assigned_names(stmts[i]) & wanted), None)
    if last is None:
        loss = _loss_text(ctx, backward)
        if not isinstance(cst.parse_expression(loss), cst.Name):
            return (f"the loss `{loss}` is computed inside the backward's own statement: the fix wraps statements, so "
                    "it needs `loss = ...` on a line of its own before `loss.backward()`")
        return (f"`{loss}` is not computed by a statement of the backward's own block, before it, that one "
                "`with torch.autocast(...)` could wrap")
    first = None
    top = 0  # the first statement a region could start at
    for i in range(last, -1, -1):
        s = stmts[i]
        if not isinstance(s, cst.SimpleStatementLine) or any(
            method_call(n, *_FORBIDDEN_IN_FORWARD) or isinstance(n, (cst.Return, cst.Yield))
            for n in walk(s, into_nested=True, include_self=True)
        ):
            top = i + 1
            break
        if _model_calls(ctx, s) or _parameter_forwards(ctx, s):
            first = i
    if first is None:
        loss = _loss_text(ctx, backward)
        above = [c for s in stmts[:top] for c in _model_calls(ctx, s) + _parameter_forwards(ctx, s)]
        if above:
            head = ctx.code_for(stmts[top - 1]).strip().splitlines()[0]
            return (f"the forward `{ctx.code_for(above[0].func)}(...)` runs above `{head}`, which one "
                    f"`with torch.autocast(...)` around the forward and `{loss}` must not hold: move that "
                    "line above the forward (or below the loss) first")
        # The callables of the loss statement itself (``criterion(model(x), y)``, ``compute_loss(...)``),
        # a model before a loss function; not methods of results (``.mean()``) or batch moves.
        calls = [n for n in walk(stmts[last], include_self=True) if isinstance(n, cst.Call) and
                 dotted_name(n.func) is not None and not method_call(n, "to", "cuda", "float", "long", "view") and
                 not ctx.matches(n.func, {"torch.*"})]
        calls.sort(key=lambda c: bool(_LOSS_LIKE.search(ctx.code_for(c.func))))
        named = f" (`{ctx.code_for(calls[0].func)}(...)` may be one, or run one, defined elsewhere)" if calls else ""
        return (f"the statements that compute `{loss}` right before the backward call no model this file "
                f"knows{named}: the autocast belongs around the forward, where the model is known")
    return stmts, first, last


def forward_left_outside(ctx: RuleContext, ta: TrainingAnalysis, stmts: list[cst.BaseStatement],
                         first: int) -> cst.Call | None:
    """A call of a trained model that runs in the same step before the region (with gradients):
    wrapping only the rest would leave that forward in float32 (``feats = encoder(x)`` above a
    region that holds only the head and the loss)."""
    trained = {m.name for m in trained_models(ctx)} or model_names_everywhere(ctx)
    loop = ta.step_loop_of(stmts[first])
    before: list[cst.CSTNode] = list(stmts[:first])
    cur: cst.CSTNode | None = ctx.parent(stmts[first])
    while cur is not None and cur is not loop:  # statements before the enclosing blocks, too
        parent = ctx.parent(cur)
        if isinstance(cur, cst.BaseStatement) and isinstance(parent, (cst.IndentedBlock, cst.Module)):
            body = list(parent.body)
            before.extend(body[:next(i for i, s in enumerate(body) if s is cur)])
        cur = parent
    for stmt in before:
        for call in _model_calls(ctx, stmt):
            if dotted_name(call.func) in trained and not _under_context(ctx, call, stmt):
                return call
    return None


def _under_context(ctx: RuleContext, node: cst.CSTNode, stop: cst.CSTNode) -> bool:
    """Inside a ``with torch.no_grad():`` (no gradients: not the trained forward) or an autocast
    region (already in low precision), looking up to ``stop``."""
    regions = {u.node for u in autocast_uses(ctx)}
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.With) and any(
                i.item in regions or
                ctx.matches(i.item.func if isinstance(i.item, cst.Call) else i.item, NO_GRAD) for i in anc.items):
            return True
        if anc is stop:
            break
    return False


def loss_only_regions(ctx: RuleContext, ta: TrainingAnalysis) -> list[tuple[cst.With, cst.Call]]:
    """The script's own autocast regions in a step that hold no model call (only the loss) while
    a trained model's forward runs before them in float32: ``(region, that forward)``. Such a
    region is a no-op for speed."""
    calls = {u.node for u in autocast_uses(ctx) if isinstance(u.node, cst.Call)}
    out = []
    for region in ctx.nodes(cst.With):
        block = ctx.parent(region)
        if not any(i.item in calls for i in region.items) or not isinstance(block, cst.IndentedBlock) or \
                ta.step_loop_of(region) is None or _model_calls(ctx, region.body):
            continue
        if _fp32_island(ctx, region, calls):
            continue  # ``autocast(enabled=False)`` keeps a loss in float32 on purpose; nested: the outer holds the forward
        inner = [n for n in walk(region.body) if isinstance(n, cst.Call)]
        if not inner or any(isinstance(c.func, cst.Name) and c.func.value in ta.functions or
                            (dotted_name(c.func) or "").startswith("self.") for c in inner):
            continue  # nothing computed, or a helper of this file that may run the model
        stmts = list(block.body)
        outside = forward_left_outside(ctx, ta, stmts, stmts.index(region))
        if outside is not None:
            out.append((region, outside))
    return out


def _fp32_island(ctx: RuleContext, region: cst.With, calls: set[cst.CSTNode]) -> bool:
    """Is this region switched off (``autocast(enabled=False)``) or nested in another autocast
    region (whose body, not this one, holds the forward)?"""
    if _switched_off(region):
        return True
    node = ctx.parent(region)
    while node is not None and not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(node, cst.With) and any(i.item in calls for i in node.items) and not _switched_off(node):
            return True
        node = ctx.parent(node)
    return False


def _switched_off(region: cst.With) -> bool:
    for item in region.items:
        enabled = get_arg(item.item, "enabled") if isinstance(item.item, cst.Call) else None
        if enabled is not None and literal_value(enabled.value) is False:
            return True
    return False


def autocast_fix(ctx: RuleContext, ta: TrainingAnalysis,
                 backward: cst.Call) -> tuple[cst.CSTNode, Fix | NoFix | None]:
    """Where to report the float32 step of ``backward``, the fix that wraps its forward and loss
    in bfloat16 autocast, or why there is none when it cannot be made safely."""
    region = forward_region(ctx, backward)
    if isinstance(region, str):
        return backward, NoFix(region)
    stmts, first, last = region
    outside = forward_left_outside(ctx, ta, stmts, first)
    if uses_bce(ctx) is not None:
        return stmts[first], NoFix(_BCE_WHY)
    if outside is not None:
        return stmts[first], NoFix(f"the forward `{ctx.code_for(outside.func)}(...)` runs before the loss "
                                   "statements, outside any region a fix could wrap; put it under the "
                                   "same autocast as the loss")
    device = device_name_at(ctx, stmts[first], near=ta.step_loop_of(backward))
    dt = device_type_expr(ctx, device, stmts[first]) if device is not None else _input_device_type(ctx, stmts, first)
    if dt is None:
        return stmts[first], NoFix(_NO_DEVICE)
    return stmts[first], Fix("run forward and loss under bfloat16 autocast",
                             (*wrap_in_autocast(stmts, first, last, dt, torch_name(ctx)), *torch_import(ctx)),
                             "unsafe")


def _input_device_type(ctx: RuleContext, stmts: list[cst.BaseStatement], first: int) -> str | None:
    """``x.device.type`` when the forward's first argument ``x`` is a tensor the same block moved
    to CUDA just before (``x = x.cuda()``; a ``.to(dev)`` names the device itself): the forward
    runs where its input is."""
    forwards = _model_calls(ctx, stmts[first]) or _parameter_forwards(ctx, stmts[first])
    arg = get_arg(forwards[0], "", 0) if forwards else None
    if arg is None or arg.keyword is not None or not isinstance(arg.value, cst.Name):
        return None
    name = arg.value.value
    for stmt in reversed(stmts[:first]):
        if name not in _assigned_names(stmt):
            continue
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        moved = isinstance(small, cst.Assign) and len(small.targets) == 1 and \
            isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Call) and \
            method_call(small.value, "cuda")
        return f"{name}.device.type" if moved else None
    return None


def wrap_in_autocast(stmts: list[cst.BaseStatement], first: int, last: int, device_type: str,
                     torch: str) -> list:
    """Edits that put ``stmts[first:last + 1]`` under ``with torch.autocast(...)``."""
    head = stmts[first]
    assert isinstance(head, cst.SimpleStatementLine)
    body = [head.with_changes(leading_lines=()), *stmts[first + 1:last + 1]]
    with_node = cst.With(
        items=[cst.WithItem(cst.parse_expression(
            f"{torch}.autocast(device_type={device_type}, dtype={torch}.bfloat16)"))],
        body=cst.IndentedBlock(body=body),
        leading_lines=head.leading_lines,
    )
    edits = [Replace(head, with_node)]
    edits.extend(Replace(s, cst.RemoveFromParent()) for s in stmts[first + 1:last + 1])
    return edits


def fp16_without_scaler(ctx: RuleContext, ta: TrainingAnalysis, uses: list[AutocastUse],
                        backwards: list[cst.Call]) -> tuple[cst.CSTNode, Fix | NoFix] | None:
    """The first float16 autocast when the file has no GradScaler, with the fix that adds one."""
    fp16 = [u for u in uses if autocast_is_fp16(ctx, u)]
    if not fp16 or any(ctx.is_call_to(c, GRAD_SCALERS) for c in ctx.nodes(cst.Call)) or ta.scaler_names or \
            scaler_elsewhere(ctx, ta, backwards):
        return None
    return fp16[0].node, scaler_fix(ctx, ta, backwards) if len(backwards) == 1 else \
        NoFix("several backward calls per step: which one the scaler should scale is not clear")


def scaler_elsewhere(ctx: RuleContext, ta: TrainingAnalysis, backwards: list[cst.Call]) -> bool:
    """A GradScaler held by the user's own code: a class or builder of their other modules that
    makes one (``loss_scaler = NativeScaler()``), or a scaler handed in (a parameter or attribute
    named like one) that the step gives the loss to (``loss_scaler(loss, optimizer)``,
    ``self.scaler.scale(loss).backward()``)."""
    if any(pc.facts.makes_scaler for pc in project_calls(ctx)):
        return True
    losses = {dotted_name(b.func.value) for b in backwards if isinstance(b.func, cst.Attribute)}
    for call in ctx.nodes(cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "scale" and ta.is_scaler(func.value):
            return True
        given = {dotted_name(a.value) for a in call.args}
        if ta.is_scaler(func) and (given & losses or any("loss" in (g or "") for g in given)):
            return True
    return False


def scaler_fix(ctx: RuleContext, ta: TrainingAnalysis, backwards: list[cst.Call]) -> Fix | NoFix:
    """``scaler = torch.amp.GradScaler(device.type)`` before the outermost loop, and the scaled
    backward and step, in the simple shape only (see GP301's limitations); else why not."""
    backward = backwards[0]
    fn = body_of(ctx, backward)
    if not method_call(backward, "backward") or backward.args:
        return NoFix("the backward is not a plain `loss.backward()` the fix could scale")
    steps = [c for c in ctx.nodes(cst.Call) if method_call(c, "step") and
             ta.is_optimizer(c.func.value) and ta.in_step_loop(c)]  # type: ignore[attr-defined]
    if len(steps) != 1 or steps[0].args or body_of(ctx, steps[0]) is not fn:
        return NoFix("not one plain `optimizer.step()` beside the backward for `scaler.step(optimizer)`")
    step = steps[0]
    step_stmt = ctx.statement_of(step)
    if not isinstance(step_stmt, cst.SimpleStatementLine) or len(step_stmt.body) != 1 or \
            not isinstance(step_stmt.body[0], cst.Expr) or step_stmt.body[0].value is not step:
        return NoFix("the optimizer step is not a statement of its own that `scaler.step` could replace")
    body_root: cst.CSTNode = fn if fn is not None else ctx.module
    for n in walk(body_root, into_nested=True, include_self=True):
        if isinstance(n, cst.Attribute) and n.attr.value in ("grad", "unscale_") or \
                isinstance(n, cst.Call) and dotted_name(n.func) and \
                str(dotted_name(n.func)).rsplit(".", 1)[-1].startswith("clip_grad"):
            return NoFix("the step reads or clips gradients, which must be unscaled first (scaler.unscale_)")
    # The outermost loop of the function holding the step loop: the scaler is created once.
    loop = ta.step_loop_of(backward)
    outer = None
    for anc in [loop, *ctx.ancestors(loop)] if loop is not None else []:
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(anc, (cst.For, cst.While)):
            outer = anc
    if outer is None or ctx.enclosing(step, cst.For, cst.While) is None or not ctx.is_inside(step, outer):
        return NoFix("no loop holds both the step and a place to create the scaler once")
    if fn is not None and any(ctx.enclosing(call, cst.For, cst.While) for call in ta.calls_of(fn)):
        return NoFix("the step's function runs in a loop: a scaler created there would lose its scale each call")
    if any(n.value == "scaler" for n in ctx.nodes(cst.Name)):
        return NoFix("the name `scaler` is already used in this file")
    device = device_name_at(ctx, outer, near=loop)
    if device is None:
        return NoFix(_NO_DEVICE)
    dt = device_type_expr(ctx, device, outer)
    torch = torch_name(ctx)
    assert isinstance(backward.func, cst.Attribute) and isinstance(step.func, cst.Attribute)
    loss = backward.func.value
    opt = step.func.value
    new_backward = cst.parse_expression("scaler.scale(__loss__).backward()")
    new_backward = new_backward.with_changes(
        func=new_backward.func.with_changes(  # type: ignore[attr-defined]
            value=new_backward.func.value.with_changes(args=[cst.Arg(loss)])))  # type: ignore[attr-defined]
    new_step = cst.parse_expression("scaler.step(__opt__)").with_changes(args=[cst.Arg(opt)])
    return Fix("add a GradScaler for float16 autocast", (
        InsertBefore(outer, (cst.parse_statement(f"scaler = {torch}.amp.GradScaler({dt})\n"),)),
        Replace(backward, new_backward),
        Replace(step, new_step),
        InsertAfter(step_stmt, (cst.parse_statement("scaler.update()\n"),)),
        *torch_import(ctx),
    ), "unsafe")
