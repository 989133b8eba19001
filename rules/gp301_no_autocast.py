"""GP301 no-autocast."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import AddImport, Finding, Fix, InsertAfter, InsertBefore, Invalid, Replace, Rule, Valid, dedent
from ._calls import dotted_name, get_arg, literal_value, method_call
from ._context import RuleContext
from ._script_facts import (
    MODULE_CHAIN, device_name_at, device_type_expr, model_names_everywhere, names_in, scope_of,
)
from ._torchnames import AUTOCAST, GRAD_SCALERS
from ._training import TrainingAnalysis, analysis
from ._tree import walk

FP16 = frozenset({"torch.float16", "torch.half"})
LOW_PRECISION = FP16 | {"torch.bfloat16"}
_FORBIDDEN_IN_FORWARD = ("backward", "step", "zero_grad")


def _is_model_call(ctx: RuleContext, node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and dotted_name(node.func) in model_names_everywhere(ctx)


def _model_in_low_precision(ctx: RuleContext) -> bool:
    """``model.half()``, ``model.to(torch.bfloat16)``: the weights are already 16-bit."""
    models = model_names_everywhere(ctx)
    for call in ctx.nodes(cst.Call):
        if not method_call(call, *MODULE_CHAIN):
            continue
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        while isinstance(receiver, cst.Call) and method_call(receiver, *MODULE_CHAIN):
            receiver = receiver.func.value  # type: ignore[attr-defined]
        is_model = dotted_name(receiver) in models or (
            isinstance(receiver, cst.Call) and dotted_name(receiver.func) in analysis(ctx).module_classes)
        assign = ctx.enclosing(call, cst.Assign)
        if assign is not None and any(dotted_name(t.target) in models for t in assign.targets) and \
                ctx.is_inside(call, assign.value):
            is_model = True
        if not is_model:
            continue
        if call.func.attr.value in ("half", "bfloat16"):
            return True
        if call.func.attr.value == "to" and any(ctx.matches(a.value, LOW_PRECISION) for a in call.args):
            return True
    return False


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


def forward_region(ctx: RuleContext, ta: TrainingAnalysis,
                   backward: cst.Call) -> tuple[list[cst.BaseStatement], int, int] | None:
    """The statements of the step from the model call through the loss computation, which
    end before the ``.backward()`` statement: ``(block statements, first, last)``."""
    stmt = ctx.statement_of(backward)
    block = ctx.parent(stmt) if stmt is not None else None
    if not isinstance(block, cst.IndentedBlock) or not isinstance(backward.func, cst.Attribute):
        return None
    stmts = list(block.body)
    index = next(i for i, s in enumerate(stmts) if s is stmt)
    wanted = names_in(backward.func.value)
    last = next((i for i in range(index - 1, -1, -1) if _assigned_names(stmts[i]) & wanted), None)
    if last is None:
        return None
    first = None
    for i in range(last, -1, -1):
        s = stmts[i]
        if not isinstance(s, cst.SimpleStatementLine) or any(
            method_call(n, *_FORBIDDEN_IN_FORWARD) or isinstance(n, (cst.Return, cst.Yield))
            for n in walk(s, into_scopes=True, include_self=True)
        ):
            break
        if any(_is_model_call(ctx, n) for n in walk(s, into_scopes=True, include_self=True)):
            first = i
    if first is None:
        return None
    return stmts, first, last


def _wrap(stmts: list[cst.BaseStatement], first: int, last: int, device_type: str) -> list[Replace]:
    head = stmts[first]
    assert isinstance(head, cst.SimpleStatementLine)
    body = [head.with_changes(leading_lines=()), *stmts[first + 1:last + 1]]
    with_node = cst.With(
        items=[cst.WithItem(cst.parse_expression(
            f"torch.autocast(device_type={device_type}, dtype=torch.bfloat16)"))],
        body=cst.IndentedBlock(body=body),
        leading_lines=head.leading_lines,
    )
    edits = [Replace(head, with_node)]
    edits.extend(Replace(s, cst.RemoveFromParent()) for s in stmts[first + 1:last + 1])
    return edits


def _autocast_is_fp16(ctx: RuleContext, call: cst.Call) -> bool:
    enabled = get_arg(call, "enabled")
    if enabled is not None and literal_value(enabled.value) is False:
        return False
    dtype = get_arg(call, "dtype")
    if ctx.matches(call.func, {"torch.cuda.amp.autocast"}):
        return dtype is None or ctx.matches(dtype.value, FP16)
    if ctx.matches(call.func, {"torch.cpu.amp.autocast"}):
        return dtype is not None and ctx.matches(dtype.value, FP16)
    if dtype is None:
        dtype = get_arg(call, "dtype", 1)
    if dtype is not None:
        return ctx.matches(dtype.value, FP16)
    device = get_arg(call, "device_type", 0)
    # Without a dtype autocast picks float16 on CUDA (bfloat16 only on CPU).
    return device is None or literal_value(device.value) != "cpu"


class NoAutocast(Rule):
    code = "GP301"
    name = "no-autocast"
    summary = ("A training step runs forward and loss in float32 (no `torch.autocast` anywhere in the "
               "module), or under float16 autocast without a `GradScaler`.")
    rationale = (
        "Tensor cores run bfloat16/float16 matrix multiplies and convolutions several times faster "
        "than float32 (about 2-3x on A100/H100 even against TF32), and half-width activations halve "
        "the memory traffic of every elementwise kernel. `torch.autocast` runs each op in the "
        "cheapest safe precision while weights and optimizer state stay float32. float16 (unlike "
        "bfloat16) has a narrow exponent range: without a `GradScaler` small gradients underflow "
        "to zero and training silently stalls."
    )
    fix_description = (
        "Wrap the step's forward and loss statements (from the model call through the loss, "
        "stopping before `.backward()`) in `with torch.autocast(device_type=device.type, "
        "dtype=torch.bfloat16):`, using the script's device variable (report only when there is "
        "none). For float16 autocast without a scaler: create `scaler = torch.amp.GradScaler("
        "device.type)` before the training loop and use `scaler.scale(loss).backward()`, "
        "`scaler.step(optimizer)`, `scaler.update()` - only in the simple shape (one backward, one "
        "optimizer step, no gradient clipping or `.grad` access, loops in one function); otherwise "
        "report only."
    )
    fix_safety = "unsafe"
    fix_safety_reason = (
        "Ops inside the autocast region run in bfloat16 (or float16): the loss trajectory changes "
        "slightly, code that checks dtypes or custom ops may break, and a GradScaler skips the "
        "steps whose gradients overflow. A/B validation checks the loss trajectory before a "
        "rewrite is kept."
    )
    # gains_on 'cuda': the gain comes from tensor cores and half-width memory traffic on CUDA; on
    # CPU bfloat16 autocast is often slower (docs/benchmarks.md).
    gains_on = "cuda"
    limitations = (
        "The fix needs the script's device variable (a name bound to `torch.device(...)`, or the "
        "device the batch is moved to): the autocast uses `device.type`, or "
        "`torch.device(name).type` when the name may be a string or an ordinal. With no device "
        "variable in sight the rule reports without a fix, so rewrites run on CPU and CUDA alike.",
        "Any autocast in the module turns off the float32 finding, even one that covers only "
        "evaluation.",
        "A model already converted to 16 bit (`model.half()`, `model.to(torch.bfloat16)`) is not "
        "reported.",
        "The forward region is taken from the statements before `.backward()` in the same block; "
        "a forward and loss computed in another function get no fix.",
        "The GradScaler is added only in the simple shape (one backward, one optimizer step, no "
        "gradient clipping or `.grad` access, the scaler created once before the outermost loop "
        "of the same function); otherwise the rule reports only.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/amp.html",
        "https://docs.pytorch.org/docs/stable/amp.html#gradient-scaling",
        "https://docs.pytorch.org/tutorials/recipes/recipes/amp_recipe.html",
    )
    keywords = ("backward",)

    examples = [
        Valid(dedent("""
            import torch
            device = torch.device("cuda")
            for x, y in loader:
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
        """)),
        Valid(dedent("""
            import torch
            from torch.amp import GradScaler
            scaler = GradScaler("cuda")
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """)),
        Valid(dedent("""
            # library code: defines a module, no training step
            import torch.nn as nn
            class Net(nn.Module):
                def forward(self, x):
                    return self.fc(x)
        """)),
        Valid(dedent("""
            import torch
            device = torch.device("cuda")
            model = Net().to(device).half()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
        """)),
        Valid(dedent("""
            from torch.cuda.amp import autocast
            for x, y in loader:
                with autocast(dtype=torch.bfloat16):
                    loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Valid(dedent("""
            # no torch import: the user's own framework, whatever its names
            from minigrad import DataLoader, Adam
            model = Net()
            opt = Adam(model.parameters())
            for x, y in DataLoader(ds):
                loss = model(x).mean()
                loss.backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                # forward
                logits = model(x)
                loss = criterion(logits, y)  # keep me
                opt.zero_grad()
                loss.backward()
                opt.step()
        """), fixed=dedent("""
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                # forward
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    logits = model(x)
                    loss = criterion(logits, y)  # keep me
                opt.zero_grad()
                loss.backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch

            def train(model, loader, optimizer, device):
                for batch in loader:
                    batch = {k: v.to(device) for k, v in batch.items()}
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()

            def main():
                device = torch.device("cuda")
                net = Net().to(device)
                opt = torch.optim.AdamW(net.parameters())
                for epoch in range(3):
                    train(net, loader, opt, device)
        """), fixed=dedent("""
            import torch

            def train(model, loader, optimizer, device):
                for batch in loader:
                    batch = {k: v.to(device) for k, v in batch.items()}
                    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                        loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()

            def main():
                device = torch.device("cuda")
                net = Net().to(device)
                opt = torch.optim.AdamW(net.parameters())
                for epoch in range(3):
                    train(net, loader, opt, device)
        """)),
        Invalid(dedent("""
            from torch import optim
            args = parser.parse_args()
            opt = optim.Adam(model.parameters())
            for step in range(100):
                x, y = get_batch()
                loss = loss_fn(model(x.to(args.device)), y)
                loss.backward()
                opt.step()
        """), fixed=dedent("""
            from torch import optim
            import torch

            args = parser.parse_args()
            opt = optim.Adam(model.parameters())
            for step in range(100):
                x, y = get_batch()
                with torch.autocast(device_type=torch.device(args.device).type, dtype=torch.bfloat16):
                    loss = loss_fn(model(x.to(args.device)), y)
                loss.backward()
                opt.step()
        """)),
        Invalid(dedent("""
            import torch
            for x, y in loader:
                loss = criterion(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
        """), fixed=None),
        Invalid(dedent("""
            import torch
            device = torch.device("cuda")
            model = Net().to(device)
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                for x, y in loader:
                    with torch.autocast(device_type="cuda", dtype=torch.float16):
                        loss = criterion(model(x.to(device)), y.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """), fixed=dedent("""
            import torch
            device = torch.device("cuda")
            model = Net().to(device)
            optimizer = torch.optim.AdamW(model.parameters())
            scaler = torch.amp.GradScaler(device.type)
            for epoch in range(10):
                for x, y in loader:
                    with torch.autocast(device_type="cuda", dtype=torch.float16):
                        loss = criterion(model(x.to(device)), y.to(device))
                    optimizer.zero_grad()
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
        """)),
        Invalid(dedent("""
            import torch
            device = torch.device("cuda")
            for x, y in loader:
                with torch.cuda.amp.autocast():
                    loss = criterion(model(x.to(device)), y.to(device))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        """), fixed=None),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        if not ta.step_loops or _model_in_low_precision(ctx):
            return
        backwards = [c for c in ctx.nodes(cst.Call) if ta.is_backward_call(c) and ta.runs_every_step(c)]
        if not backwards:
            return
        autocasts = [c for c in ctx.nodes(cst.Call) if ctx.is_call_to(c, AUTOCAST)]
        if autocasts:
            yield from self._check_fp16(ctx, ta, autocasts, backwards)
            return
        for backward in backwards:
            region = forward_region(ctx, ta, backward)
            fix = None
            node: cst.CSTNode = backward
            if region is not None:
                stmts, first, last = region
                node = stmts[first]
                loop = ta.step_loop_of(backward)
                device = device_name_at(ctx, stmts[first], near=loop)
                if device is not None:
                    dt = device_type_expr(ctx, device, stmts[first])
                    fix = Fix("run forward and loss under bfloat16 autocast",
                              (*_wrap(stmts, first, last, dt), AddImport("torch")), "unsafe")
            yield Finding(node, "forward and loss run in float32 on every step (no autocast in this "
                                "module): tensor cores run bfloat16 several times faster; use "
                                "torch.autocast(device_type=..., dtype=torch.bfloat16)", fix)

    def _check_fp16(self, ctx: RuleContext, ta: TrainingAnalysis, autocasts: list[cst.Call],
                    backwards: list[cst.Call]) -> Iterator[Finding]:
        fp16 = [c for c in autocasts if _autocast_is_fp16(ctx, c)]
        if not fp16:
            return
        if any(ctx.is_call_to(c, GRAD_SCALERS) for c in ctx.nodes(cst.Call)) or ta._scaler_names:
            return
        fix = _scaler_fix(ctx, ta, backwards) if len(backwards) == 1 else None
        yield Finding(fp16[0], "float16 autocast without a GradScaler: small gradients underflow to zero "
                               "and training silently degrades; scale the loss with torch.amp.GradScaler",
                      fix)


def _scaler_fix(ctx: RuleContext, ta: TrainingAnalysis, backwards: list[cst.Call]) -> Fix | None:
    backward = backwards[0]
    fn = scope_of(ctx, backward)
    if not method_call(backward, "backward") or backward.args:
        return None
    steps = [c for c in ctx.nodes(cst.Call) if method_call(c, "step") and
             ta.is_optimizer(c.func.value) and ta.in_step_loop(c)]  # type: ignore[attr-defined]
    if len(steps) != 1 or steps[0].args or scope_of(ctx, steps[0]) is not fn:
        return None
    step = steps[0]
    step_stmt = ctx.statement_of(step)
    if not isinstance(step_stmt, cst.SimpleStatementLine) or len(step_stmt.body) != 1 or \
            not isinstance(step_stmt.body[0], cst.Expr) or step_stmt.body[0].value is not step:
        return None
    body_root: cst.CSTNode = fn if fn is not None else ctx.module
    for n in walk(body_root, into_scopes=True, include_self=True):
        if isinstance(n, cst.Attribute) and n.attr.value in ("grad", "unscale_") or \
                isinstance(n, cst.Call) and dotted_name(n.func) and \
                str(dotted_name(n.func)).rsplit(".", 1)[-1].startswith("clip_grad"):
            return None
    # The outermost loop of the function holding the step loop: the scaler is created once.
    loop = ta.step_loop_of(backward)
    outer = None
    for anc in [loop, *ctx.ancestors(loop)] if loop is not None else []:
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(anc, (cst.For, cst.While)):
            outer = anc
    if outer is None or ctx.enclosing(step, cst.For, cst.While) is None or not ctx.is_inside(step, outer):
        return None
    if fn is not None and any(ctx.enclosing(call, cst.For, cst.While) for call in ta.calls_of(fn)):
        return None  # a function run per epoch would re-create the scaler, losing its scale
    if any(n.value == "scaler" for n in ctx.nodes(cst.Name)):
        return None
    device = device_name_at(ctx, outer, near=loop)
    if device is None:
        return None
    dt = device_type_expr(ctx, device, outer)
    assert isinstance(backward.func, cst.Attribute) and isinstance(step.func, cst.Attribute)
    loss = backward.func.value
    opt = step.func.value
    new_backward = cst.parse_expression("scaler.scale(__loss__).backward()")
    new_backward = new_backward.with_changes(
        func=new_backward.func.with_changes(  # type: ignore[attr-defined]
            value=new_backward.func.value.with_changes(args=[cst.Arg(loss)])))  # type: ignore[attr-defined]
    new_step = cst.parse_expression("scaler.step(__opt__)").with_changes(args=[cst.Arg(opt)])
    return Fix("add a GradScaler for float16 autocast", (
        InsertBefore(outer, (cst.parse_statement(f"scaler = torch.amp.GradScaler({dt})\n"),)),
        Replace(backward, new_backward),
        Replace(step, new_step),
        InsertAfter(step_stmt, (cst.parse_statement("scaler.update()\n"),)),
        AddImport("torch"),
    ), "unsafe")
