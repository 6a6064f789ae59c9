"""The package's floor plan, checked on its source (ARCHITECTURE.md states
the same rules): each module is parsed with `ast`, nothing is imported.

  - the top level (registry/*.py: the cached `get` path, the public face,
    errors, the op handle) imports the layer packages (builder, device,
    remote, notebook, tools, isolation, tuning) only inside functions, so a fresh process's
    cached `get` loads none of them;
  - builder/ and device/ never import notebook/, tuning/ or tools/;
  - nothing imports tools/ but tools/ itself and the CLI entry (__main__);
  - no module but knobs writes os.environ;
  - no import cycle among the package's modules, counting the imports made
    inside functions too;
  - no include cycle among the core's units (registry/core: a unit is a
    header and its .cc; a test file is no unit).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "registry"
LAYERS = ("builder", "device", "remote", "notebook", "tools", "isolation", "tuning")
ENVIRON_WRITERS = {"update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "fuzz" not in p.parts}
COMPILED = {"registry._core"}  # the pybind11 module: imports nothing of the package


def _is_module(name: str) -> bool:
    return name in MODULES or name in COMPILED


class _Import:
    def __init__(self, target: str, line: int, in_function: bool):
        self.target, self.line, self.in_function = target, line, in_function


def _imports(module: str) -> list[_Import]:
    """Every registry module `module` imports, with where and whether inside a function."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: list[_Import] = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "registry":
                        found.append(_Import(alias.name, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                if base.split(".")[0] == "registry":
                    for alias in child.names:
                        sub = f"{base}.{alias.name}"
                        found.append(_Import(sub if _is_module(sub) else base, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return [i for i in found if _is_module(i.target)]


def _layer(module: str) -> str | None:
    """The layer package a module belongs to, None for the top level."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


def test_every_module_parses_and_the_layers_exist():
    assert {_layer(m) for m in MODULES} >= set(LAYERS), sorted(MODULES)
    for module in MODULES:
        _imports(module)


def test_the_top_level_imports_layers_only_inside_functions():
    wrong = [f"{m}:{i.line} imports {i.target} at module level"
             for m in MODULES if _layer(m) is None and m != "registry.__main__"
             for i in _imports(m) if _layer(i.target) is not None and not i.in_function]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("layer", ["builder", "device"])
def test_builder_and_device_never_import_the_notebook_tuning_or_tools(layer):
    wrong = [f"{m}:{i.line} imports {i.target}" for m in MODULES if _layer(m) == layer
             for i in _imports(m) if _layer(i.target) in ("notebook", "tuning", "tools")]
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_tools_but_the_cli_entry():
    wrong = [f"{m}:{i.line} imports {i.target}" for m in MODULES
             if _layer(m) != "tools" and m != "registry.__main__"
             for i in _imports(m) if _layer(i.target) == "tools"]
    assert not wrong, "\n".join(wrong)


def _environ_writes(path: Path) -> list[int]:
    """Lines that change the process environment: os.environ[...] = / del,
    os.environ.update/pop/..., os.putenv, os.unsetenv."""
    def is_environ(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ"
                and isinstance(node.value, ast.Name) and node.value.id == "os") \
            or (isinstance(node, ast.Name) and node.id == "environ")

    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            lines += [node.lineno for t in targets if isinstance(t, ast.Subscript) and is_environ(t.value)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if (is_environ(f.value) and f.attr in ENVIRON_WRITERS) or (
                    isinstance(f.value, ast.Name) and f.value.id == "os" and f.attr in ("putenv", "unsetenv")):
                lines.append(node.lineno)
    return lines


# Runs as an AOT package's setup.py, in pip's build process, where setuptools reads the arch list
# from the environment; the registry imports only its pure functions.
SETUP_SCRIPT = {"registry.package_setup": ["target_archs"]}


def test_only_knobs_writes_the_environment():
    allowed = {(m, line) for m, functions in SETUP_SCRIPT.items()
               for node in ast.walk(ast.parse(MODULES[m].read_text()))
               if isinstance(node, ast.FunctionDef) and node.name in functions
               for line in range(node.lineno, node.end_lineno + 1)}
    wrong = [f"{m}:{line}" for m, path in MODULES.items() if m != "registry.knobs" for line in _environ_writes(path)
             if (m, line) not in allowed]
    assert not wrong, "os.environ written outside registry/knobs.py: " + ", ".join(wrong)
    assert _environ_writes(MODULES["registry.knobs"]), "the check must see knobs' own writes"


def test_no_import_cycle():
    graph = {m: sorted({i.target for i in _imports(m)} - {m} - COMPILED) for m in MODULES}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)

def _cycle(graph: dict[str, list[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for n in graph.get(node, []):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := walk(n)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := walk(node)):
            return found
    return None


def test_no_include_cycle_among_the_core_units():
    core = PACKAGE / "core"
    units = {p.stem for p in core.glob("*.h")}
    graph: dict[str, list[str]] = {}
    for source in [*core.glob("*.h"), *core.glob("*.cc")]:
        if source.stem.endswith("_test"):
            continue
        included = re.findall(r'^#include "(\w+)\.h"', source.read_text(), re.M)
        graph.setdefault(source.stem, [])
        graph[source.stem] += [u for u in included if u in units and u != source.stem]
    assert len(graph) > 20, sorted(graph)
    cycle = _cycle(graph)
    assert cycle is None, "include cycle: " + " -> ".join(cycle)


def _faces(target: str) -> list[str]:
    """What importing `target` runs: each package above it (its __init__.py), then it."""
    parts = target.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts)) if ".".join(parts[:i]) in MODULES] + [target]


def test_no_import_cycle_through_a_package_face():
    """Importing registry.isolation.wire runs registry/isolation/__init__.py
    first: a package whose __init__ imports a module that imports the package's
    other modules at module level makes a cycle the module graph alone hides.
    Module-level imports only (a function's import runs after both are done)."""
    graph = {m: sorted({face for i in _imports(m) if not i.in_function for face in _faces(i.target)}
                       - {m} - COMPILED) for m in MODULES}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle through a package face: " + " -> ".join(cycle)
