"""Launchers (torchrun, ``accelerate launch``): which ones, which of their flags the tool sets
itself, and how a launch is named in JSON, notes and messages. One definition for every command
that runs a script (profile, ab, ``--apply``, baseline, regress). Standard library only."""

from __future__ import annotations

import shlex
from typing import Any, Mapping, Sequence

LAUNCHERS = ("torchrun", "accelerate")

# Launcher flags that the tool sets itself: given in --launcher-args they would contradict it.
OWN_LAUNCHER_FLAGS = {
    "torchrun": ("--nproc-per-node", "--nproc_per_node", "--standalone", "--nnodes", "-m", "--module",
                 "--no-python", "--no_python"),
    "accelerate": ("--num_processes", "--num-processes", "-m", "--module", "--no_python", "--no-python"),
}


def check_launcher_args(launcher: str | None, launcher_args: Sequence[str]) -> str | None:
    """Why ``launcher_args`` cannot be passed to ``launcher`` (None when they can)."""
    if not launcher_args:
        return None
    if launcher is None:
        return "--launcher-args needs --launcher"
    if not launcher_args[0].startswith("-"):
        return f"{launcher_args[0]!r} in --launcher-args: only the launcher's options go there"
    for arg in launcher_args:
        flag = arg.split("=", 1)[0]
        if flag in OWN_LAUNCHER_FLAGS[launcher]:
            what = "--nproc-per-node" if "proc" in flag else "the tool"
            return f"{flag} in --launcher-args: set by {what}, not passed through"
    return None


def launch_problem(launcher: str | None, nproc_per_node: int, launcher_args: Sequence[str]) -> str | None:
    """Why this combination of --launcher, --nproc-per-node and --launcher-args is a usage error."""
    if launcher is not None and launcher not in LAUNCHERS:
        return f"unknown launcher {launcher!r}; expected one of {', '.join(LAUNCHERS)}"
    if nproc_per_node < 1:
        return "--nproc-per-node must be at least 1"
    if nproc_per_node > 1 and launcher is None:
        return "--nproc-per-node needs --launcher"
    return check_launcher_args(launcher, launcher_args)


def split_launcher_args(text: str | None) -> tuple[str, ...]:
    """``--launcher-args`` (one string, shell-quoted) as arguments; ValueError naming the option."""
    try:
        return tuple(shlex.split(text or ""))
    except ValueError as exc:
        raise ValueError(f"--launcher-args: {exc}") from exc


def launch_json(launcher: str | None, nproc_per_node: int = 1,
                launcher_args: Sequence[str] = ()) -> dict[str, Any] | None:
    """How runs were launched, as recorded in JSON output and notes; None for plain ``python``."""
    if launcher is None:
        return None
    return {"name": launcher, "nproc_per_node": int(nproc_per_node), "args": [str(a) for a in launcher_args]}


def describe_launch(launch: Mapping[str, Any] | None) -> str:
    """``launch_json``'s value in words, for messages."""
    if not launch:
        return "plain python (no --launcher)"
    args = " ".join(shlex.quote(str(a)) for a in launch.get("args") or ())
    return (f"--launcher {launch.get('name')} --nproc-per-node {launch.get('nproc_per_node')}"
            + (f" --launcher-args {shlex.quote(args)}" if args else ""))
