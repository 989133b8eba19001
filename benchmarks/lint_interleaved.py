"""Interleaved lint CPU/wall on every 10th file of the installed torch package: a baseline tree vs this one.

Usage: python benchmarks/lint_interleaved.py ROUNDS BASELINE_SITE
(BASELINE_SITE: `pip install --no-deps --target DIR <old tree>`; run by PYTHONPATH with this interpreter).
"""
import os, resource, statistics, subprocess, sys, time, glob
import torch
root = os.path.dirname(torch.__file__)
files = sorted(glob.glob(root + "/**/*.py", recursive=True))[::10]
lines = sum(sum(1 for _ in open(f, errors="replace")) for f in files)
print(f"{len(files)} files, {lines} lines; load {os.getloadavg()}")
py = sys.executable
base = sys.argv[2] if len(sys.argv) > 2 else "/tmp/base_a8"
def one(pp):
    env = dict(os.environ); env.pop("PYTHONPATH", None)
    if pp: env["PYTHONPATH"] = pp
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.perf_counter()
    p = subprocess.run([py, "-m", "gpuperf_rewrite", "--isolated", "--no-cache", "-j", "1", "--select", "ALL",
                        "--output-format", "json", *files], capture_output=True, text=True, env=env, cwd="/tmp")
    w = time.perf_counter() - t0; r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu, w, p.stdout.count('"code"')
res = {"before a8cf162": [], "main": []}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    for name, pp in (("before a8cf162", base), ("main", None)) if r % 2 == 0 else (("main", None), ("before a8cf162", base)):
        res[name].append(one(pp)); print(name, *("%.2f" % x for x in res[name][-1][:2]), res[name][-1][2], flush=True)
for name, rs in res.items():
    print(f"{name}: median CPU {statistics.median(c for c,_,_ in rs):.2f} s, median wall {statistics.median(w for _,w,_ in rs):.2f} s, findings {rs[0][2]}")
b = statistics.median(c for c,_,_ in res["before a8cf162"]); m = statistics.median(c for c,_,_ in res["main"])
print(f"CPU ratio main/before = {m/b:.3f}; load {os.getloadavg()}")
