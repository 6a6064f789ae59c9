"""Device code that compiled but cannot do its work, refused after the build.

Instructions such as wgmma, TMA multicast, setmaxnreg or tcgen05 exist only
on an arch-specific target (sm_90a, sm_100a). CUTLASS and cute guard them
with the compiler's feature macros, and built for the plain arch (sm_90) they
compile the kernel's body to an error printf instead: the build succeeds, the
kernel runs, prints, and never writes its output. Those messages are string
constants in the device image, so a build whose device code holds one is an
error that says what to set, never a library that returns garbage.

The strings are read in the device image's bytes: a cubin, or the fatbin
nvcc embeds in a library (uncompressed unless -Xfatbin=-compress-all asks).
"""
from __future__ import annotations

import re

from registry.errors import ArchTargetError

# CUTLASS's kernels ("ERROR : Arch conditional MMA instruction used without
# targeting appropriate compute capability" / "... sm90a compute capability")
# and cute's instruction wrappers ("Trying to use tma without
# CUTE_ARCH_TMA_SM90_ENABLED.", "Attempting to use SM90_64x8x16_F16F16F16_SS
# without CUTE_ARCH_MMA_SM90A_ENABLED"). The markers alone are searched; the
# message is the printable text around the first one. (A pattern that began
# with the context, [ -~]{0,120}, tried 120 characters at every byte: 1.85 s
# on a CUTLASS GEMM's 2.1 MB cubin, in every edit.)
_MARKERS = re.compile(rb"Arch conditional MMA instruction used without targeting| without CUTE_ARCH_[A-Z0-9_]+")
_BEFORE, _AFTER = 120, 80  # at most this much of the message around the marker


def _printable(byte: int) -> bool:
    return 0x20 <= byte <= 0x7E


def unreachable_code_message(image: bytes) -> str | None:
    """The first such message in a device image, or None."""
    found = _MARKERS.search(image)
    if found is None:
        return None
    start, end = found.start(), found.end()
    while start > max(found.start() - _BEFORE, 0) and _printable(image[start - 1]):
        start -= 1
    while end < min(found.end() + _AFTER, len(image)) and _printable(image[end]):
        end += 1
    return image[start:end].decode("ascii").strip()


def has_arch_specific_variant(arch: str) -> bool:
    """Whether an arch ("sm_90", "9.0", "9.0+PTX") has an arch-specific
    variant: every capability from 9.0 on (sm_90a, sm_100a, sm_120a)."""
    found = re.fullmatch(r"sm_(\d+)\d[af]?|(\d+)\.\d+[af]?(?:\+PTX)?", arch.strip())
    return found is not None and int(found.group(1) or found.group(2)) >= 9


def _is_arch_specific(arch: str) -> bool:
    return re.fullmatch(r"(?:sm_\d+|\d+\.\d+)[af](?:\+PTX)?", arch.strip()) is not None


def check_image(kernel: str, image: bytes, *, arch: str, manifest_file: str, what: str) -> None:
    """Raise ArchTargetError when `image` (built for `arch`, a cubin's "sm_90"
    or a library's arch list "8.0;9.0") holds code that cannot run there."""
    message = unreachable_code_message(image)
    if message is None:
        return
    entries = [e for e in re.split(r"[;\s]+", arch) if e]
    if any(_is_arch_specific(e) for e in entries):
        advice = ("an arch-specific target was built, so this code needs another GPU generation than the one "
                  "targeted (an sm_100a instruction built for sm_90a, say): build for the GPU the kernel is "
                  "written for (TORCH_CUDA_ARCH_LIST), or guard the code with the compiler's feature macros")
    elif any(has_arch_specific_variant(e) for e in entries):
        advice = (f"set arch_specific = true in the [cuda] table of {manifest_file} (it targets sm_90a on a "
                  f"9.0 GPU, sm_100a on 10.0, ...)")
    else:
        advice = ("no target here has an arch-specific variant (every capability from 9.0 on has one): build "
                  "for such a GPU (arch_specific = true and TORCH_CUDA_ARCH_LIST=9.0), or give the kernel a "
                  "fallback under #if !defined(__CUDA_ARCH_FEAT_SM90_ALL)")
    raise ArchTargetError(kernel, what, arch, message, advice)
