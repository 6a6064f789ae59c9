"""A prelude ([cuda] prelude, registry/device/nvrtc_pch.py) checked without a
GPU: NVRTC keeps its precompiled header in a compile server across builds,
an edit of the device sources compiles without making it again, an edit of
the prelude or of a header it includes makes it again (NVRTC itself would
reuse the old one), the key follows both, and a dead server is replaced."""
from __future__ import annotations

import os
import signal

import pytest

from device_build_helpers import build, copy_example, cubin, fresh_compile_servers, store  # noqa: F401 (fixtures)
from registry.device import nvrtc_pch, pch_server
from registry.errors import RegistryError

PRELUDE = """#pragma once
#include "prelude_dep.h"
template <int N> __device__ float poly(float x) {
  float r = 0.0f;
  for (int i = 0; i < N; ++i) r = r * x + PRELUDE_C;
  return r;
}
template __device__ float poly<8>(float);
"""
BODY_KERNEL = '\nextern "C" __global__ void with_poly(float* y) { y[threadIdx.x] = poly<8>(y[threadIdx.x]); }\n'


@pytest.fixture
def kernel(tmp_path):
    copy = copy_example(tmp_path / "kernels", "nvrtc", "_pch")
    copy.path("axpy_prelude.cuh").write_text(PRELUDE)
    copy.path("prelude_dep.h").write_text("#define PRELUDE_C 1.0f\n")
    copy.edit("kernel.toml", 'compiler = "nvrtc"', 'compiler = "nvrtc"\nprelude = "axpy_prelude.cuh"')
    with open(copy.path("axpy_device.cu"), "a") as f:
        f.write(BODY_KERNEL)
    return copy


def events_during(action):
    start = len(nvrtc_pch.pch_events)
    result = action()
    return result, nvrtc_pch.pch_events[start:]


def the_server() -> nvrtc_pch.PchServer:
    (server,) = nvrtc_pch._servers.values()
    return server


def test_an_edit_of_the_device_sources_reuses_the_prelude(kernel, store):
    first, events = events_during(lambda: build(kernel, store))
    assert events == ["created"] and first.built is not None
    kernel.edit("axpy_device.cu", "poly<8>(y[threadIdx.x])", "poly<8>(y[threadIdx.x]) + 1.0f")
    edited, events = events_during(lambda: build(kernel, store, first))
    assert events == ["used"], events
    assert edited.key != first.key and cubin(edited) != cubin(first)
    # Going back is answered by the cache: no compile at all.
    kernel.edit("axpy_device.cu", "poly<8>(y[threadIdx.x]) + 1.0f", "poly<8>(y[threadIdx.x])")
    back, events = events_during(lambda: build(kernel, store, edited))
    assert events == [] and back.built is None and back.key == first.key


def test_a_compile_says_where_its_time_went(kernel, store, monkeypatch, capsys):
    """NVRTC's own phases, in the status's device line and in the progress
    bar's final label (shown in a notebook or terminal: forced on here)."""
    from registry.builder import progress
    from registry.device import in_get

    monkeypatch.setattr(progress, "_should_show", lambda: True)
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)  # this prelude compiles in well under a second
    first = build(kernel, store)
    phases = first.built.phases
    assert phases.startswith("front end ") and phases.endswith("; the prelude's precompiled header created")
    assert ", NVVM " in phases and ", ptxas " in phases, phases
    assert phases in in_get.status_line(first) and "compiled in" in in_get.status_line(first)
    assert "done after" in capsys.readouterr().err
    kernel.edit("axpy_device.cu", "poly<8>(y[threadIdx.x])", "poly<8>(y[threadIdx.x]) * 2.0f")
    edited = build(kernel, store, first)
    assert edited.built.phases.endswith("precompiled header used"), edited.built.phases
    assert f"({edited.built.phases})" in capsys.readouterr().err
    # Found in the cache: nothing compiled, nothing to say.
    assert "compiled in" not in in_get.status_line(build(kernel, store, edited))


def test_an_edit_of_the_prelude_or_its_header_makes_it_again_and_changes_the_key(kernel, store):
    first = build(kernel, store)
    kernel.edit("axpy_prelude.cuh", "r * x + PRELUDE_C", "r * x - PRELUDE_C")
    prelude_edit, events = events_during(lambda: build(kernel, store, first))
    assert events == ["created"], events
    assert prelude_edit.key != first.key and cubin(prelude_edit) != cubin(first)
    # A header only the prelude includes: NVRTC would load the old PCH as it is.
    kernel.path("prelude_dep.h").write_text("#define PRELUDE_C 2.0f\n")
    header_edit, events = events_during(lambda: build(kernel, store, prelude_edit))
    assert events == ["created"], events
    assert header_edit.key != prelude_edit.key and cubin(header_edit) != cubin(prelude_edit)
    assert "file:prelude_dep.h" in {i.name for i in header_edit.entry.inputs}


def test_the_server_lives_across_builds_and_a_dead_one_is_replaced(kernel, store):
    build(kernel, store)
    server = the_server()
    pid = server.process.pid
    kernel.edit("axpy_device.cu", "poly<8>(y[threadIdx.x])", "poly<8>(y[threadIdx.x]) * 2.0f")
    _, events = events_during(lambda: build(kernel, store))
    assert events == ["used"] and server.process.pid == pid and server.starts == 1
    os.kill(pid, signal.SIGKILL)
    server.process.wait()
    kernel.edit("axpy_device.cu", "* 2.0f", "* 3.0f")
    after, events = events_during(lambda: build(kernel, store))
    # A new server, whose heap holds no PCH yet: it makes it again.
    assert events == ["created"] and server.starts == 2 and server.process.pid != pid
    assert after.built is not None


def test_a_header_gone_from_the_kernel_is_gone_from_the_servers_workspace(kernel, store):
    kernel.path("extra.h").write_text("#define EXTRA 4.0f\n")
    kernel.edit("axpy_device.cu", 'extern "C" __global__ void with_poly',
                '#include "extra.h"\nextern "C" __global__ void with_poly')
    kernel.edit("axpy_device.cu", "poly<8>(y[threadIdx.x])", "poly<8>(y[threadIdx.x]) + EXTRA")
    build(kernel, store)
    workspace = the_server().workspace
    assert list(workspace.glob("*/src/k/extra.h"))
    kernel.path("extra.h").unlink()
    kernel.edit("axpy_device.cu", "+ EXTRA", "+ EXTRA + 1.0f")
    with pytest.raises(RegistryError, match="extra.h"):
        build(kernel, store)  # the header is gone: the workspace's old copy must not be read
    assert not list(workspace.glob("*/src/k/extra.h"))


def test_the_server_keeps_the_last_few_precompiled_headers_only(kernel, store):
    # A CUTLASS prelude's PCH is ~3 GB: one per prelude edit would fill the disk.
    for value in range(pch_server.KEPT_PCHS + 2):
        kernel.path("prelude_dep.h").write_text(f"#define PRELUDE_C {value}.0f\n")
        build(kernel, store)
    assert len(list(the_server().workspace.glob("*/prelude.pch"))) == pch_server.KEPT_PCHS


def test_a_manifest_edit_of_the_device_flags_makes_it_again(kernel, store):
    kernel.path("prelude_dep.h").write_text("#ifndef PRELUDE_C\n#define PRELUDE_C 1.0f\n#endif\n")
    first = build(kernel, store)
    kernel.edit("kernel.toml", 'prelude = "axpy_prelude.cuh"',
                'prelude = "axpy_prelude.cuh"\ndevice_cflags = ["-DPRELUDE_C=5.0f"]')
    flagged, events = events_during(lambda: build(kernel, store, first))
    assert events == ["created"], events
    assert flagged.key != first.key and cubin(flagged) != cubin(first)


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our own child: reap it, or it lingers as a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_the_server_exits_after_idling(monkeypatch, tmp_path):
    from registry.device import nvrtc

    monkeypatch.setattr(nvrtc_pch, "IDLE_SECONDS", 0.5)
    server = nvrtc_pch.server_for(nvrtc.load().library, tmp_path)
    server._start()
    assert wait_gone(server.process.pid)


def test_the_server_dies_with_its_parent(tmp_path):
    import subprocess
    import sys

    from conftest import CHECKOUT

    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys; from registry.device import nvrtc, nvrtc_pch; "
         f"s = nvrtc_pch.server_for(nvrtc.load().library, {str(tmp_path)!r}); s._start(); "
         "print(s.process.pid, flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(CHECKOUT)})
    pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    assert wait_gone(pid)  # its stdin closed with the parent


def test_without_libcuxx_the_error_says_where_to_get_it(kernel, store, monkeypatch):
    monkeypatch.setattr(nvrtc_pch, "cccl_root", lambda include: None)
    kernel.edit("axpy_prelude.cuh", '#include "prelude_dep.h"', '#include "prelude_dep.h"\n#include <cuda/std/cstddef>')
    with pytest.raises(RegistryError, match="nvidia-cuda-cccl"):
        build(kernel, store)


def test_libcuxx_read_in_place_is_part_of_the_prelude_key(kernel, store, monkeypatch):
    # libcu++ is not mirrored: its identity (path, version header) stands for its bytes.
    build(kernel, store)
    plain = nvrtc_pch.NvrtcPchDevice.key_inputs
    monkeypatch.setattr(nvrtc_pch.NvrtcPchDevice, "key_inputs",
                        lambda self: [i if i[0] != "nvrtc.cccl" else (i[0], i[1] + " upgraded") for i in plain(self)])
    _, events = events_during(lambda: build(kernel, store))
    assert events == ["created"], events
