"""registry.tune with device code through NVRTC: 24 configs x 3 sizes of a
copy of kernels/axpy_nvrtc whose hand-set constants (threads per block,
16-byte vectors per thread) are its [tune] space; from an empty cache, cached,
re-measured exhaustively, and per call, as bench/tune_rows.py does.

    python3 bench/tune_nvrtc.py --out DIR [--sizes 1048576,16777216,67108864] [--dtype float32]

The copy is written to a temporary kernels folder (REGISTRY_KERNELS_PATH);
the registry cache and ccache start empty. Each config is one NVRTC compile
(in a thread) and one host-launcher build (the compiler, in a subprocess).
Writes DIR/tune_nvrtc.md and .json.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tune_rows  # noqa: E402  (the shared measurement)

NAME = "axpy_nvrtc_tune"
TUNE = """
[tune]
params = { AXPY_THREADS = [256, 32, 64, 128, 512, 1024], AXPY_VECTORS_PER_THREAD = [4, 1, 2, 8] }
rule = "AXPY_THREADS * AXPY_VECTORS_PER_THREAD <= 8192"
"""


def write_copy(root: Path) -> None:
    folder = root / NAME
    shutil.copytree(tune_rows.CHECKOUT / "kernels" / "axpy_nvrtc", folder)
    for path, name, value in ((folder / "axpy_shape.h", "AXPY_THREADS", "256"),
                              (folder / "include" / "axpy_nvrtc" / "config.h", "AXPY_VECTORS_PER_THREAD", "4")):
        text = path.read_text()
        line = f"#define {name} {value}"
        assert line in text, (path, line)
        path.write_text(text.replace(line, f"#ifndef {name}\n{line}\n#endif"))
    manifest = folder / "kernel.toml"
    manifest.write_text(manifest.read_text() + TUNE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sizes", default=f"{1 << 20},{1 << 24},{1 << 26}")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    kernels = Path(tempfile.mkdtemp(prefix="tune-kernels-"))
    write_copy(kernels)
    os.environ["REGISTRY_KERNELS_PATH"] = str(kernels)
    tune_rows.fresh_caches()
    shapes = [(int(n),) for n in args.sizes.split(",")]
    tune_rows.measure_and_report([NAME], shapes, args.dtype, "cuda", args.out, "tune_nvrtc")


if __name__ == "__main__":
    main()
