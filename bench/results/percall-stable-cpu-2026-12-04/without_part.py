"""Removes one part of the fast entry from a checkout's registry/core/fast_entry.cc,
for measuring what that part costs (never committed to a tree that runs ops):

    python without_part.py CHECKOUT {modes,profiler,version,grad}

then build that checkout's core (cmake --build build/core) and time it with
fast_loop.py beside an unchanged one."""
import sys
from pathlib import Path

checkout, part = Path(sys.argv[1]), sys.argv[2]
path = checkout / "registry" / "core" / "fast_entry.cc"
text = path.read_text()
EDITS = {
    "modes": ("bool plain_context() {\n", "bool plain_context() {\n  return true;\n"),
    "profiler": ("const Recorded recorded(table.op_name, python_true(python.profiler_enabled));",
                 "const Recorded recorded(table.op_name, false);"),
    "version": ("      if ((table.mutated_mask >> i) & 1u) {\n        PyObject* one", "      if (false) {\n        PyObject* one"),
    "grad": ("  if (aoti_torch_grad_mode_is_enabled()) {", "  if (false) {"),
}
old, new = EDITS[part]
assert text.count(old) == 1, f"{part}: the fast entry's text changed since this was written"
path.write_text(text.replace(old, new))
