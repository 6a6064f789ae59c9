"""A new or changed op signature beside a body edit, in one process, one run.

    python3 bench/new_signature.py [--device cpu|cuda] [--reps 5] [--out bench/results]

One kernel written here (CPU: a C++ launcher; CUDA: device code through NVRTC
and a host launcher), out = alpha * x + OFFSET. Steps, each timed from the
edit to a checked result (`get`, one call, compared with the expected values):

  binding_first  the first `get` on an empty cache and an empty ccache: the
                 kernel library and the shared binding (one per machine and
                 torch) build side by side; the binding is most of it
  body_edit      OFFSET changed in the kernel's code (CUDA: the device code)
  new_signature  the argument renamed in kernel.toml: a signature this cache
                 has never seen (a new namespace, a new kernel library; the
                 shared binding is reused)
  add_argument   a new `float beta` in the signature and in the launcher
                 (CUDA: and the device code), out = alpha * x + beta
  new_kernel     a new kernel (a new folder, name and signature)

Each edit uses a fresh token, so neither the cache nor ccache has seen it.
Medians of --reps; `compiled` lists what each step built. Writes
new_signature-<device>.json and .md to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

CPU_SOURCE = """#include "kreg/abi.h"
KREG_API const char* @NAME@_f32(kreg_tensor out, kreg_tensor x, float alpha@EXTRA_PARAM@, void* stream) {
  (void)stream;
  float* o = static_cast<float*>(out.data);
  const float* a = static_cast<const float*>(x.data);
  for (int64_t i = 0; i < out.numel; ++i) o[i] = alpha * a[i] + @OFFSET@;
  return nullptr;
}
"""

CUDA_DEVICE = """extern "C" __global__ void @NAME@_kernel(const float* x, float* o, long long n, float alpha@EXTRA_PARAM@) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) o[i] = alpha * x[i] + @OFFSET@;
}
"""

CUDA_LAUNCH = """#include "kreg/abi.h"
#include "kreg/launch.h"
KREG_API const char* @NAME@_f32(kreg_tensor out, kreg_tensor x, float alpha@EXTRA_PARAM@, void* stream) {
  long long n = out.numel;
  void* args[] = {&x.data, &out.data, &n, &alpha@EXTRA_ARG@};
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  return kreg_launch("@NAME@_kernel", kreg_dim3{blocks, 1, 1}, kreg_dim3{256, 1, 1}, 0, stream, args);
}
"""

TOML = """format = 1
[cpu]
sources = ["k.cpp"]
cflags = ["-O2"]
[cuda]
compiler = "nvrtc"
sources = ["launch.cpp"]
device_sources = ["device.cu"]
[[op]]
signature = "@NAME@(Tensor x, float @ALPHA@@EXTRA_SIG@) -> Tensor"
dtypes = ["float32"]
"""


class Kernel:
    """The kernel's folder, written from its parameters."""

    def __init__(self, root: Path, name: str):
        self.root, self.name = root, name
        self.offset, self.alpha, self.beta = 1, "alpha", None

    def write(self) -> None:
        folder = self.root / self.name
        folder.mkdir(parents=True, exist_ok=True)
        beta = self.beta
        fields = {"@NAME@": self.name, "@OFFSET@": f"{self.offset}.0f" + (" + beta" if beta else ""),
                  "@ALPHA@": self.alpha, "@EXTRA_SIG@": f", float {beta}=0.0" if beta else "",
                  "@EXTRA_PARAM@": ", float beta" if beta else "", "@EXTRA_ARG@": ", &beta" if beta else ""}

        def fill(text: str) -> str:
            for key, value in fields.items():
                text = text.replace(key, value)
            return text

        for file, text in (("kernel.toml", TOML), ("k.cpp", CPU_SOURCE), ("device.cu", CUDA_DEVICE),
                           ("launch.cpp", CUDA_LAUNCH)):
            path = folder / file
            new = fill(text)
            if not path.exists() or path.read_text() != new:
                path.write_text(new)


def checked_get(registry, torch, kernel: Kernel, device: str) -> tuple[float, list[str]]:
    """Seconds from the call to `get` to a result checked against the expected values."""
    x = torch.arange(1000, dtype=torch.float32, device=device) / 7
    start = time.perf_counter()
    op = registry.get(kernel.name, device=device)
    out = op(x, 2.0, 0.5) if kernel.beta else op(x, 2.0)
    expected = 2.0 * x + kernel.offset + (0.5 if kernel.beta else 0.0)
    if not torch.allclose(out, expected):
        raise AssertionError(f"{kernel.name}: wrong result after the edit")
    seconds = time.perf_counter() - start
    return seconds, list(registry.status(kernel.name, device=device).compiled)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="new_signature_"))
    os.environ.update({"REGISTRY_KERNELS_PATH": str(work / "kernels"), "REGISTRY_CACHE_DIR": str(work / "cache"),
                       "CCACHE_DIR": str(work / "ccache")})
    import torch

    import registry

    token = iter(range(1, 1 << 30))
    kernel = Kernel(work / "kernels", "sig_bench")
    kernel.write()
    first_s, first_compiled = checked_get(registry, torch, kernel, args.device)
    steps: dict[str, list[tuple[float, list[str]]]] = {k: [] for k in
                                                       ("body_edit", "new_signature", "add_argument", "new_kernel")}
    for _ in range(args.reps):  # interleaved, so drift touches every step alike
        kernel.offset = 10 + next(token)
        kernel.write()
        steps["body_edit"].append(checked_get(registry, torch, kernel, args.device))
        kernel.alpha = f"alpha_{next(token)}"
        kernel.write()
        steps["new_signature"].append(checked_get(registry, torch, kernel, args.device))
        kernel.beta = f"beta_{next(token)}"
        kernel.write()
        steps["add_argument"].append(checked_get(registry, torch, kernel, args.device))
        kernel.beta = None
        kernel.write()
        checked_get(registry, torch, kernel, args.device)  # back to one argument (a cached state), untimed
        other = Kernel(work / "kernels", f"sig_bench_new_{next(token)}")
        other.write()
        steps["new_kernel"].append(checked_get(registry, torch, other, args.device))

    body = statistics.median(s for s, _ in steps["body_edit"])
    result = {
        "device": args.device, "reps": args.reps, "machine": f"{platform.node()} ({os.cpu_count()} cpus)",
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "binding_first": {"seconds": first_s, "compiled": first_compiled},
        "steps": {name: {"median_s": statistics.median(s for s, _ in runs), "all_s": [s for s, _ in runs],
                         "compiled": sorted({c for _, cs in runs for c in cs}),
                         "vs_body_edit": statistics.median(s for s, _ in runs) / body}
                  for name, runs in steps.items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"new_signature-{args.device}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# A new or changed signature beside a body edit ({args.device})", "",
             f"{result['date']}, {result['machine']}, torch {result['torch']}. Command: "
             f"`python3 bench/new_signature.py --device {args.device} --reps {args.reps}`", "",
             f"The shared binding's first build (first get, empty cache and ccache): {first_s:.2f} s, "
             f"compiled {', '.join(first_compiled)}", "",
             "| step | median | / body edit | compiled |", "|---|---|---|---|"]
    for name, row in result["steps"].items():
        lines.append(f"| {name} | {row['median_s']:.3f} s | {row['vs_body_edit']:.2f} | {', '.join(row['compiled'])} |")
    (args.out / f"new_signature-{args.device}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
