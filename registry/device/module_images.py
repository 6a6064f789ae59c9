"""A device image of several cubins, one CUDA module each.

Format (version 1; read by registry/include/kreg/launch_runtime.cc's
split_images, which must agree): one ELF cubin, or several back to back,
the first at offset 0 and each next at the first 8-byte boundary past the
end of the one before; zero bytes pad the gaps. An ELF's end is the furthest
of its program headers, its section headers and its sections' contents; at
most MAX_MODULES cubins. One cubin is the format's plain case, so every
image built before it reads the same.

Why. A linked kernel (lto_link.py) can link each kernel on its own, side by
side, when the program has no device global: the link then takes as long as
the slowest kernel, not the sum. Its kernels land in one module each, and
the launcher looks a kernel up in each in turn.
"""
from __future__ import annotations

import struct

ALIGN = 8
MAX_MODULES = 16  # the launch runtime's kMaxModules: an image holds no more
_ELF64_LE = b"\x7fELF\x02\x01"
_SHT_NOBITS = 8


def join(cubins: list[bytes]) -> bytes:
    """The image of `cubins`, in order (one: itself)."""
    if len(cubins) > MAX_MODULES:
        raise ValueError(f"a module image holds at most {MAX_MODULES} cubins, not {len(cubins)}")
    out = bytearray()
    for cubin in cubins:
        if not cubin.startswith(_ELF64_LE):
            raise ValueError("a module image holds 64-bit ELF cubins only")
        out += b"\0" * (-len(out) % ALIGN)
        out += cubin
    return bytes(out)


def split(image: bytes) -> list[bytes]:
    """The cubins of an image, each to its ELF's end; [image] when it is not
    ELF (PTX or a fatbinary, which the driver reads whole)."""
    found, at = [], 0
    while at + 64 <= len(image) and image[at:at + 6] == _ELF64_LE:
        end = _elf_end(image, at)
        found.append(image[at:at + end])
        at += -(-end // ALIGN) * ALIGN
    return found or [image]


def _elf_end(image: bytes, at: int) -> int:
    phoff, shoff = struct.unpack_from("<QQ", image, at + 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", image, at + 0x36)
    end = max(64, phoff + phentsize * phnum, shoff + shentsize * shnum)  # 64: the ELF header itself
    for i in range(shnum):
        header = at + shoff + i * shentsize
        if header + shentsize > len(image):
            break
        sh_type, = struct.unpack_from("<I", image, header + 4)
        offset, size = struct.unpack_from("<QQ", image, header + 0x18)
        if sh_type != _SHT_NOBITS:
            end = max(end, offset + size)
    return end
