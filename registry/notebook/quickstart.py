"""The quickstart, headless: get axpy, call it, edit a header, get it again.

    python -m registry.quickstart

It works on a scratch copy of kernels/axpy (your checkout is not edited) and
uses CUDA when there is a GPU, the CPU build otherwise. Every step prints what
the registry did and how long it took.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    from registry import knobs

    scratch = Path(tempfile.mkdtemp(prefix="registry-quickstart-"))
    shutil.copytree(knobs.CHECKOUT / "kernels" / "axpy", scratch / "axpy")
    knobs.put_kernel_root_first(scratch)
    try:
        run(scratch / "axpy")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(kernel_dir: Path) -> None:
    import torch

    import registry

    from registry import knobs

    print(f"torch {torch.__version__}, cache {knobs.cache_dir()}")

    axpy = timed("registry.get('axpy')", lambda: registry.get("axpy"))
    device = axpy.backend  # the registry's rule chose it: REGISTRY_DEVICE, else CUDA when available
    print(f"  device {device}")
    print(f"  -> {axpy}  ({registry.status('axpy').outcome})")
    x = torch.randn(1 << 20, device=device)
    y = torch.randn(1 << 20, device=device)
    out = axpy(x, y, 1.5)
    print(f"axpy(x, y, 1.5): max |out - (1.5 x + y)| = {(out - (1.5 * x + y)).abs().max().item():.2e}")

    config = kernel_dir / "include" / "axpy" / "config.h"
    original = config.read_text()
    config.write_text(original.replace("#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 1.0f"))
    print("\nedited include/axpy/config.h: AXPY_BIAS 0.0f -> 1.0f (a header two includes deep)")
    timed("registry.get('axpy')", lambda: registry.get("axpy"))
    print(f"  -> the same handle now adds 1: mean(out - (1.5 x + y)) = {(axpy(x, y, 1.5) - (1.5 * x + y)).mean().item():.4f}")
    print("  why it rebuilt: " + "; ".join(registry.status("axpy").changes))

    config.write_text(original)
    print("\nreverted the header")
    timed("registry.get('axpy')", lambda: registry.get("axpy"))
    print(f"  -> {registry.status('axpy').outcome}: the earlier build, no compile;"
          f" mean offset now {(axpy(x, y, 1.5) - (1.5 * x + y)).mean().item():.4f}")

    # A file written within a timestamp tick of its stamp is re-hashed on each
    # get until the tick has passed (racy stamps, core/file_stamp.h, as git
    # does): right after the revert, an unchanged get still hashes the files.
    timed("registry.get('axpy') at once, nothing changed (files just written: re-hashed)", lambda: registry.get("axpy"))
    time.sleep(0.15)
    timed("registry.get('axpy') a tick later (the stamps re-recorded)", lambda: registry.get("axpy"))
    hot = []
    for _ in range(5):  # the first also takes in the watch's events of the revert's write
        start = time.perf_counter()
        registry.get("axpy")
        hot.append(time.perf_counter() - start)
    print(f"registry.get('axpy') 5 more times (the hot path): {', '.join(f'{t * 1e6:.0f} us' for t in hot)}")
    timed("registry.get('axpy', rebuild=True)", lambda: registry.get("axpy", rebuild=True))

    print("\nregistry.status('axpy'):")
    print(registry.status("axpy"))
    print("\nregistry.list():")
    for info in registry.list():
        print(f"  {info}")


def timed(label: str, fn):
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    shown = f"{elapsed * 1e3:.2f} ms" if elapsed < 1 else f"{elapsed:.2f} s"
    print(f"{label}: {shown}")
    return result


if __name__ == "__main__":
    main()
