"""Artifacts keyed apart from the core's plan: built or found beside the
plan's misses, then pinned, loaded, recorded (the memo keeps their keys and
stamps as given, core/plan.h's Outcome.apart) and shown as the plan's are.
resolve.py asks this table, not any kind by name.

    device   the cubin of device code with its own compiler (the manifest's
             [cuda] compiler: "nvrtc" or "nvcc-cubin"; registry/device/in_get.py)

A kind is a row of KINDS: whether a manifest has one (`wanted`), and a module
imported only then, so a get of a kernel without one loads none of it. That
module's start(manifest, plan, store, env, cache_root, rebuild=, remote=,
host_misses=) returns a job whose result() is the artifact (an object with
entry, built, key, path, stamps, source and miss_reason, as
builder/artifacts.Artifact has), and its status_line(artifact) is what
registry.status shows for it.
"""
from __future__ import annotations

import importlib

from registry import environment

KINDS = {
    "device": (lambda manifest, backend: bool(environment.section(manifest, backend).device_compiler),
               "registry.device.in_get"),
}


def start(manifest, backend: str, plan, store, env: dict, cache_root, *, rebuild: bool, remote,
          host_misses: bool) -> dict:
    """{kind: job} for each kind the manifest has on `backend`."""
    jobs = {}
    for kind, (wanted, module) in KINDS.items():
        if wanted(manifest, backend):
            jobs[kind] = importlib.import_module(module).start(
                manifest, plan, store, env, cache_root, rebuild=rebuild, remote=remote, host_misses=host_misses)
    return jobs


def status_lines(artifacts: dict) -> dict[str, str]:
    """{kind: its status line} for each artifact of a kind here."""
    return {kind: importlib.import_module(KINDS[kind][1]).status_line(artifacts[kind])
            for kind in KINDS if kind in artifacts}
