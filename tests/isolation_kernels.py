"""Kernel folders the isolation tests write and edit: one launcher body at a
time, good or faulty, so every fault is a real one of a real build."""
from __future__ import annotations

import contextlib
from pathlib import Path

CPU_TOML = """format = 1
description = "an isolation test kernel: out = a * x + k"

[cpu]
sources = ["kernel.cpp"]
cflags = ["-O1"]

[[op]]
signature = "{name}(Tensor x, float a) -> Tensor"
dtypes = ["float32"]
"""

CPU_SOURCE = """#include <cstdlib>
#include "kreg/abi.h"

KREG_API const char* {name}_f32(kreg_tensor out, kreg_tensor x, float a, void* stream) {{
  const float* xs = static_cast<const float*>(x.data);
  float* os = static_cast<float*>(out.data);
  (void)stream;
{body}
  return nullptr;
}}
"""


def good(k: int) -> str:
    return f"  for (int64_t i = 0; i < out.numel; ++i) os[i] = a * xs[i] + {k}.0f;"


# Each faulty body, with what the fault is (a test's label).
CPU_FAULTS = {
    "write far past the end": "  for (int64_t i = 0; i < out.numel; ++i) os[i + (int64_t(1) << 36)] = xs[i];",
    "read out of bounds": "  for (int64_t i = 0; i < out.numel; ++i) os[i] = xs[i + (int64_t(1) << 36)];",
    "null pointer": "  *static_cast<volatile float*>(nullptr) = a;",
    "abort": "  std::abort();",
    "endless loop": "  for (;;) asm volatile(\"\");",
    "integer division by zero (SIGFPE)": "  volatile int zero = 0; os[0] = float(int(a) / zero);",
}

# Faulty bodies for checked builds, just past the end, and the line of the
# faulting access in CPU_SOURCE (the body is its line 8).
CHECKED_BODIES = {
    "out-of-bounds write": ("  for (int64_t i = 0; i <= out.numel; ++i) os[i] = a * xs[i < out.numel ? i : 0];", 8),
    "out-of-bounds read": ("  for (int64_t i = 0; i < out.numel; ++i) os[i] = a * xs[i + 1];", 8),
}


def write_cpu_kernel(root: Path, name: str, body: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.toml").write_text(CPU_TOML.format(name=name))
    (folder / "kernel.cpp").write_text(CPU_SOURCE.format(name=name, body=body))
    return folder / "kernel.cpp"


CUDA_TOML = """format = 1
description = "an isolation test kernel on CUDA: out = a * x + k"

[cuda]
sources = ["kernel.cu"]
cflags = ["-O2"]

[[op]]
signature = "{name}(Tensor x, float a) -> Tensor"
dtypes = ["float32"]
"""

CUDA_SOURCE = """#include <cassert>
#include <cuda_runtime.h>
#include "kreg/abi.h"

__global__ void body(float* os, const float* xs, int64_t n, float a) {{
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
{body}
}}

KREG_API const char* {name}_f32(kreg_tensor out, kreg_tensor x, float a, void* stream) {{
  const int64_t n = out.numel;
  body<<<(n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<float*>(out.data), static_cast<const float*>(x.data), n, a);
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}}
"""


def cuda_good(k: int) -> str:
    return f"  if (i < n) os[i] = a * xs[i] + {k}.0f;"


CUDA_FAULTS = {
    "write far past the end": "  if (i < n) os[i + (int64_t(1) << 40)] = xs[i];",
    "read out of bounds": "  if (i < n) os[i] = xs[i + (int64_t(1) << 40)];",
    "null pointer": "  if (i == 0) *static_cast<volatile float*>(nullptr) = a;",
    "misaligned vector access": "  if (i == 0) *reinterpret_cast<float4*>(reinterpret_cast<char*>(os) + 4) = make_float4(a, a, a, a);",
    "device trap": "  if (i == 0) __trap();",
    "device-side assert": "  assert(i < 0);",
    # A loop without side effects may be removed by the compiler (forward progress):
    # this one reads memory on every turn, and x is never negative.
    "endless loop": "  while (*static_cast<const volatile float*>(xs) >= 0.0f) {}",
}

# A checked CUDA build's fault one element past the end; the body is line 7.
CUDA_CHECKED_WRITE = ("  if (i <= n) os[i] = a * xs[i < n ? i : 0];", 7)


def cuda_write_past_end(k: int) -> tuple[str, int]:
    """k threads write just past the end of out, whatever n (the grid covers n
    threads only when n is a multiple of 256); the body is line 7."""
    return f"  if (i < n) os[i] = a * xs[i]; if (i < {k}) os[n + i] = a;", 7


def write_cuda_kernel(root: Path, name: str, body: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.toml").write_text(CUDA_TOML.format(name=name))
    (folder / "kernel.cu").write_text(CUDA_SOURCE.format(name=name, body=body))
    return folder / "kernel.cu"


# Writes just past the end (or before the start) of a tensor, by a few
# elements: what an isolated op must report as the normal op would crash on.
def write_past_end_of_out(k: int) -> str:
    return f"  for (int64_t i = 0; i < out.numel + {k}; ++i) os[i] = a * xs[i < out.numel ? i : 0];"


def write_before_start_of_out(k: int) -> str:
    return f"  for (int64_t i = -{k}; i < out.numel; ++i) os[i] = a * xs[i < 0 ? 0 : i];"


def write_past_end_of_x(k: int) -> str:
    return (f"  for (int64_t i = 0; i < out.numel; ++i) os[i] = a * xs[i];\n"
            f"  for (int64_t i = 0; i < {k}; ++i) const_cast<float*>(xs)[x.numel + i] = a;")


def read_past_end_of_x(k: int) -> str:
    return f"  for (int64_t i = 0; i < out.numel; ++i) os[i] = a * xs[i] + xs[x.numel + {k} - 1];"


INPLACE_TOML = """format = 1
description = "an isolation test kernel: y = a * y in place"

[cpu]
sources = ["kernel.cpp"]
cflags = ["-O1"]

[[op]]
signature = "{name}(Tensor(a!) y, float a) -> ()"
dtypes = ["float32"]
"""

INPLACE_SOURCE = """#include "kreg/abi.h"

KREG_API const char* {name}_f32(kreg_tensor y, float a, void* stream) {{
  float* ys = static_cast<float*>(y.data);
  (void)stream;
  for (int64_t i = 0; i < y.numel + {k}; ++i) ys[i] = a * (i < y.numel ? ys[i] : 1.0f);
  return nullptr;
}}
"""


def write_cpu_inplace_kernel(root: Path, name: str, k: int) -> Path:
    """y *= a over k elements past y's end (k = 0: a good kernel)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.toml").write_text(INPLACE_TOML.format(name=name))
    (folder / "kernel.cpp").write_text(INPLACE_SOURCE.format(name=name, k=k))
    return folder / "kernel.cpp"


CUDA_INPLACE_TOML = INPLACE_TOML.replace('[cpu]\nsources = ["kernel.cpp"]', '[cuda]\nsources = ["kernel.cu"]')

CUDA_INPLACE_SOURCE = """#include <cuda_runtime.h>
#include "kreg/abi.h"

__global__ void body(float* ys, int64_t n, float a) {{
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) ys[i] *= a;
  {stray}
}}

KREG_API const char* {name}_f32(kreg_tensor y, float a, void* stream) {{
  const int64_t n = y.numel;
  body<<<(n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<float*>(y.data), n, a);
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}}
"""


def write_cuda_inplace_kernel(root: Path, name: str, k: int) -> Path:
    """y *= a on CUDA, then k threads write just past y's end (k < 0: -k
    elements before its start; k = 0: a good kernel)."""
    stray = (f"if (i < {k}) ys[n + i] = a;" if k > 0 else f"if (i < {-k}) ys[-1 - i] = a;" if k < 0 else "")
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.toml").write_text(CUDA_INPLACE_TOML.format(name=name))
    (folder / "kernel.cu").write_text(CUDA_INPLACE_SOURCE.format(name=name, stray=stray))
    return folder / "kernel.cu"


@contextlib.contextmanager
def cuda_worker_with_channel(monkeypatch, setting: str):
    """The plain CUDA worker is retired on entry and on exit, so the one in
    between starts with
    REGISTRY_ISOLATE_CUDA_CHANNEL=`setting` ("1" the call channel, "0" the socket)."""
    from registry.isolation.supervisor import SUPERVISOR

    def stop():
        worker = SUPERVISOR.workers.get(("plain", "cuda"))
        if worker is not None:
            SUPERVISOR.retire(worker)

    stop()
    monkeypatch.setenv("REGISTRY_ISOLATE_CUDA_CHANNEL", setting)
    try:
        yield
    finally:
        stop()
