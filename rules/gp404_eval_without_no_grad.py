"""GP404 eval-without-no-grad."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ._api import AddImport, Finding, Fix, Invalid, Replace, Rule, Valid, dedent
from ._calls import dotted_name, method_call
from ._context import RuleContext
from ._edits import torch_alias
from ._stepcode import in_no_grad, walk_with_callees
from ._torchnames import NO_GRAD
from ._training import TrainingAnalysis, analysis
from ._tree import walk

_GRAD_APIS = {"torch.autograd.grad", "torch.autograd.backward", "torch.enable_grad",
              "torch.autograd.functional.*", "torch.func.*"}


class EvalWithoutNoGrad(Rule):
    code = "GP404"
    name = "eval-without-no-grad"
    summary = "An evaluation loop (model in eval mode, no backward) runs with autograd enabled."
    rationale = (
        "`model.eval()` only switches dropout and batch-norm to inference behaviour; it does not "
        "turn off autograd. Without `torch.no_grad()` every forward pass records the graph and keeps "
        "the activations it would need for a backward that never comes: evaluation uses several "
        "times the memory it needs (limiting the batch size) and spends time on graph bookkeeping."
    )
    fix_description = (
        "Wrap the loop in `with torch.no_grad():` (the body moves one level in; comments are kept), "
        "adding `import torch` if needed."
    )
    fix_safety = "safe"
    # gains_on 'any': recording the graph and keeping activations costs time and memory on every
    # device.
    gains_on = "any"
    limitations = (
        "The loop must come after `model.eval()` in the same function and call that model; "
        "evaluation in a function that receives a model already in eval mode is missed.",
        "A loop that calls `.backward()`, steps an optimizer, or uses autograd APIs (saliency "
        "maps, `requires_grad_`) is not reported.",
        "The fix uses `torch.no_grad()`; `torch.inference_mode()` can be faster still but forbids "
        "later autograd use of the outputs.",
    )
    references = (
        "https://docs.pytorch.org/docs/stable/generated/torch.no_grad.html",
        "https://docs.pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    )
    keywords = (".eval()",)

    examples = [
        Valid(dedent("""
            import torch
            @torch.no_grad()
            def evaluate(model, loader):
                model.eval()
                correct = 0
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum()
                return correct
        """)),
        Valid(dedent("""
            import torch
            def evaluate(model, loader):
                model.eval()
                with torch.inference_mode():
                    for x, y in loader:
                        out = model(x)
        """)),
        Valid(dedent("""
            import torch
            def evaluate(model, loader):
                model.eval()
                for x, y in loader:
                    with torch.no_grad():
                        out = model(x)
        """)),
        Valid(dedent("""
            # training with frozen batch-norm statistics: eval mode, but a backward in the loop
            model.eval()
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """)),
        Valid(dedent("""
            import torch
            def evaluate(model, loader):
                model.eval()
                for x, y in loader:
                    out = model(x)

            with torch.no_grad():
                evaluate(model, val_loader)
        """)),
        Valid(dedent("""
            # not a model: eval of a user's expression objects
            expr.eval()
            for item in items:
                print(item)
        """)),
        Invalid(dedent("""
            import torch
            def evaluate(model, loader):
                model.eval()
                total = 0
                # score the validation set
                for x, y in loader:
                    out = model(x)  # logits
                    total += (out.argmax(1) == y).sum().item()
                return total
        """), fixed=dedent("""
            import torch
            def evaluate(model, loader):
                model.eval()
                total = 0
                # score the validation set
                with torch.no_grad():
                    for x, y in loader:
                        out = model(x)  # logits
                        total += (out.argmax(1) == y).sum().item()
                return total
        """)),
        Invalid(dedent("""
            import torch
            class Trainer:
                def validate(self):
                    self.model.eval()
                    for batch in self.val_loader:
                        for x in batch:
                            self.model(x)
        """), fixed=dedent("""
            import torch
            class Trainer:
                def validate(self):
                    self.model.eval()
                    with torch.no_grad():
                        for batch in self.val_loader:
                            for x in batch:
                                self.model(x)
        """), count=1),
        Invalid(dedent("""
            import torch as th
            net = th.nn.Linear(4, 2)
            net.eval()
            preds = []
            while batches:
                preds.append(net(batches.pop()))
        """), fixed=dedent("""
            import torch as th
            net = th.nn.Linear(4, 2)
            net.eval()
            preds = []
            with th.no_grad():
                while batches:
                    preds.append(net(batches.pop()))
        """)),
    ]

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        ta = analysis(ctx)
        order = ctx.preorder()
        evals: dict[cst.CSTNode, list[tuple[int, str]]] = {}
        for call in ctx.nodes(cst.Call):
            if method_call(call, "eval") and not call.args:
                assert isinstance(call.func, cst.Attribute)
                name = dotted_name(call.func.value)
                if name is not None:
                    scope = ctx.enclosing(call, cst.FunctionDef, cst.Lambda, cst.ClassDef) or ctx.module
                    evals.setdefault(scope, []).append((order[call], name))
        if not evals:
            return
        flagged: list[cst.CSTNode] = []
        for loop in ctx.nodes(cst.For, cst.While):
            if any(ctx.is_inside(loop, f) for f in flagged):
                continue
            model = self._eval_model(ctx, ta, loop, evals, order)
            if model is None:
                continue
            flagged.append(loop)
            alias = torch_alias(ctx)
            new = cst.With(
                items=[cst.WithItem(cst.parse_expression(f"{alias or 'torch'}.no_grad()"))],
                body=cst.IndentedBlock(body=[loop.with_changes(leading_lines=[])]),
                leading_lines=loop.leading_lines,
            )
            fix = Fix("wrap the loop in torch.no_grad()", (Replace(loop, new),) + ((AddImport("torch"),) if alias is None else ()), "safe")
            yield Finding(loop, f"evaluation loop runs `{model}` in eval mode with autograd on: every forward "
                                "records a graph and keeps activations for a backward that never comes; "
                                "wrap it in torch.no_grad()", fix)

    @staticmethod
    def _eval_model(ctx: RuleContext, ta: TrainingAnalysis, loop: cst.For | cst.While,
                    evals: dict[cst.CSTNode, list[tuple[int, str]]], order: dict[cst.CSTNode, int]) -> str | None:
        scope = ctx.enclosing(loop, cst.FunctionDef, cst.Lambda, cst.ClassDef) or ctx.module
        start = order[loop]
        models = {name for pos, name in evals.get(scope, ()) if pos < start}
        if not models or in_no_grad(ctx, loop):
            return None
        called = {dotted_name(n.func) for n in walk(loop.body) if isinstance(n, cst.Call)}
        used = sorted(m for m in models if m in called)
        if not used:
            return None
        model = used[0]
        # model.train() between the eval() and the loop: not in eval mode any more
        for n in walk(scope):
            if method_call(n, "train") and isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and \
                    dotted_name(n.func.value) == model and \
                    max(p for p, m in evals[scope] if m == model and p < start) < order[n] < start:
                return None
        for n in walk_with_callees(ta, loop.body):
            if ta.is_backward_call(n) or ta.is_optimizer_step(n):
                return None
            if isinstance(n, cst.With) and any(
                    ctx.matches(i.item.func if isinstance(i.item, cst.Call) else i.item, NO_GRAD) for i in n.items):
                return None
            if isinstance(n, cst.Call) and ctx.matches(n.func, _GRAD_APIS):
                return None
            if isinstance(n, cst.Name) and n.value in ("requires_grad_", "requires_grad", "retain_grad"):
                return None
        for n in walk(scope):
            if isinstance(n, cst.Call) and ctx.matches(n.func, {"torch.set_grad_enabled"}):
                return None
        fn = scope if isinstance(scope, cst.FunctionDef) else None
        if fn is not None and any(in_no_grad(ctx, c) for c in ta.calls_of(fn)):
            return None  # called under no_grad by its caller
        return model
