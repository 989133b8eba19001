"""On a CPU, does `--fix --unsafe-fixes` slow a framework script down? The HF Trainer and Lightning
slow scripts (tests/rules/data/frameworks/) are rewritten by this tree with every rule (the
installed versions as the CLI reads them), pointed at the CPU with a short budget as
tests/rules/test_framework_fixes_train.py does, and run interleaved against the same rewrite with
the compile fixes made unconditional (`torch_compile=True`, a bare `model.compile()`: what they
wrote before they asked for CUDA), each with a cold inductor cache. Wall seconds per run, then
medians and the ratio.

Usage: python benchmarks/compile_fix_cpu.py [ROUNDS]
"""
import os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from gpuperf_rewrite.lint.engine import RuleSet, check_source  # noqa: E402
from gpuperf_rewrite.lint.environment import installed_versions  # noqa: E402
from gpuperf_rewrite.lint.registry import resolve_selection  # noqa: E402

DATA = ROOT / "tests/rules/data/frameworks"
BUDGET = {
    "hf_trainer_slow.py": [("num_train_epochs=1,", "num_train_epochs=1, max_steps=40,")],
    "lightning_slow.py": [('accelerator="gpu", devices=2', 'accelerator="cpu", devices=1'),
                          ("max_epochs=2", "max_epochs=3, logger=False, enable_checkpointing=False, "
                                           "enable_progress_bar=False")],
}
UNCONDITIONAL = [("torch_compile=torch.cuda.is_available()", "torch_compile=True"),
                 ("if torch.cuda.is_available():\n    model.compile()", "model.compile()")]


def versions(name: str) -> dict[str, str]:
    rs = RuleSet(tuple(resolve_selection(select=["ALL"])), environment=installed_versions())
    fixed = check_source((DATA / name).read_bytes(), name, rs, "unsafe").fixed.decode()
    for old, new in BUDGET[name]:
        assert old in fixed, old
        fixed = fixed.replace(old, new)
    before = fixed
    for old, new in UNCONDITIONAL:
        before = before.replace(old, new)
    assert before != fixed, "no compile fix to compare"
    return {"unconditional compile": before, "CUDA-aware compile": fixed}


def run(source: str, name: str) -> float:
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / name).write_text(source)
        # A cold inductor cache each run, as on a first run: a warm one hides most compile time.
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TORCHINDUCTOR_CACHE_DIR": str(Path(work) / "inductor")}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, name], cwd=work, env=env, check=True, capture_output=True)
        return time.perf_counter() - t0


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    print(f"load {os.getloadavg()}")
    for name in BUDGET:
        variants, times = versions(name), {}
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for label in order:
                times.setdefault(label, []).append(run(variants[label], name))
                print(f"{name} {label}: {times[label][-1]:.1f} s", flush=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{name}: median {med['unconditional compile']:.1f} s unconditional vs "
              f"{med['CUDA-aware compile']:.1f} s CUDA-aware: {med['unconditional compile'] / med['CUDA-aware compile']:.2f}x")
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
