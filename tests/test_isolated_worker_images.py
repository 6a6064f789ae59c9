"""The isolated worker's side of a kernel's device code (registry/isolation/worker.py),
without a GPU: it reads a module image (module_images.py) where the registry
package cannot be imported, and binds each new cubin a launcher library gets,
as the parent's process does."""
from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest

from registry.device import module_images
from registry.isolation import launch_env, wire
from test_launch_api import tiny_elf

WORKER_DIR = os.path.dirname(launch_env.WORKER_SCRIPT)


def test_the_worker_splits_an_image_without_the_registry_package(tmp_path):
    """Run as launch_env starts it (-E -s -S, no PYTHONPATH, not from the
    checkout), where `import registry` fails, it finds an image's first module
    (Cuda.bind_cubin loads that one; the launcher library the others)."""
    first, second = tiny_elf(b"vectorized kernel"), tiny_elf(b"scalar kernel, a little longer")
    (tmp_path / "image").write_bytes(module_images.join([first, second]))
    python, env = launch_env.command("plain")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import worker\n"
            "try:\n    import registry\nexcept ImportError:\n    pass\nelse:\n    raise SystemExit('registry importable')\n"
            "sys.stdout.buffer.write(worker.module_images().split(open('image', 'rb').read())[0])")
    done = subprocess.run([*python[:-1], "-c", code, WORKER_DIR], env=env, cwd=tmp_path, capture_output=True,
                          check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == first and python[0] == sys.executable


@pytest.fixture
def worker_module(monkeypatch):
    monkeypatch.syspath_prepend(WORKER_DIR)
    import worker

    return worker


class BindingsSeen:
    """Stands in for the worker's Cuda: which cubin each bind gave which library."""

    def __init__(self):
        self.bound = []

    def bind_cubin(self, library, cubin: str) -> None:
        self.bound.append((library._name, cubin))


def test_an_edit_of_device_code_alone_binds_its_cubin_to_the_same_library(worker_module):
    """A device-only edit keeps the launcher library and brings a new cubin:
    a worker that bound only a library's first cubin ran the code from before
    the edit (seen on an H100 with a linked kernel)."""
    worker = worker_module.Worker(sock=None)
    worker.cuda = BindingsSeen()
    libc = ctypes.util.find_library("c")

    def load(launcher_id: int, cubin: str) -> None:
        assert worker.load(wire.pack_load(launcher_id, "f", libc, "abs", cubin, [4])) == b"K"

    load(1, "/cache/a.cubin")
    load(2, "/cache/a.cubin")  # another op of the same build: bound already
    load(3, "/cache/b.cubin")  # the edit
    load(4, "/cache/a.cubin")  # its revert
    assert worker.cuda.bound == [(libc, "/cache/a.cubin"), (libc, "/cache/b.cubin"), (libc, "/cache/a.cubin")]
    assert sorted(worker.launchers) == [1, 2, 3, 4]


def test_a_revert_loads_its_launcher_again_so_that_its_cubin_is_bound():
    """The parent's side: a launcher the worker has is reused while its
    library serves the same cubin; after an edit of device code alone and its
    revert, the revert's launcher is loaded again (which binds its cubin),
    under the same id. Seen on an H200: the revert ran the edit's code."""
    from registry.isolation import supervisor

    sent = []
    worker = object.__new__(supervisor.Worker)
    worker.launchers, worker.bound_cubins, worker.channel = {}, {}, None

    def request(message: bytes, timeout: float) -> bytes:
        launcher_id, _, _, _, cubin, _, _ = wire.unpack_load(message)
        sent.append((launcher_id, cubin))
        return b"K"

    worker.request = request

    def launcher(cubin: str) -> int:
        return worker.launcher_id("/cache/lib.so", "axpy_f32", cubin, "TTf", [4, 4, 4], 1.0)

    assert [launcher("a.cubin"), launcher("a.cubin"), launcher("b.cubin"), launcher("a.cubin")] == [1, 1, 2, 1]
    assert sent == [(1, "a.cubin"), (2, "b.cubin"), (1, "a.cubin")]
