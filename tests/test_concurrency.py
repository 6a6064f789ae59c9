"""Eight processes ask for the same cold kernel at the same instant: exactly
one compiles it, the others wait for its lock and load what it published."""
from __future__ import annotations

import json

import pytest
from conftest import KernelCopy
from reliability_helpers import Child, child_env, figure
from reliability_helpers import binding_seed, private_cache, private_kernels  # noqa: F401 (fixtures)

PROCESSES = 8
ROUNDS = 3

# Each child: import, say ready, then per round wait for the go file (a
# barrier: every child is blocked on it before it appears) and get that
# round's kernel, which no process has built yet.
CHILD = """
say(ready=os.getpid())
for name, go in json.loads(os.environ["ROUNDS_PLAN"]):
    while not os.path.exists(go):
        time.sleep(0.001)
    before = len(step.builds_run)
    result = check(name)
    result["builds"] = result["builds"][before:]
    say(**result)
"""


@pytest.mark.slow
def test_one_compile_per_cold_kernel_across_processes(private_cache, private_kernels, tmp_path):
    plan = []
    for r in range(ROUNDS):
        copy = KernelCopy(private_kernels, "axpy", f"axpy_race{r}")
        plan.append((copy.name, str(tmp_path / f"go{r}")))
    env = child_env(private_cache, private_kernels, ROUNDS_PLAN=json.dumps(plan))
    children = [Child(CHILD, env) for _ in range(PROCESSES)]
    try:
        for child in children:
            child.message(timeout=120)  # ready: torch and registry imported
        per_round = []
        for name, go in plan:
            open(go, "w").close()  # release all eight together
            results = [child.message(timeout=300) for child in children]
            assert all(r["ok"] for r in results), f"wrong result in round {name}: {results}"
            lib_compiles = sum(b == [name, "kernel-lib"] for r in results for b in r["builds"])
            other_compiles = [b for r in results for b in r["builds"] if b != [name, "kernel-lib"]]
            per_round.append(lib_compiles)
            assert lib_compiles == 1, f"{name}: {lib_compiles} kernel-lib compiles across {PROCESSES} processes"
            assert other_compiles == [], f"{name}: unexpected compiles {other_compiles} (the binding is seeded)"
            outcomes = sorted(r["outcome"] for r in results)
            assert outcomes == ["cache"] * (PROCESSES - 1) + ["compiled"], outcomes
        for child in children:
            assert child.finish() == 0, child.stderr_text()
    finally:
        for child in children:
            child.kill_group()
    figure(f"concurrency: {ROUNDS} rounds x {PROCESSES} processes released together on one cold kernel; "
           f"kernel-lib compiles per round: {per_round} (expected 1 each); all results correct")
