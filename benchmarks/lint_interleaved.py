"""Interleaved lint CPU/wall, a baseline tree vs this one: every 10th file of the installed torch
package, or every file of a folder (``--corpus DIR``: a mixed repository whose own modules import
each other, issue 27).

Usage: python benchmarks/lint_interleaved.py ROUNDS BASELINE_SITE [--corpus DIR]
(BASELINE_SITE: `pip install --no-deps --target DIR <old tree>`; run by PYTHONPATH with this interpreter).
Files are passed explicitly, one process per run, `--isolated --no-cache -j 1 --select ALL`; with
``--corpus`` the run's working directory is DIR, so its project root and imports are its own.
Bytecode is cached for both arms alike (``PYTHONPYCACHEPREFIX`` in a temporary folder, one
uncounted warm-up run each): a `pip install --target` baseline ships .pyc files while an
editable tree under PYTHONDONTWRITEBYTECODE compiles its modules on every run, which alone cost
the tree 0.1-0.4 s a run.
"""
import argparse, glob, os, resource, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("rounds", type=int, nargs="?", default=3)
ap.add_argument("baseline", nargs="?", default="/tmp/base_a8")
ap.add_argument("--corpus", help="lint every .py file of this folder instead of the torch package")
args = ap.parse_args()
if args.corpus:
    cwd = os.path.abspath(args.corpus)
    files = sorted(os.path.relpath(f, cwd) for f in glob.glob(cwd + "/**/*.py", recursive=True))
else:
    import torch
    cwd = "/tmp"
    files = sorted(glob.glob(os.path.dirname(torch.__file__) + "/**/*.py", recursive=True))[::10]
lines = sum(sum(1 for _ in open(os.path.join(cwd, f), errors="replace")) for f in files)
print(f"{len(files)} files, {lines} lines; load {os.getloadavg()}")
py = sys.executable


PYCACHE = tempfile.mkdtemp(prefix="lint-interleaved-pyc-")


def one(pp):
    env = dict(os.environ); env.pop("PYTHONPATH", None); env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = PYCACHE
    if pp: env["PYTHONPATH"] = pp
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.perf_counter()
    p = subprocess.run([py, "-m", "gpuperf_rewrite", "--isolated", "--no-cache", "-j", "1", "--select", "ALL",
                        "--output-format", "json", *files], capture_output=True, text=True, env=env, cwd=cwd)
    w = time.perf_counter() - t0; r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu, w, p.stdout.count('"code"')


res = {"baseline": [], "this tree": []}
one(args.baseline), one(None)  # warm-up: bytecode compiled for both, not counted
for r in range(args.rounds):
    order = (("baseline", args.baseline), ("this tree", None))
    for name, pp in order if r % 2 == 0 else order[::-1]:
        res[name].append(one(pp)); print(name, *("%.2f" % x for x in res[name][-1][:2]), res[name][-1][2], flush=True)
for name, rs in res.items():
    print(f"{name}: median CPU {statistics.median(c for c,_,_ in rs):.2f} s, median wall "
          f"{statistics.median(w for _,w,_ in rs):.2f} s, per-round CPU {', '.join('%.2f' % c for c,_,_ in rs)}, "
          f"findings {rs[0][2]}")
b = statistics.median(c for c,_,_ in res["baseline"]); m = statistics.median(c for c,_,_ in res["this tree"])
print(f"CPU ratio this tree/baseline = {m/b:.3f}; load {os.getloadavg()}")
