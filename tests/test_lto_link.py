"""[cuda] link_sources (registry/device/lto_link.py) checked without a GPU:
a link source is compiled apart to LTO-IR and linked with the rest by
nvJitLink; an edit of it compiles it alone and keeps the main unit's LTO-IR;
an edit of a header the main unit reaches compiles that again; the key
follows every file, and going back is a cache hit."""
from __future__ import annotations

import struct

import pytest

from device_build_helpers import build, copy_example, cubin, fresh_compile_servers, inputs, store  # noqa: F401 (fixtures)
from registry.builder import elf
from registry.device import lto_link, module_images, nvrtc_pch
from registry.errors import BuildError, RegistryError

EPILOGUE = "__device__ float axpy_epilogue(float v) { return v * 2.0f; }\n"
CALLER = ('\n__device__ float axpy_epilogue(float v);\n'
          'extern "C" __global__ void with_epilogue(float* y) { y[threadIdx.x] = axpy_epilogue(y[threadIdx.x]); }\n')


@pytest.fixture
def kernel(tmp_path):
    copy = copy_example(tmp_path / "kernels", "nvrtc", "_lto")
    copy.path("epilogue.cu").write_text(EPILOGUE)
    copy.edit("kernel.toml", 'compiler = "nvrtc"', 'compiler = "nvrtc"\nlink_sources = ["epilogue.cu"]')
    with open(copy.path("axpy_device.cu"), "a") as f:
        f.write(CALLER)
    lto_link._kept.clear()
    return copy


def events_during(action):
    start = len(lto_link.main_unit_events)
    result = action()
    return result, lto_link.main_unit_events[start:]


def test_an_edit_of_a_link_source_compiles_it_alone_and_links(kernel, store):
    first, events = events_during(lambda: build(kernel, store))
    assert events == ["compiled"] and first.built is not None
    assert b"with_epilogue" in cubin(first) and "toolchain.nvjitlink" in inputs(first)
    kernel.edit("epilogue.cu", "v * 2.0f", "v * 4.0f")
    edited, events = events_during(lambda: build(kernel, store, first))
    assert events == ["kept"], events
    assert edited.key != first.key and cubin(edited) != cubin(first)
    assert "LTO-IR kept" in edited.built.phases, edited.built.phases
    # Going back is answered by the cache: nothing compiled, nothing linked.
    kernel.edit("epilogue.cu", "v * 4.0f", "v * 2.0f")
    back, events = events_during(lambda: build(kernel, store, edited))
    assert events == [] and back.built is None and back.key == first.key


def declare_kernels_used(kernel, *names: str) -> None:
    listed = ", ".join(f'"{n}"' for n in names)
    kernel.edit("kernel.toml", 'link_sources = ["epilogue.cu"]', f'link_sources = ["epilogue.cu"]\nkernels_used = [{listed}]')


def kernels_of(image: bytes) -> list[list[str]]:
    return [elf.cubin_symbols(c)[0] for c in module_images.split(image)]


def test_once_the_kernels_are_known_each_is_linked_on_its_own(kernel, store):
    """The first link holds every kernel in one module and names them; an
    edit of a link source then links each kernel alone, side by side, into
    an image of a module each; the kernels and what they do are the same."""
    start = len(lto_link.link_events)
    first = build(kernel, store)
    together = kernels_of(cubin(first))
    assert len(together) == 1 and "with_epilogue" in together[0] and len(together[0]) > 2
    assert f"{len(together[0])} kernels linked together (naming them in [cuda] kernels_used" in first.built.phases
    kernel.edit("epilogue.cu", "v * 2.0f", "v * 4.0f")
    edited = build(kernel, store, first)
    each = kernels_of(cubin(edited))
    assert lto_link.link_events[start:] == ["one module", f"a module per kernel ({len(together[0])})"]
    assert all(len(k) == 1 for k in each) and sorted(k[0] for k in each) == sorted(together[0])
    assert f"{len(each)} kernels linked side by side" in edited.built.phases, edited.built.phases
    # The epilogue edit reached the kernel that calls it: 4.0f where the first link had 2.0f.
    module = next(c for c in module_images.split(cubin(edited)) if elf.cubin_symbols(c)[0] == ["with_epilogue"])
    assert struct.pack("<f", 4.0) in module and struct.pack("<f", 4.0) not in cubin(first)


@pytest.mark.parametrize("kernels_used", [(), ("count_a", "count_b")])
def test_kernels_that_use_a_device_global_stay_in_one_module(kernel, store, kernels_used):
    """A __device__ variable two kernels use must be one variable (linked
    alone, the kernel that only reads it would see its initial value folded
    in): a program with a device global is always linked together, named in
    [cuda] kernels_used or not (the per-kernel cubins show the global)."""
    with open(kernel.path("axpy_device.cu"), "a") as f:
        f.write('__device__ int kreg_calls;\nextern "C" __global__ void count_a() { atomicAdd(&kreg_calls, 1); }\n'
                'extern "C" __global__ void count_b(int* out) { *out = kreg_calls; }\n')
    if kernels_used:
        declare_kernels_used(kernel, *kernels_used)
    start = len(lto_link.link_events)
    first = build(kernel, store)
    kernel.edit("epilogue.cu", "v * 2.0f", "v * 4.0f")
    edited = build(kernel, store, first)
    assert lto_link.link_events[start:] == ["one module: the kernels use a device global", "one module"]
    assert len(kernels_of(cubin(edited))) == 1 and b"kreg_calls" in cubin(edited)


def test_more_kernels_than_an_image_holds_are_linked_together(kernel, store, monkeypatch):
    monkeypatch.setattr(module_images, "MAX_MODULES", 3)  # the axpy copy has 7 kernels
    start = len(lto_link.link_events)
    first = build(kernel, store)
    kernel.edit("epilogue.cu", "v * 2.0f", "v * 4.0f")
    edited = build(kernel, store, first)
    assert lto_link.link_events[start:] == ["one module", "one module"] and len(kernels_of(cubin(edited))) == 1


def test_a_link_source_that_defines_a_kernel_or_a_variable_links_everything_together(kernel, store):
    """What the main unit's first link learned covers the main unit only: an
    edit that adds a kernel or a __device__ variable to a link source is
    linked in one module (the new kernel in it, the variable one for all),
    and the edit that takes it out again links a module per kernel."""
    first = build(kernel, store)
    start = len(lto_link.link_events)
    kernel.edit("epilogue.cu", EPILOGUE, EPILOGUE + 'extern "C" __global__ void from_a_link_source(float* y) '
                "{ y[0] = axpy_epilogue(y[0]); }\n")
    with_kernel = build(kernel, store, first)
    assert kernels_of(cubin(with_kernel))[0].count("from_a_link_source") == 1
    kernel.path("epilogue.cu").write_text("static __device__ int kreg_calls;\n__device__ float axpy_epilogue(float v) "
                                          "{ return v + atomicAdd(&kreg_calls, 1); }\n")
    with_variable = build(kernel, store, with_kernel)
    assert len(kernels_of(cubin(with_variable))) == 1
    kernel.path("epilogue.cu").write_text(EPILOGUE.replace("2.0f", "3.0f"))
    plain = build(kernel, store, with_variable)
    assert len(kernels_of(cubin(plain))) > 2
    count = len(kernels_of(cubin(plain)))
    assert lto_link.link_events[start:] == ["one module", "one module", f"a module per kernel ({count})"]


def test_kernels_used_are_linked_alone_from_the_first_link_and_an_edit_of_the_main_unit(kernel, store):
    """[cuda] kernels_used: the kernels the launchers launch are each linked
    alone, side by side, from the first link on, and again after an edit of
    the main unit (whose kernels no link has seen yet); the image holds
    those kernels only, the last edit's code in them."""
    declare_kernels_used(kernel, "with_epilogue", "axpy_scalar_f32")
    start = len(lto_link.link_events)
    first = build(kernel, store)
    assert sorted(kernels_of(cubin(first))) == [["axpy_scalar_f32"], ["with_epilogue"]]
    kernel.edit("axpy_device.cu", "y[threadIdx.x] = axpy_epilogue", "y[threadIdx.x + 1] = axpy_epilogue")
    edited, events = events_during(lambda: build(kernel, store, first))
    assert events == ["compiled"] and edited.key != first.key
    assert sorted(kernels_of(cubin(edited))) == [["axpy_scalar_f32"], ["with_epilogue"]]
    assert lto_link.link_events[start:] == ["a module per kernel (2)"] * 2
    assert "2 kernels linked side by side" in edited.built.phases, edited.built.phases
    # What the declared list makes is not recorded as the program's kernels: without the list, the
    # same main unit's first link holds every kernel again.
    kernel.edit("kernel.toml", '\nkernels_used = ["with_epilogue", "axpy_scalar_f32"]', "")
    whole = build(kernel, store, edited)
    assert len(kernels_of(cubin(whole))) == 1 and len(kernels_of(cubin(whole))[0]) == 7
    assert lto_link.link_events[start + 2:] == ["one module"]


def test_one_kernel_used_is_linked_alone_and_the_others_left_out(kernel, store):
    declare_kernels_used(kernel, "with_epilogue")
    only = build(kernel, store)
    assert kernels_of(cubin(only)) == [["with_epilogue"]]
    assert b"axpy_scalar_f32" not in cubin(only)


def test_a_kernel_used_that_the_device_code_lacks_is_named(kernel, store):
    declare_kernels_used(kernel, "with_epilogue", "axpy_scalar_f64")
    with pytest.raises(RegistryError, match=r"kernels_used names axpy_scalar_f64.*extern \"C\" __global__"):
        build(kernel, store)


def test_a_new_process_reads_the_main_units_ltoir_from_the_cache(kernel, store):
    """Published as an "ltoir" entry: after a restart (nothing kept in
    memory) an edit of a link source still only links."""
    first = build(kernel, store)
    assert [e.kind for e in store.list()].count(lto_link.ENTRY_KIND) == 1
    lto_link._kept.clear()  # what a new process starts with
    kernel.edit("epilogue.cu", "v * 2.0f", "v * 4.0f")
    edited, events = events_during(lambda: build(kernel, store, first))
    assert events == ["cached"], events
    assert edited.key != first.key and b"with_epilogue" in cubin(edited)
    assert len(kernels_of(cubin(edited))) > 2  # the kernels' names came with it: a module each


def test_an_edit_the_main_unit_reaches_compiles_it_again(kernel, store):
    first = build(kernel, store)
    kernel.edit(kernel.config, "#define AXPY_BIAS 0.0f", "#define AXPY_BIAS 1.0f")
    edited, events = events_during(lambda: build(kernel, store, first))
    assert events == ["compiled"], events
    assert edited.key != first.key and cubin(edited) != cubin(first)


def test_the_same_files_linked_or_compiled_together_are_different_builds(kernel, store):
    linked = build(kernel, store)
    kernel.edit("kernel.toml", 'link_sources = ["epilogue.cu"]', "")
    kernel.edit("axpy_device.cu", "__device__ float axpy_epilogue(float v);\n", '#include "epilogue.cu"\n')
    together = build(kernel, store)
    assert together.key != linked.key and b"with_epilogue" in cubin(together)


def test_a_link_source_the_main_unit_includes_is_refused(kernel, store):
    kernel.edit("axpy_device.cu", "__device__ float axpy_epilogue(float v);\n", '#include "epilogue.cu"\n')
    with pytest.raises(RegistryError, match=r"epilogue.cu is in \[cuda\] link_sources, and a device source"):
        build(kernel, store)


def test_an_undefined_device_function_fails_the_link_by_name(kernel, store):
    kernel.edit("epilogue.cu", "axpy_epilogue(float v)", "axpy_epilogue_renamed(float v)")
    with pytest.raises(BuildError) as failed:
        build(kernel, store)
    message = str(failed.value)
    assert "axpy_device.cu:" in message and "undefined __device__ function `axpy_epilogue(float)`" in message
    assert "in one of the [cuda] link_sources" in message, message


def test_an_undefined_device_function_is_named_when_each_kernel_links_alone(kernel, store):
    """The same mistake in an edit after the kernels are known: the per-kernel
    links fail, and the message is one link's, at the caller's declaration."""
    first = build(kernel, store)
    kernel.edit("epilogue.cu", "axpy_epilogue(float v)", "axpy_epilogue_renamed(float v)")
    with pytest.raises(BuildError) as failed:
        build(kernel, store, first)
    message = str(failed.value)
    assert "axpy_device.cu:" in message and "undefined __device__ function `axpy_epilogue(float)`" in message
    assert message.count("undefined __device__ function") == 1, message


def test_with_a_prelude_the_main_unit_is_compiled_by_the_compile_server(kernel, store):
    """The main unit goes through the prelude's precompiled header; an edit of
    a link source asks nothing of the server."""
    kernel.path("axpy_prelude.cuh").write_text("#pragma once\ntemplate <int N> __device__ float twice(float x) "
                                               "{ return N * x; }\ntemplate __device__ float twice<2>(float);\n")
    kernel.edit("kernel.toml", 'link_sources = ["epilogue.cu"]',
                'link_sources = ["epilogue.cu"]\nprelude = "axpy_prelude.cuh"')
    kernel.edit("axpy_device.cu", "y[threadIdx.x] = axpy_epilogue(y[threadIdx.x])",
                "y[threadIdx.x] = twice<2>(axpy_epilogue(y[threadIdx.x]))")
    pch_start = len(nvrtc_pch.pch_events)
    first, events = events_during(lambda: build(kernel, store))
    assert events == ["compiled"] and nvrtc_pch.pch_events[pch_start:] == ["created"]
    kernel.edit("epilogue.cu", "v * 2.0f", "v * 4.0f")
    edited, events = events_during(lambda: build(kernel, store, first))
    assert events == ["kept"] and len(nvrtc_pch.pch_events) == pch_start + 1
    assert edited.key != first.key and cubin(edited) != cubin(first)
    kernel.edit("axpy_device.cu", "twice<2>(axpy_epilogue", "1.0f + twice<2>(axpy_epilogue")
    body, events = events_during(lambda: build(kernel, store, edited))
    assert events == ["compiled"] and nvrtc_pch.pch_events[pch_start + 1:] == ["used"]
    assert body.key != edited.key


def test_an_aot_package_carries_the_linked_cubin_for_each_architecture(tmp_path, kernels_root, monkeypatch):
    """python -m registry aot builds a linked kernel's cubin per architecture
    asked for, through the same compile and link (no GPU needed)."""
    from registry.tools import aot

    monkeypatch.setenv("REGISTRY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    copy = copy_example(kernels_root, "nvrtc", "_lto_aot")
    copy.path("epilogue.cu").write_text(EPILOGUE)
    copy.edit("kernel.toml", 'compiler = "nvrtc"', 'compiler = "nvrtc"\nlink_sources = ["epilogue.cu"]')
    with open(copy.path("axpy_device.cu"), "a") as f:
        f.write(CALLER)
    out = aot.export_package(copy.name, tmp_path / "pkg")
    device = out / aot.package_name(copy.name) / "_device"
    cubins = {p.name: p.read_bytes() for p in device.iterdir()}
    assert sorted(cubins) == ["sm_80.cubin", "sm_90.cubin"], sorted(cubins)
    assert all(c[:4] == b"\x7fELF" and b"with_epilogue" in c for c in cubins.values())
