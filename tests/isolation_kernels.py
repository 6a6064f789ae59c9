"""Kernel folders the isolation tests write and edit: one launcher body at a
time, good or faulty, so every fault is a real one of a real build."""
from __future__ import annotations

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
