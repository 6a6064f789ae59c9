"""A link per kernel runs on threads pinned to physical cores of their own
(registry/device/lto_link.py: NVVM is cache-bound, and unpinned links side by
side were ~20 % slower on a 16-core host). The cores are read from the
kernel's topology, so two hardware threads of one core count once."""
from __future__ import annotations

import os
import threading
import time

import pytest

from registry.builder import parallelism
from registry.device import lto_link


def fake_topology(root, cores_of_cpu: dict[int, tuple[int, int]]) -> None:
    for cpu, (package, core) in cores_of_cpu.items():
        topology = root / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{package}\n")
        (topology / "core_id").write_text(f"{core}\n")


def test_one_cpu_is_kept_per_physical_core(tmp_path, monkeypatch):
    # Two packages; CPUs 4-7 are the second hardware threads of CPUs 0-3.
    fake_topology(tmp_path, {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1),
                             4: (0, 0), 5: (0, 1), 6: (1, 0), 7: (1, 1)})
    monkeypatch.setattr(parallelism, "CPU_TOPOLOGY", str(tmp_path))
    assert parallelism.one_cpu_per_core(set(range(8))) == [0, 1, 2, 3]
    assert parallelism.one_cpu_per_core({5, 6, 1}) == [1, 6]  # only those allowed; 5 is 1's sibling


def test_every_allowed_cpu_where_the_topology_cannot_be_read(tmp_path, monkeypatch):
    monkeypatch.setattr(parallelism, "CPU_TOPOLOGY", str(tmp_path / "absent"))
    assert parallelism.one_cpu_per_core({3, 1, 2}) == [1, 2, 3]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin two threads apart")
def test_each_kernels_link_runs_pinned_to_a_core_of_its_own():
    seen: dict[str, set[int]] = {}
    lock = threading.Lock()

    class Linker:  # stands in for nvJitLink: records where each link ran
        def link(self, irs, options):
            kernel = options[-1].split("=", 1)[1]
            with lock:
                seen[kernel] = os.sched_getaffinity(0)
            time.sleep(0.2)  # as long as a link: the other thread takes the other kernel
            return b"", "", {"NVVM": 1.0}

    before = os.sched_getaffinity(0)
    lto_link._link_each(Linker(), [], [], ("k0", "k1"))  # the stand-in's empty cubins name no kernel: None
    assert sorted(seen) == ["k0", "k1"]
    assert all(len(cpus) == 1 for cpus in seen.values()), seen
    assert seen["k0"] != seen["k1"], seen
    assert os.sched_getaffinity(0) == before  # the caller's thread is not pinned
