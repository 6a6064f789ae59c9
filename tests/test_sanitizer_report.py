"""Reading compute-sanitizer's report (registry/isolation/sanitizer_report.py)
without a GPU: the file memcheck names, as nvcc recorded it, is the kernel's
own file, and the address it names is placed against the call's arguments."""
from __future__ import annotations

from registry.isolation.checked import Variant
from registry.isolation.sanitizer_report import _MEMCHECK_AT, _source_of

# As memcheck printed it on the H200 for a checked kernel built by load().
REPORT = ("========= Invalid __global__ write of size 4 bytes\n"
          "=========     at body(float *, const float *, long, float)+0x180 in kernel.cu:7\n"
          "=========     by thread (250,0,0) in block (0,0,0)\n")


def test_a_file_named_relative_to_the_build_is_the_kernels_own(tmp_path):
    built = Variant("", {}, tmp_path / "kernel", "")
    at = _MEMCHECK_AT.search(REPORT)
    assert (at.group(1), at.group(2)) == ("kernel.cu", "7")
    assert _source_of(built, at.group(1)) == str(tmp_path / "kernel" / "kernel.cu")
    # An absolute path in the kernel's folder stays (folded as the user would
    # write it); one elsewhere stays as it is.
    assert _source_of(built, str(tmp_path / "kernel" / "sub" / ".." / "a.cu")) == str(tmp_path / "kernel" / "a.cu")
    assert _source_of(built, "/usr/include/x.h") == "/usr/include/x.h"


# An out-of-bounds write as compute-sanitizer (CUDA 13) printed it on the H200
# for a 128-float output whose next element was written: "Access at", where
# older versions wrote "Address".
OUT_OF_BOUNDS = ("========= Invalid __global__ write of size 4 bytes\n"
                 "=========     at body(float *, const float *, long, float)+0x1b0 in kernel.cu:7\n"
                 "=========     by thread (128,0,0) in block (0,0,0)\n"
                 "=========     Access at 0x7faab4c00200 is out of bounds\n"
                 "=========     and is 1 bytes after the nearest allocation at 0x7faab4c00000 of size 512 bytes\n")


def test_the_address_memcheck_names_is_placed_against_the_arguments():
    from registry.isolation import wire
    from registry.isolation.sanitizer_report import _MEMCHECK_ACCESS, _MEMCHECK_ADDRESS, _relative

    # The worker's copies of out and x (memcheck pads them apart), as it logged them before the call.
    log = (f"{wire.CHECKED_CALL_LOG} 0 0x7faab4c00000 0x7faab4c00200 1 0x7faab4c10200 0x7faab4c10400\n"
           + OUT_OF_BOUNDS)
    found = _MEMCHECK_ADDRESS.search(log, _MEMCHECK_ACCESS.search(log).end())
    assert found is not None and found.group(1) == "0x7faab4c00200"
    assert _relative(int(found.group(1), 16), log, ["out", "x", "n", "a"]) == \
        "0 bytes after the end of argument 'out' (512 bytes)"


def test_an_address_is_placed_when_the_sanitizers_output_shares_the_line():
    """The worker's line of ranges after memcheck's own text on one line of the
    shared log; and with no address line, memcheck's distance from the
    allocation it names places the access."""
    from registry.isolation import wire
    from registry.isolation.sanitizer_report import _relative

    ranges = f"{wire.CHECKED_CALL_LOG} 0 0x7faab4c00000 0x7faab4c00200 1 0x7faab4c00200 0x7faab4c00400\n"
    log = "========= COMPUTE-SANITIZER" + ranges + OUT_OF_BOUNDS
    assert _relative(0x7faab4c00200 + 4, log, ["out", "x"]) == "4 bytes into argument 'x' (512 bytes)"
    assert _relative(0x7faab4c00400, log, ["out", "x"]) == "0 bytes after the end of argument 'x' (512 bytes)"


# As compute-sanitizer printed it on the H200 (2026-12-03, bench/results/gpu-2026-12-03-1745/memcheck.txt)
# for a 4,096-float output whose next element was written: "Access to", and a size with a comma.
H200_REPORT = ("========= COMPUTE-SANITIZER\n"
               "kreg-checked-call: 0 0x7faaeec00000 0x7faaeec04000 1 0x7faaeec14000 0x7faaeec18000\n"
               "========= Invalid __global__ write of size 4 bytes\n"
               "=========     at body(float *, const float *, long, float)+0x220 in kernel.cu:7\n"
               "=========     by thread (0,0,0) in block (0,0,0)\n"
               "=========     Access to 0x7faaeec04000 is out of bounds\n"
               "=========     and is 1 bytes after the nearest allocation at 0x7faaeec00000 of size 16,384 bytes\n")


def test_the_h200s_report_places_the_write_just_past_the_end_of_out():
    from registry.isolation.sanitizer_report import _MEMCHECK_ACCESS, _relative, memcheck_address

    start = _MEMCHECK_ACCESS.search(H200_REPORT).end()
    assert memcheck_address(H200_REPORT, start) == 0x7faaeec04000
    assert _relative(0x7faaeec04000, H200_REPORT, ["out", "x"]) == \
        "0 bytes after the end of argument 'out' (16384 bytes)"
    # Without the address line, the distance from the allocation memcheck names gives the same address.
    without = H200_REPORT.replace("=========     Access to 0x7faaeec04000 is out of bounds\n", "")
    assert memcheck_address(without, start) == 0x7faaeec04000
