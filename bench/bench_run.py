"""What the start-up benchmarks share: their command line, the JSON line a
child process prints, and the two files a run leaves in --out
(<name>-<device>.json with every figure, <name>-<device>.md with the line
that is also printed)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def parse_args(reps: int | None = None) -> argparse.Namespace:
    """--device (the GPU where torch sees one), --out and, given a default, --reps."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cpu", "cuda"], default=None)
    if reps is not None:
        ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--out", default=str(CHECKOUT / "bench" / "results"))
    args = ap.parse_args()
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return args


def run_child(script: str, *argv: str, env: dict[str, str], cwd: Path | None = None) -> dict:
    """The last line a fresh Python running `script` prints, as JSON; a failed
    child ends the benchmark with the tail of its stderr."""
    done = subprocess.run([sys.executable, "-c", script, *argv], env=env, cwd=None if cwd is None else str(cwd),
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_header(device: str, command: str) -> dict:
    """The fields every result starts with: when, where, and how to run it again."""
    import torch

    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "device": device,
            "machine": torch.cuda.get_device_name(0) if device == "cuda" else f"cpu, {os.cpu_count()} cores",
            "torch": torch.__version__, "command": command}


def write_results(out: str, name: str, result: dict, figures: str) -> None:
    """`figures`, stamped with the header's when, where and command, is the line."""
    line = f"{result['date']} {result['machine']} torch {result['torch']}: {figures}; `{result['command']}`"
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}-{result['device']}.json").write_text(json.dumps(result, indent=1))
    (folder / f"{name}-{result['device']}.md").write_text(line + "\n")
    print(line)
