import sys, tempfile, json
from pathlib import Path
sys.path.insert(0, "bench")
import gemm_edit_loop as g
loop = g.Loop(Path(tempfile.mkdtemp(prefix="gemm-body2-")), "cuda")
for label in ("cold", "body_edit 1", "body_edit 2"):
    if label.startswith("body"):
        old, new = g.body_edit(int(label[-1]) - 1)
        loop.write("gemm_device.cu", old, new)
    r = loop.step()
    print(label, json.dumps({k: r[k] for k in ("seconds", "compiled", "phases_s", "compile_s")}), flush=True)
    from registry.device import cubin_build
