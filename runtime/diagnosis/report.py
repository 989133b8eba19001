"""Readable text report of a profile document (stdlib only). Diagnosis first."""

from __future__ import annotations

from typing import Any


# What host_reads_per_step counted (runtime/measure/syncs.py), said beside the number.
READS_COUNTED = {
    "device": "(reads of device tensors: a host sync each)",
    "cpu_would_sync": "(CPU run: reads in the training step, which would each sync if those tensors "
                      "lived on a GPU; data loading and loader workers not counted)",
}


def fmt_bytes(n: Any) -> str:
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
        reads = doc.get("host_reads_per_step")
        if reads is not None:
            lines.append(f"Tensor reads to Python/step: {reads:.2f} " + READS_COUNTED.get(
                str(doc.get("host_reads_counted")), "(.item()/print/...)"))
    lines.extend(memory_section(doc.get("memory") or {}))
    gpu = doc.get("gpu")
    if gpu:
        lines.append(
            f"GPU: busy {_num(gpu.get('utilization_pct_mean'), '.0f')}%, SM clock {_num(gpu.get('sm_clock_mhz_mean'), '.0f')} MHz,"
            f" power {_num(gpu.get('power_w_mean'), '.0f')} W, {_num(gpu.get('energy_j_per_step'), '.3f')} J/step,"
            f" memory used {fmt_bytes(gpu.get('memory_used_bytes_max'))}"
        )
    comp = doc.get("compile")
    if comp:
        lines.append(f"torch.compile: {_num(comp.get('time_s'))} s compiling, {comp.get('graph_breaks')} graph break(s)")
    loss = [x for x in doc.get("loss") or [] if x is not None]
    if loss:
        lines.append(f"Loss: {loss[0]:.4g} -> {loss[-1]:.4g} over {len(loss)} steps"
                     + (" (unscaled by GradScaler)" if doc.get("loss_unscaled_by_gradscaler") else ""))
    lines.extend(amp_section(doc))
    lines.extend(distributed_section(doc))
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


def _first_last(series: Any) -> tuple[Any, Any]:
    vals = [v for v in series or [] if v is not None]
    return (vals[0], vals[-1]) if vals else (None, None)


def memory_section(mem: dict[str, Any]) -> list[str]:
    if not mem:
        return []
    lines = ["Memory:"]
    peaks = f"  peak RSS {fmt_bytes(mem.get('peak_rss_bytes'))}"
    if mem.get("peak_allocated_bytes") is not None:
        peaks = (f"  peak allocated {fmt_bytes(mem.get('peak_allocated_bytes'))}, reserved "
                 f"{fmt_bytes(mem.get('peak_reserved_bytes'))} (fragmentation {fmt_bytes(mem.get('fragmentation_bytes'))})"
                 f" of {fmt_bytes(mem.get('device_total_bytes'))};" + peaks)
    lines.append(peaks)
    series = [("device allocated", mem.get("allocated_per_step")), ("heap", mem.get("heap_per_step")),
              ("RSS", mem.get("rss_per_step"))]
    spans = [f"{name} {fmt_bytes(a)} -> {fmt_bytes(b)}" for name, s in series
             for a, b in [_first_last(s)] if a is not None]
    if spans:
        thinned = [f"{name} every {k} steps" for name, k in (mem.get("sample_stride") or {}).items() if k > 1]
        lines.append("  over the window: " + ", ".join(spans)
                     + (f" (sampled: {', '.join(thinned)})" if thinned else ""))
    growth = mem.get("growth_bytes_per_step")
    if growth is not None:
        source = {"allocated": "device allocated", "heap": "heap"}.get(mem.get("growth_source"), "RSS")
        if mem.get("growth_steady"):
            left = mem.get("steps_to_oom")
            oom = (f": out of memory in ~{left:,.0f} steps ({fmt_bytes(mem.get('available_bytes'))} left)"
                   if left is not None else "")
            lines.append(f"  GROWING: {growth / 2**20:+.2f} MiB per step ({source}, steady){oom}")
        else:
            lines.append(f"  growth: none steady ({growth / 2**20:+.2f} MiB per step fitted, {source})")
    factor = mem.get("batch_size_factor")
    if factor is not None:
        lines.append(f"  headroom: activations at the peak fit ~{factor:g}x in the memory left "
                     "(batch-size advice only; see the diagnosis)")
    return lines


def amp_section(doc: dict[str, Any]) -> list[str]:
    amp = doc.get("amp") or {}
    dtypes, check = amp.get("autocast_dtypes") or [], amp.get("precision_check")
    if not dtypes and not amp.get("gradscaler") and not check:
        return []
    parts = [f"autocast {'/'.join(dtypes)}" if dtypes else "no autocast"]
    if amp.get("gradscaler"):
        frac = amp.get("skipped_fraction")
        a, b = _first_last(amp.get("scale_per_step"))
        parts.append(f"GradScaler skipped {amp.get('skipped_in_window', 0)} measured steps"
                     + (f" ({frac:.0%})" if frac is not None else "")
                     + (f", scale {a:.3g} -> {b:.3g}" if a is not None else ""))
    if check:
        if check.get("status") in ("ok", "drift"):
            parts.append(f"vs fp32 reference: {check['status']} (median relative loss difference "
                         f"{_num(check.get('median_rel_diff'), '.3g')}, tolerance {check.get('rtol'):g})")
        else:
            parts.append(f"fp32 reference: {check.get('status')}: {check.get('reason', '')}".rstrip(": "))
    return ["Mixed precision: " + "; ".join(parts)]


def distributed_section(doc: dict[str, Any]) -> list[str]:
    dist = doc.get("distributed")
    if not dist:
        return []
    lines = [f"Distributed: {doc.get('world_size') or 1} ranks, {dist.get('backend')}, comm hook "
             f"{dist.get('comm_hook')}, gradient_as_bucket_view={dist.get('gradient_as_bucket_view')}, "
             f"bucket_cap_mb={_num(dist.get('bucket_cap_mb'), 'g')}"]
    if not dist.get("timed"):
        lines.append(f"  all-reduce not timed{': ' + dist['untimed_reason'] if dist.get('untimed_reason') else ''}")
        return lines

    def pct(x: Any) -> str:
        return "n/a" if x is None else f"{x:.0%}"

    lines.append(f"  all-reduce in flight {pct(dist.get('comm_fraction'))} of step time, exposed after backward "
                 f"{pct(dist.get('exposed_comm_fraction'))}; {_num(dist.get('buckets_per_step'), '.1f')} buckets "
                 f"and {_num(dist.get('backwards_per_step'), '.1f')} backward passes per step")
    for r in dist.get("per_rank") or []:
        lines.append(f"  rank {r['rank']}: in flight {pct(r.get('comm_fraction'))}, exposed "
                     f"{pct(r.get('exposed_comm_fraction'))}, all-reduce {_ms(r.get('allreduce_median_s'))} per step")
    if dist.get("comm_spread_s") is not None:
        lines.append(f"  spread across ranks {_ms(dist['comm_spread_s'])}: rank {dist.get('waited_for_rank')} "
                     "spends least in the all-reduce (the others wait for it)")
    return lines
