"""How registry.tune checks a config before it times it: every config runs
on the same random inputs (never zeros) of one (op, dtype, shape), and its
outputs are compared with the manifest's float64 reference, computed once
(checks.py's tolerances and rules). A config that computes wrong, whose
launcher returns an error, or that crashes is dropped and reported, never
timed or chosen.

The check call runs in an isolated worker (registry/isolation/) unless
isolate=False: a config that writes out of bounds, dereferences a null
pointer or faults on the device raises KernelFault there, and the notebook,
its tensors and its CUDA context keep working. Only configs that passed at
a shape are timed at it, in this process, on inputs of the same shapes.
"""
from __future__ import annotations

import sys


def workers_running() -> set[int]:
    """The isolated workers alive now, by identity (none before isolation is first used)."""
    supervisor = sys.modules.get("registry.isolation.supervisor")
    return {id(w) for w in supervisor.SUPERVISOR.workers.values()} if supervisor is not None else set()


def stop_workers_started_since(before: set[int]) -> None:
    """Stops the isolated workers that were not running at `before`."""
    supervisor = sys.modules.get("registry.isolation.supervisor")
    if supervisor is None:
        return
    with supervisor.SUPERVISOR.lock:
        for worker in list(supervisor.SUPERVISOR.workers.values()):
            if id(worker) not in before:
                supervisor.SUPERVISOR.retire(worker)


class CaseCheck:
    """One (op, dtype, shape): its inputs, drawn once, the reference's
    outputs, and problem(op) for each config's op."""

    def __init__(self, spec, torch_dtype, backend: str, shape_of: dict, args: dict, reference_fn, module,
                 isolate: bool):
        import torch

        from registry import _core
        from registry.notebook import checks

        self.spec, self.module, self.isolate = spec, module, isolate
        generator = torch.Generator(device=backend).manual_seed(0)
        self.inputs = checks.make_args(spec, 0, torch_dtype, backend, generator, args, shape_of=shape_of)
        # The binding routes a call by its first (non-optional) Tensor argument's shape (core/launcher_table.h).
        self.bucket = _core.shape_bucket(list(self.inputs[spec.signature.first_tensor()].shape))
        refs = reference_fn(*checks.reference_args(self.inputs))
        self.refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
        self.names = [r.name for r in spec.signature.returns] or [a.name for a in spec.signature.args if a.mutated]
        # What each config runs on: one set of tensors, refilled from the inputs
        # before each config (a Tensor(a!) argument is written). Kept across
        # configs, so an isolated worker maps a CPU tensor's memory once.
        self.trial = [a.clone() if isinstance(a, torch.Tensor) else a for a in self.inputs]

    def problem(self, op, artifacts: dict | None = None) -> str:
        """"" when `op` (a config's op; artifacts: its build's files) computes
        what the reference does, else why not, in a few words."""
        import torch

        from registry.isolation.faults import KernelFault

        for trial, given in zip(self.trial, self.inputs):
            if isinstance(trial, torch.Tensor):
                trial.copy_(given)
        if self.isolate:
            from registry.isolation.handle import isolated

            op = isolated(op, artifacts=artifacts)
        try:
            return self._compare(op(*self.trial))
        except KernelFault as fault:
            return f"fault in the isolated worker: {fault.what}"
        except Exception as error:  # a launcher's error string, a bad launch
            return f"fault: {first_line(error)}"

    def _compare(self, returned) -> str:
        from registry.notebook import checks

        outs = checks.results(self.spec, self.trial, returned)
        if len(outs) != len(self.refs):
            return f"the reference returned {len(self.refs)} values for {len(outs)} outputs"
        for name, out, ref in zip(self.names, outs, self.refs):
            rtol, atol = checks.tolerance(checks.dtype_name(out.dtype), self.module, self.spec.name)
            result = checks.compare(out, ref, rtol, atol)
            if not result.passed:
                return f"wrong: {name}: {result.reason}"
        return ""


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"
