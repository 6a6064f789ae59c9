"""Reading compute-sanitizer's report (registry/isolation/sanitizer_report.py)
without a GPU: the file memcheck names, as nvcc recorded it, is mapped to the
kernel's own file."""
from __future__ import annotations

from registry.isolation.checked import Variant
from registry.isolation.sanitizer_report import _MEMCHECK_AT, _source_of

# As memcheck printed it on the H200 for a checked kernel built by load().
REPORT = ("========= Invalid __global__ write of size 4 bytes\n"
          "=========     at body(float *, const float *, long, float)+0x180 in kernel.cu:7\n"
          "=========     by thread (250,0,0) in block (0,0,0)\n")


def test_a_file_named_relative_to_the_build_is_the_kernels_own(tmp_path):
    built = Variant("", {}, tmp_path / "checked", tmp_path / "kernel", "")
    at = _MEMCHECK_AT.search(REPORT)
    assert (at.group(1), at.group(2)) == ("kernel.cu", "7")
    assert _source_of(built, at.group(1)) == str(tmp_path / "kernel" / "kernel.cu")
    # An absolute path in the variant's folder maps the same way; one elsewhere stays as it is.
    assert _source_of(built, str(tmp_path / "checked" / "sub" / "a.cu")) == str(tmp_path / "kernel" / "sub" / "a.cu")
    assert _source_of(built, "/usr/include/x.h") == "/usr/include/x.h"
