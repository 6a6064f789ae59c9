"""registry.tune on the CPU backend: a row-sum kernel with 8 configs (unroll
depth x independent accumulators), from an empty cache and cached, with the
exhaustive re-measure and the per-call check of bench/tune_rows.py.

    python3 bench/tune_cpu.py --out DIR [--shapes 4096x256,256x4096,64x65536]

The kernel is written to a temporary kernels folder (REGISTRY_KERNELS_PATH);
the registry cache and ccache start empty. Writes DIR/tune_cpu.md and .json.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tune_rows  # noqa: E402  (the shared measurement)

MANIFEST = """\
format = 1
description = "y[r] = sum of row r (accumulated in double)"
reference = "reference.py"
cflags = ["-O2"]

[cpu]
sources = ["rowsum_cpu.cpp"]

[[op]]
signature = "rowsum(Tensor x) -> Tensor y"
outputs = { y = "float32[x.shape[:-1]]" }
dtypes = ["float32"]
sweep = { x = "[rows, cols]" }

[tune]
params = { UNROLL = [1, 2, 4, 8], ACCUMULATORS = [1, 4] }
rule = "ACCUMULATORS <= UNROLL * 4"
"""

SOURCE = r"""// rowsum: y[r] = sum over c of x[r, c], in double, UNROLL columns a step
// spread over ACCUMULATORS independent sums (a longer dependency chain
// with one, more registers with more).
#include "kreg/cpu.h"

#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef ACCUMULATORS
#define ACCUMULATORS 1
#endif

KREG_API const char* rowsum_f32(kreg_tensor y, kreg_tensor x, void*) {
  const int64_t rows = kreg::row_count(x), cols = kreg::row_length(x);
  const float* xs = static_cast<const float*>(x.data);
  float* ys = static_cast<float*>(y.data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = xs + r * cols;
    double acc[ACCUMULATORS] = {};
    int64_t c = 0;
    for (; c + UNROLL <= cols; c += UNROLL) {
#pragma GCC unroll 8
      for (int u = 0; u < UNROLL; ++u) acc[u % ACCUMULATORS] += row[c + u];
    }
    for (; c < cols; ++c) acc[0] += row[c];
    double total = 0;
    for (int a = 0; a < ACCUMULATORS; ++a) total += acc[a];
    ys[r] = static_cast<float>(total);
  }
  return nullptr;
}
"""

REFERENCE = """\
def rowsum(x):
    return x.double().sum(dim=-1)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", default="4096x256,256x4096,64x65536")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kernels = Path(tempfile.mkdtemp(prefix="tune-kernels-"))
    folder = kernels / "rowsum_tune"
    folder.mkdir()
    (folder / "kernel.toml").write_text(MANIFEST)
    (folder / "rowsum_cpu.cpp").write_text(SOURCE)
    (folder / "reference.py").write_text(REFERENCE)
    os.environ["REGISTRY_KERNELS_PATH"] = str(kernels)
    tune_rows.fresh_caches()
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    tune_rows.measure_and_report(["rowsum_tune"], shapes, "float32", "cpu", args.out, "tune_cpu")


if __name__ == "__main__":
    main()
