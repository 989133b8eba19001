"""Property tests: Hypothesis composes training scripts from building blocks (import aliases,
DataLoader forms, plain/enumerate/while loops at top level, in functions and in methods, guarded
and unguarded ``.item()`` logging, ``total += loss.item()``, gradient accumulation, eval loops,
comments and odd formatting, a BCE loss (``nn.BCELoss`` after a Sigmoid, or
``F.binary_cross_entropy``), a gradient penalty (``torch.autograd.grad(..., create_graph=True)``
through the model), an ``nn.DataParallel`` wrap, and ``os.environ`` lines that must run before
torch is imported). For every generated script:

- the fixes (safe only, and all) re-parse, are idempotent, keep every comment and never put an
  import above the environment lines;
- the rewritten script still runs on CPU whenever the original does, and with safe fixes only
  its loss trajectory is identical to the original's (printed with ``repr``).

Three failures happen only on CUDA or only with a working compiler, so the runner makes them
happen on CPU too (``_EMULATION``): autocast refuses ``binary_cross_entropy`` (CUDA raises
whatever the dtype), a compiled module cannot be differentiated twice (AOTAutograd), and
compiling a ``DataParallel`` wrapper or the module inside one breaks on several GPUs.

Scripts run in forks of one warm interpreter that has imported torch once, so each run costs
milliseconds instead of a torch import."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuperf_rewrite.lint.engine import RuleSet, check_source
from gpuperf_rewrite.lint.registry import all_rules

ALL_CODES = tuple(all_rules())


# ---- the generator -------------------------------------------------------------------------

@st.composite
def scripts(draw: st.DrawFn) -> str:
    n_comment = iter(range(10_000))
    indent_unit = draw(st.sampled_from(["    ", "  ", "\t"]))
    tc = draw(st.sampled_from(["torch", "T", "th"]))  # how torch is imported
    dl_form = draw(st.sampled_from(["from", "from_as", "dotted"]))
    nn_form = draw(st.sampled_from(["attr", "from", "import_as"]))
    mentions_cuda = draw(st.booleans())  # GP202 fires only on scripts that may use CUDA
    num_workers = draw(st.sampled_from([None, "0", "1"]))
    loop_form = draw(st.sampled_from(["for", "enumerate", "while"]))
    nesting = draw(st.sampled_from(["top", "function", "method"]))
    log = draw(st.sampled_from(["none", "unguarded", "guarded", "float"]))
    accumulate = draw(st.booleans())
    grad_accum = draw(st.sampled_from([1, 2]))
    eval_loop = draw(st.booleans())
    comments = draw(st.booleans())
    odd = draw(st.booleans())  # blank lines, backslash continuations, trailing comments
    loss_form = draw(st.sampled_from(["mse", "mse", "bce_module", "bce_functional"]))
    penalty = draw(st.booleans())  # a gradient penalty: double backward through the model
    wrap = draw(st.booleans())  # model = nn.DataParallel(model)
    env_lines = draw(st.booleans())  # os.environ["PYTORCH_..."] before torch is imported

    def c() -> str:
        return f"  # c{next(n_comment)}" if comments and draw(st.booleans()) else ""

    def comment_line() -> list[str]:
        return [f"# c{next(n_comment)} {draw(st.sampled_from(['note', 'TODO: faster', 'noqa-free']))}"] \
            if comments and draw(st.booleans()) else []

    def blank() -> list[str]:
        return [""] * draw(st.integers(0, 2)) if odd else []

    torch_import = "import torch" if tc == "torch" else f"import torch as {tc}"
    head = [f"# c{next(n_comment)} generated training script"] if comments else []
    if env_lines:
        head += ["import os", f'os.environ["{ENV_LINE_KEY}"] = "expandable_segments:True"']
    head += [torch_import + c()]
    if nn_form == "from":
        head.append("from torch import nn")
        nn = "nn"
    elif nn_form == "import_as":
        head.append("import torch.nn as tnn")
        nn = "tnn"
    else:
        nn = f"{tc}.nn"
    if dl_form == "from":
        head.append("from torch.utils.data import DataLoader, TensorDataset")
        dl, tds = "DataLoader", "TensorDataset"
    elif dl_form == "from_as":
        head.append("from torch.utils.data import DataLoader as Loader, TensorDataset as TDS")
        dl, tds = "Loader", "TDS"
    else:
        dl, tds = f"{tc}.utils.data.DataLoader", f"{tc}.utils.data.TensorDataset"
    head += blank() + comment_line()
    head.append(f"{tc}.manual_seed(0)")
    if mentions_cuda:
        head.append(f'device = {tc}.device("cuda" if {tc}.cuda.is_available() else "cpu"){c()}')
    else:
        head.append(f'device = {tc}.device("cpu")')
    target = f"{tc}.rand(24, 1, generator=g)" if loss_form != "mse" else f"{tc}.randn(24, 1, generator=g)"
    layer = f"{nn}.Sequential({nn}.Linear(4, 1), {nn}.Sigmoid())" if loss_form == "bce_module" else f"{nn}.Linear(4, 1)"
    head += [
        f"g = {tc}.Generator().manual_seed(0)",
        f"data = {tds}({tc}.randn(24, 4, generator=g), {target})",
        f"model = {layer}.to(device)",
    ]
    if wrap:
        head.append(f"model = {nn}.DataParallel(model)")
    if loss_form == "bce_module":
        head.append(f"criterion = {nn}.BCELoss()")
    head.append(f"opt = {tc}.optim.SGD(model.parameters(), lr=0.05)")
    kw = "" if num_workers is None else f", num_workers={num_workers}"
    if odd:
        head.append(f"loader = {dl}(data, \\\n{indent_unit}batch_size=8{kw})" + c())
    else:
        head.append(f"loader = {dl}(data, batch_size=8{kw}){c()}")
    head += ["LOSSES = []", "total = 0.0"] + blank()

    # The training step, as lines relative to the loop body.
    step_var = "step" if loop_form != "for" else "i"
    body: list[str] = []
    if loop_form == "for":
        body.append("i += 1")
    body += comment_line()
    body.append("x, y = x.to(device), y.to(device)" + c())
    if loss_form == "bce_module":
        loss_expr = "criterion(model(x), y)"
    elif loss_form == "bce_functional":
        loss_expr = f"{nn}.functional.binary_cross_entropy({tc}.sigmoid(model(x)), y)"
    elif odd:
        loss_expr = f"{nn}.functional.mse_loss(model(x), \\\n{indent_unit}y)"
    else:
        loss_expr = f"{nn}.functional.mse_loss(model(x), y)"
    body.append(f"loss = {loss_expr}" + ("" if "\\\n" in loss_expr else c()))
    if penalty:
        body += ["xg = x.clone().requires_grad_(True)",
                 f"(gx,) = {tc}.autograd.grad(model(xg).sum(), xg, create_graph=True)",
                 "loss = loss + 0.1 * gx.pow(2).mean()"]
    body.append("LOSSES.append(loss.detach().clone())")
    body.append(f"(loss / {grad_accum}).backward()" if grad_accum > 1 else "loss.backward()")
    if grad_accum > 1:
        body += [f"if ({step_var} + 1) % {grad_accum} == 0:", "@opt.step()", "@opt.zero_grad()"]
    else:
        body += ["opt.step()", "opt.zero_grad()"]
    body += blank()
    if log == "unguarded":
        body.append('print("loss", loss.item())' + c())
    elif log == "guarded":
        body += [f"if {step_var} % 2 == 0:" + c(), '@print("loss", loss.item())']
    elif log == "float":
        body.append("last = float(loss)")
    if accumulate:
        body.append("total += loss.item()" + c())

    if loop_form == "for":
        loop = ["i = 0", "for x, y in loader:" + c()]
    elif loop_form == "enumerate":
        loop = ["for step, (x, y) in enumerate(loader):" + c()]
    else:
        loop = ["it = iter(loader)", "step = 0", "while step < 3:", "@x, y = next(it)"]
        body.append("step += 1")
    loop += ["@" + line if line else "" for line in body]

    tail: list[str] = []
    if eval_loop:
        tail += ["val = 0.0", f"with {tc}.no_grad():" + c(), "@for x, y in loader:",
                 f"@@val += {nn}.functional.mse_loss(model(x.to(device)), y.to(device)).item()",
                 'print("val", repr(val))']
    tail += ['print("total", float(total))',
             'print("LOSSES", repr([float(v) for v in LOSSES]))']

    if nesting == "top":
        code = head + loop + tail
    elif nesting == "function":
        code = head + ["def train():" + c(), "@global total"] + ["@" + ln if ln else "" for ln in loop + tail] \
            + blank() + ["if __name__ == '__main__':", "@train()"]
    else:
        code = head + ["class Trainer:", "@def fit(self):", "@@global total"] \
            + ["@@" + ln if ln else "" for ln in loop + tail] + ["Trainer().fit()"]
    return "\n".join(_indent(line, indent_unit) for line in code) + "\n"


ENV_LINE_KEY = "PYTORCH_CUDA_ALLOC_CONF"


def _indent(line: str, unit: str) -> str:
    depth = len(line) - len(line.lstrip("@"))
    # Continuation lines carry the unit already; only leading @ mark nesting.
    return unit * depth + line[depth:]


# ---- helpers -------------------------------------------------------------------------------

def _fix(source: str, mode: str) -> str:
    res = check_source(source.encode(), "gen.py", RuleSet(ALL_CODES), mode)
    assert not res.error, res.diagnostics
    assert not res.warnings, res.warnings  # a fix that breaks the code or does not converge
    return res.fixed.decode() if res.fixed is not None else source


def _comments(source: str) -> list[str]:
    return sorted(t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                  if t.type == tokenize.COMMENT)


# ---- parse-only properties (many examples) -------------------------------------------------

@settings(max_examples=int(os.environ.get("GPUPERF_PROPERTY_EXAMPLES", 40)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts(), st.sampled_from(["safe", "unsafe"]))
def test_fixes_reparse_are_idempotent_and_keep_comments(source, mode):
    compile(source, "gen.py", "exec")  # the generator makes valid Python
    fixed = _fix(source, mode)
    cst.parse_module(fixed)
    compile(fixed, "gen.py", "exec")
    assert _fix(fixed, mode) == fixed, "second pass changed the file"
    before, after = _comments(source), _comments(fixed)
    assert all(after.count(x) >= before.count(x) for x in set(before)), (before, after)
    lines = fixed.splitlines()
    if ENV_LINE_KEY in source:  # no import of torch above the lines that must precede it
        env = next(i for i, ln in enumerate(lines) if ENV_LINE_KEY in ln)
        assert not any("torch" in ln and ln.lstrip().startswith(("import", "from")) for ln in lines[:env]), fixed
    top_level_torch_imports = [ln for ln in lines if ln.startswith(("import torch", "from torch"))]
    assert len(top_level_torch_imports) == len(set(top_level_torch_imports)), fixed


def test_generator_covers_the_rules():
    """The generator is only useful if the rules fire on what it makes."""
    from hypothesis import find

    seen: set[str] = set()

    def fires(src: str) -> bool:
        res = check_source(src.encode(), "gen.py", RuleSet(("GP101", "GP201", "GP202")), "none")
        seen.update(d.code for d in res.diagnostics)
        return {"GP101", "GP201", "GP202"} <= seen

    find(scripts(), fires, settings=settings(max_examples=300, database=None, deadline=None))


# ---- running the scripts -------------------------------------------------------------------

# Failures that CUDA or a working compiler would raise, raised on CPU with dynamo disabled too.
_EMULATION = r"""
import torch
import torch.nn.functional as _F

_compiled_params = set()  # ids of the parameters of modules compiled in place
_orig_compile = torch.nn.Module.compile
_orig_grad = torch.autograd.grad
_orig_bce = _F.binary_cross_entropy
_orig_dp_init = torch.nn.DataParallel.__init__
_WRAPPERS = (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)


def _compile(self, *args, **kwargs):
    if isinstance(self, _WRAPPERS):
        raise RuntimeError("emulated: compiling a DataParallel/DDP wrapper, not the module")
    _compiled_params.update(id(p) for p in self.parameters())
    return _orig_compile(self, *args, **kwargs)


def _leaves(tensors):
    seen, stack, out = set(), [t.grad_fn for t in tensors if t.grad_fn is not None], set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if hasattr(fn, "variable"):
            out.add(id(fn.variable))
        stack.extend(f for f, _ in fn.next_functions)
    return out


def _grad(outputs, inputs, *args, **kwargs):
    if kwargs.get("create_graph"):
        outs = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
        if _leaves(outs) & _compiled_params:
            raise RuntimeError("emulated: double backward through a compiled module (AOTAutograd)")
    return _orig_grad(outputs, inputs, *args, **kwargs)


def _bce(*args, **kwargs):
    if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
        raise RuntimeError("emulated: autocast refuses binary_cross_entropy (as CUDA does)")
    return _orig_bce(*args, **kwargs)


def _dp_init(self, module, *args, **kwargs):
    if any(id(p) in _compiled_params for p in module.parameters()):
        raise RuntimeError("emulated: DataParallel replicas of a module compiled in place")
    _orig_dp_init(self, module, *args, **kwargs)


torch.nn.Module.compile = _compile
torch.autograd.grad = _grad
_F.binary_cross_entropy = _bce
torch.nn.DataParallel.__init__ = _dp_init
"""

SERVER = textwrap.dedent(r"""
    import json, os, runpy, signal, sys, time
    # model.compile() (GP303) must run, but compiling a 4-parameter model with inductor on CPU
    # would cost ~20 s per script: with dynamo disabled the call returns the model as it is.
    os.environ["TORCHDYNAMO_DISABLE"] = "1"
    import torch  # imported once; every script runs in a fork of this process
    exec(EMULATION)
    torch.set_num_threads(1)  # no OpenMP pool in the parent: forking it stays safe
    # Warm up what a first training step imports lazily (optimizers pull in dynamo, ...), once.
    _m = torch.nn.Linear(4, 1)
    _m.compile()
    _o = torch.optim.SGD(_m.parameters(), lr=0.1)
    _dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4, 4), torch.randn(4, 1)),
                                      batch_size=2)
    for _x, _y in _dl:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            _l = torch.nn.functional.mse_loss(_m(_x), _y)
        _l.backward(); _o.step(); _o.zero_grad()
        with torch.no_grad():
            _m(_x)
    _compiled_params.clear()  # the warm-up's model is not the scripts'
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        out_path = req["path"] + ".out"
        pid = os.fork()
        if pid == 0:
            fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1); os.dup2(fd, 2)
            code = 0
            try:
                runpy.run_path(req["path"], run_name="__main__")
            except BaseException:
                import traceback; traceback.print_exc(); code = 1
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(code)
        deadline = time.monotonic() + req["timeout"]
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0); rc = "timeout"
                break
            time.sleep(0.005)
        with open(out_path) as fh:
            output = fh.read()
        print(json.dumps({"rc": rc, "out": output}), flush=True)
""")


class ScriptRunner:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.n = 0
        code = SERVER.replace("exec(EMULATION)", f"exec({_EMULATION!r})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=workdir)
        assert self.proc.stdout and json.loads(self.proc.stdout.readline()) == {"ready": True}

    def run(self, source: str) -> tuple[object, str]:
        self.n += 1
        path = self.workdir / f"script_{self.n}.py"
        path.write_text(source)
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"path": str(path), "timeout": 60}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return reply["rc"], reply["out"]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def script_runner(tmp_path_factory):
    r = ScriptRunner(tmp_path_factory.mktemp("scripts"))
    yield r
    r.close()


def _losses(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.startswith("LOSSES ")]
    assert len(lines) == 1, output
    return lines[0]


@settings(max_examples=int(os.environ.get("GPUPERF_RUN_EXAMPLES", 20)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scripts())
def test_rewritten_script_runs_and_safe_fixes_keep_the_loss_trajectory(script_runner, source):
    rc, out = script_runner.run(source)
    assert rc == 0, f"the generator made a script that fails:\n{source}\n{out}"
    safe = _fix(source, "safe")
    rc_safe, out_safe = script_runner.run(safe)
    assert rc_safe == 0, f"safe fixes broke the script:\n{safe}\n{out_safe}"
    assert _losses(out_safe) == _losses(out), "safe fixes changed the loss trajectory"
    unsafe = _fix(source, "unsafe")
    if unsafe != safe:
        rc_unsafe, out_unsafe = script_runner.run(unsafe)
        assert rc_unsafe == 0, f"unsafe fixes broke the script:\n{unsafe}\n{out_unsafe}"
        assert "LOSSES " in out_unsafe


# ---- the emulated CUDA-only failures ----------------------------------------------------------

_BASE = """
import torch
from torch import nn
model = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
x, y = torch.randn(8, 4), torch.rand(8, 1)
"""


@pytest.mark.parametrize("bad,good", [
    ("with torch.autocast('cpu', dtype=torch.bfloat16):\n    nn.BCELoss()(model(x), y)\n",
     "with torch.autocast('cpu', dtype=torch.bfloat16):\n    out = model(x)\nnn.BCELoss()(out.float(), y)\n"),
    ("model.compile()\nxg = x.requires_grad_()\ntorch.autograd.grad(model(xg).sum(), xg, create_graph=True)\n",
     "xg = x.requires_grad_()\ntorch.autograd.grad(model(xg).sum(), xg, create_graph=True)\n"),
    ("model = nn.DataParallel(model)\nmodel.compile()\n", "model = nn.DataParallel(model)\n"),
    ("model.compile()\nmodel = nn.DataParallel(model)\n", "model.compile()\nmodel(x)\n"),
])
def test_emulation_raises_what_cuda_or_the_compiler_would(script_runner, bad, good):
    """Without these failures the property test could not see the fixes that break GANs, gradient
    penalties and DataParallel scripts on a GPU."""
    rc, out = script_runner.run(_BASE + bad)
    assert rc != 0 and "emulated:" in out, out
    rc, out = script_runner.run(_BASE + good)
    assert rc == 0, out


def test_generator_makes_the_scripts_fixes_used_to_break():
    """BCE losses, gradient penalties and DataParallel wraps in scripts the precision rules
    report on (a CUDA device in sight), so their unsafe fixes run on them."""
    from hypothesis import find

    seen: set[str] = set()

    def fires(src: str) -> bool:
        if 'torch.device("cuda"' not in src and '.device("cuda"' not in src:
            return False
        codes = {d.code for d in check_source(src.encode(), "gen.py", RuleSet(("GP301", "GP303")), "none").diagnostics}
        for feature in ("binary_cross_entropy", "BCELoss", "create_graph=True", "DataParallel"):
            if feature in src and codes:
                seen.add(feature)
        return len(seen) == 4

    find(scripts(), fires, settings=settings(max_examples=500, database=None, deadline=None))
