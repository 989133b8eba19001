"""``analysis.model.host_bound.module_run``: which calls on a module-like object run a forward (GP404)."""

from __future__ import annotations

import libcst as cst

from gpuperf_rewrite.rules.analysis.model.host_bound import module_run


class _Modules:
    """A stand-in for the training analysis that takes the attributes in ``_HELD`` for modules (as it
    may take a buffer built by ``nn.Buffer(...)``)."""

    ctx = None

    def is_module_like(self, expr: cst.BaseExpression, by_name: bool = False) -> bool:
        return cst.Module(body=[]).code_for_node(expr) in _HELD


_HELD = {"self.factor1", "self.table", "self.model", "self.trainer", "self.actor", "self.policy"}


def _call(code: str) -> cst.Call:
    node = cst.parse_expression(code)
    assert isinstance(node, cst.Call)
    return node


def test_metadata_and_accessors_are_no_forward_even_on_a_module_like_attribute() -> None:
    for code in ("self.factor1.size(0)", "self.table.dim()", "self.table.numel()", "self.table.stride(1)",
                 "self.model.get_output_embeddings()", "self.trainer.get_num_updates()", "self.model.is_training()"):
        assert not module_run(_Modules(), _call(code)), code


def test_module_calls_and_their_methods_are_forwards() -> None:
    assert module_run(_Modules(), _call("self.actor(state)"))
    assert module_run(_Modules(), _call("self.policy.sample(state)"))
    assert not module_run(_Modules(), _call("self.policy.parameters()"))
