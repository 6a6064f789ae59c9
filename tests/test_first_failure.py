"""A compile error is reported as soon as it happens: the builds beside it (the
shared binding, with torch's headers, takes 15-60 s here on a machine's first
get) are stopped, their compilers killed, instead of being waited for."""
from __future__ import annotations

import os

from figures import figure


# In a fresh process on an empty cache, with ccache off: the shared binding
# (one per machine, with torch's headers) really compiles beside the library.
FIRST_GET = r"""
import json, os, sys, time
from pathlib import Path
import registry, torch
from registry.builder.build_processes import processes_in

name, cache = sys.argv[1], sys.argv[2]
start = time.perf_counter()
try:
    registry.get(name, device="cpu")
    raise SystemExit("the syntax error built")
except registry.BuildError as error:
    first = error.first.file if error.first is not None else None
error_s = time.perf_counter() - start
staging = list((Path(cache) / "v1" / "tmp").glob(f"{os.getpid()}-*"))
running = [pid for folder in staging for pid in processes_in(folder)]
source = Path(sys.argv[3])
source.write_text(source.read_text().replace("return nullptr\n", "return nullptr;\n"))
start = time.perf_counter()
op = registry.get(name, device="cpu")
binding_s = time.perf_counter() - start
x = torch.randn(8)
print(json.dumps({"first": first, "error_s": error_s, "binding_s": binding_s, "running": running,
                  "compiled": registry.status(name, device="cpu").compiled,
                  "right": bool(torch.allclose(op(x, x, 2.0), 3 * x))}))
"""


def test_a_syntax_error_does_not_wait_for_the_binding_beside_it(axpy_copy, tmp_path):
    import json
    import subprocess
    import sys

    axpy_copy.edit("axpy_cpu.cpp", "return nullptr;", "return nullptr")  # the one-line mistake
    cache = tmp_path / "cache"
    env = {**os.environ, "REGISTRY_CACHE_DIR": str(cache), "CCACHE_DISABLE": "1"}
    done = subprocess.run([sys.executable, "-c", FIRST_GET, axpy_copy.name, str(cache),
                           str(axpy_copy.path("axpy_cpu.cpp"))], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["first"] is not None and result["first"].endswith("axpy_cpu.cpp"), result
    assert not result["running"], "a compiler of the stopped build runs on"
    # The fix builds the binding in full: what the error no longer waited for.
    assert "binding" in result["compiled"] and result["right"], result
    error_s, binding_s = result["error_s"], result["binding_s"]
    figure(f"syntax error reported after {error_s:.2f} s; the binding beside it builds in {binding_s:.2f} s")
    assert error_s < 0.5 * binding_s, (error_s, binding_s)
