"""Readable text report of a profile document (stdlib only). Diagnosis first."""

from __future__ import annotations

from typing import Any


def _bytes(n: Any) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return str(n)


def _ms(s: Any) -> str:
    return "n/a" if s is None else f"{s * 1e3:.2f} ms"


def _num(x: Any, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def format_report(doc: dict[str, Any]) -> str:
    lines: list[str] = []
    status = doc.get("status", "?")
    ranks = f", {doc['world_size']} ranks" if (doc.get("world_size") or 1) > 1 else ""
    lines.append(f"gpuperf-rewrite profile: {doc.get('script')}  [{status}{ranks}]")
    if status in ("crashed", "timeout", "no_steps"):
        why = {
            "crashed": f"the script failed (exit code {doc.get('exit_code')})",
            "timeout": "the script ran past --timeout and was stopped",
            "no_steps": "the script finished without a single optimizer step",
        }[status]
        lines.append(f"  {why}" + (f": {doc['error']}" if doc.get("error") else ""))
        tail = (doc.get("stderr_tail") or "").strip()
        if tail:
            lines.append("  stderr (tail):")
            lines.extend("    " + ln for ln in tail.splitlines()[-15:])
    if doc.get("ended_early") and doc.get("measured_steps"):
        lines.append(
            f"  note: the script ended after {doc.get('total_steps')} steps, before warmup+steps; "
            f"measured over the {doc.get('measured_steps')} steps that ran"
        )
    diag = doc.get("diagnosis") or []
    if diag:
        lines.append("")
        lines.append("Bottlenecks (most severe first):")
        for i, f in enumerate(diag, 1):
            rules = ", ".join(f["rules"]) if f["rules"] else "-"
            lines.append(f"  {i}. [{f['severity']:.2f}] {f['evidence']}  (rules: {rules})")
    if doc.get("measured_steps"):
        st = doc.get("step_time_s") or {}
        lines.append("")
        lines.append(
            f"Throughput: {_num(doc.get('steps_per_s'))} steps/s, {_num(doc.get('samples_per_s'), '.1f')} samples/s"
            f" (batch size {doc.get('batch_size') if doc.get('batch_size') is not None else 'n/a'})"
        )
        lines.append(
            f"Step time:  median {_ms(st.get('median'))}, p10 {_ms(st.get('p10'))}, p90 {_ms(st.get('p90'))}"
            f" over {doc.get('measured_steps')} steps after {doc.get('warmup_steps')} warmup"
            f" ({doc.get('timing_source', 'host')} clock)"
        )
        stall = doc.get("input_stall_fraction")
        lines.append(f"Input stall: {'n/a (no DataLoader)' if stall is None else f'{stall:.1%}'}"
                     f"   host syncs/step: {_num(doc.get('syncs_per_step'), '.2f') if doc.get('syncs_per_step') is not None else 'n/a (CPU)'}")
    mem = doc.get("memory") or {}
    if mem:
        lines.append(
            f"Memory: peak allocated {_bytes(mem.get('peak_allocated_bytes'))}, reserved {_bytes(mem.get('peak_reserved_bytes'))},"
            f" peak RSS {_bytes(mem.get('peak_rss_bytes'))}"
        )
    gpu = doc.get("gpu")
    if gpu:
        lines.append(
            f"GPU: busy {_num(gpu.get('utilization_pct_mean'), '.0f')}%, SM clock {_num(gpu.get('sm_clock_mhz_mean'), '.0f')} MHz,"
            f" power {_num(gpu.get('power_w_mean'), '.0f')} W, {_num(gpu.get('energy_j_per_step'), '.3f')} J/step,"
            f" memory used {_bytes(gpu.get('memory_used_bytes_max'))}"
        )
    comp = doc.get("compile")
    if comp:
        lines.append(f"torch.compile: {_num(comp.get('time_s'))} s compiling, {comp.get('graph_breaks')} graph break(s)")
    loss = [x for x in doc.get("loss") or [] if x is not None]
    if loss:
        lines.append(f"Loss: {loss[0]:.4g} -> {loss[-1]:.4g} over {len(loss)} steps"
                     + (" (unscaled by GradScaler)" if doc.get("loss_unscaled_by_gradscaler") else ""))
    for s in doc.get("stragglers") or []:
        lines.append(f"Straggler: rank {s['rank']} (+{s['excess_s'] * 1e3:.1f} ms per step before backward())")
    tr = doc.get("trace")
    if tr:
        lines.append(f"Trace: {tr.get('path')} ({tr.get('steps')} steps)")
        for op in (tr.get("top_ops") or [])[:5]:
            lines.append(f"    {op['name'][:60]:60s} device {op['self_device_time_us'] / 1e3:8.2f} ms"
                         f"  cpu {op['self_cpu_time_us'] / 1e3:8.2f} ms")
    fp = doc.get("fingerprint") or {}
    if fp:
        lines.append(
            f"Environment: {fp.get('device_name')} ({fp.get('device')}), torch {fp.get('torch')}, CUDA {fp.get('cuda')},"
            f" Python {fp.get('python')}, {fp.get('cpu_count')} CPUs, env {str(fp.get('env_hash'))[:12]}"
        )
    return "\n".join(lines)
