"""What a built shared library says about itself, read from its ELF file
without loading it: the libraries it needs (DT_NEEDED) and the symbols it
exports (.dynsym).

Reading beats dlopen here. Opening a CUDA kernel library runs its static
constructors, which register its fatbinary with the CUDA runtime; closing
it again and then opening the published copy left the runtime's record of
the first registration behind, and the op's first launch in that process
failed with "device kernel image is invalid". A file read registers nothing.

Only 64-bit little-endian ELF (x86-64, aarch64): anything else reads as
None and the caller decides.
"""
from __future__ import annotations

import struct
from pathlib import Path

_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB = 0, 1, 5
_SHT_DYNSYM = 11
_SHN_UNDEF = 0
_STB_GLOBAL, _STB_WEAK = 1, 2
_STV_DEFAULT, _STV_PROTECTED = 0, 3


def _elf64(path: str) -> bytes | None:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    return data if data[:4] == b"\x7fELF" and data[4:6] == b"\x02\x01" else None


def needed_libraries(path: str) -> list[str] | None:
    """The DT_NEEDED names of a shared library, or None when `path` is not
    one this module reads (or cannot be read)."""
    data = _elf64(path)
    if data is None:
        return None
    try:
        phoff, = struct.unpack_from("<Q", data, 32)
        phentsize, phnum = struct.unpack_from("<HH", data, 54)
        loads, dynamic = [], None
        for i in range(phnum):
            at = phoff + i * phentsize
            p_type, = struct.unpack_from("<I", data, at)
            p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<QQQQ", data, at + 8)
            if p_type == _PT_LOAD:
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == _PT_DYNAMIC:
                dynamic = (p_offset, p_filesz)
        if dynamic is None:
            return []
        offsets, strtab = [], None
        for at in range(dynamic[0], dynamic[0] + dynamic[1], 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == _DT_NULL:
                break
            if tag == _DT_NEEDED:
                offsets.append(value)
            elif tag == _DT_STRTAB:  # an address: mapped back to a file offset through PT_LOAD
                strtab = value
        base = next((offset + strtab - vaddr for vaddr, offset, size in loads
                     if strtab is not None and vaddr <= strtab < vaddr + size), None)
        if base is None:
            return None if offsets else []
        return [_string(data, base + n) for n in offsets]
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def exported_symbols(path: str) -> set[str] | None:
    """The names a dlsym on the loaded library would find: symbols of .dynsym
    that the library defines, bound GLOBAL or WEAK, with default (or
    protected) visibility. None when `path` is not a library this module reads."""
    data = _elf64(path)
    if data is None:
        return None
    try:
        shoff, = struct.unpack_from("<Q", data, 40)
        shentsize, shnum = struct.unpack_from("<HH", data, 58)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = set()
        for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
            if sh_type != _SHT_DYNSYM or entsize == 0:
                continue
            strings = sections[link][4]  # the linked string table's file offset
            for at in range(offset + entsize, offset + size, entsize):  # entry 0 is the null symbol
                st_name, st_info, st_other, st_shndx = struct.unpack_from("<IBBH", data, at)
                bound = st_info >> 4 in (_STB_GLOBAL, _STB_WEAK)
                visible = st_other & 0x3 in (_STV_DEFAULT, _STV_PROTECTED)
                if bound and visible and st_shndx != _SHN_UNDEF and st_name:
                    names.add(_string(data, strings + st_name))
        return names
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None


def _string(data: bytes, at: int) -> str:
    return data[at:data.index(b"\0", at)].decode()


# A cubin's symbols (.symtab): CUDA marks a kernel's entry with STO_CUDA_ENTRY in st_other.
_SHT_SYMTAB = 2
_STT_OBJECT, _STT_FUNC = 1, 2
_STO_CUDA_ENTRY = 0x10


def cubin_symbols(data: bytes) -> tuple[list[str], list[str]] | None:
    """(the kernels, the variables in .nv.global sections: __device__
    variables, and constexpr ones the code needs an address of) a cubin
    defines, or None when it is not a 64-bit ELF this reads."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        return None
    try:
        shoff, = struct.unpack_from("<Q", data, 40)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        section_names = [_string(data, sections[shstrndx][4] + s[0]) for s in sections]
        kernels, globals_ = [], []
        for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
            if sh_type != _SHT_SYMTAB or entsize == 0:
                continue
            strings = sections[link][4]
            for at in range(offset + entsize, offset + size, entsize):
                st_name, st_info, st_other, st_shndx = struct.unpack_from("<IBBH", data, at)
                kind = st_info & 0xF
                if kind == _STT_FUNC and st_other & _STO_CUDA_ENTRY:
                    kernels.append(_string(data, strings + st_name))
                elif kind == _STT_OBJECT and 0 < st_shndx < shnum and section_names[st_shndx].startswith(".nv.global"):
                    globals_.append(_string(data, strings + st_name))
        return kernels, globals_
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None
