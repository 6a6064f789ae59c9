"""The launcher table is declared once (registry/include/kreg/launcher_table.h);
the isolation side's ctypes mirror (registry/isolation/proxy.py) must lay it
out as the compiler does, and take its dtype table from the core's."""
from __future__ import annotations

import ast
import ctypes
from pathlib import Path

import pytest
import torch

from registry import _core, dtypes
from registry.isolation import proxy

ISOLATION = Path(proxy.__file__).resolve().parent

# proxy.py's Structure for each C struct of kreg/launcher_table.h. The route
# struct has none: a proxy table drops its routes (routes is a void*).
MIRRORS = {
    "kreg_launcher_dim_term": proxy._DimTerm,
    "kreg_launcher_output_decl": proxy._OutputDecl,
    "kreg_launcher_table": proxy.LauncherTable,
}


@pytest.mark.parametrize("c_name", sorted(MIRRORS))
def test_the_ctypes_mirror_has_the_compilers_layout(c_name):
    core = _core.table_layout()["structs"][c_name]
    mirror = MIRRORS[c_name]
    mirrored = {name: (getattr(mirror, name).offset, getattr(mirror, name).size) for name, _ in mirror._fields_}
    assert mirrored == {name: tuple(at) for name, at in core["fields"].items()}, c_name
    assert ctypes.sizeof(mirror) == core["size"], c_name


def test_the_limits_and_magic_are_the_cores():
    limits = _core.table_layout()["limits"]
    assert (proxy.MAX_ARGS, proxy.MAX_OUTPUTS, proxy.MAX_OUTPUT_DIMS, proxy.DTYPE_SLOTS, proxy.TABLE_MAGIC) == (
        limits["max_args"], limits["max_outputs"], limits["max_output_dims"], limits["dtype_slots"], limits["magic"])
    assert limits["dtype_slots"] == len(_core.DTYPES)


def test_proxy_dtype_table_is_the_cores_and_torchs():
    assert proxy.DTYPE_NAMES == dtypes.NAMES
    assert proxy.ITEM_SIZES == tuple(torch.empty(0, dtype=dtypes.torch_dtype(n)).element_size() for n in dtypes.NAMES)


def _dtype_tables(path: Path) -> list[int]:
    """Lines of tuple/list/set/dict literals naming two or more of the table's dtypes."""
    names = set(dtypes.NAMES)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            spelled = {i.value for i in items if isinstance(i, ast.Constant) and i.value in names}
            if len(spelled) >= 2:
                found.append(node.lineno)
    return found


def test_isolation_keeps_no_dtype_table_of_its_own():
    own = {p.name: lines for p in sorted(ISOLATION.glob("*.py")) if (lines := _dtype_tables(p))}
    assert own == {}, "registry/isolation spells dtype tables; take them from registry.dtypes (core/dtype.h)"
