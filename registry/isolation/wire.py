"""The messages between a process and its isolated-launch worker, version 4.

Imported by the worker as a plain module (worker.py runs as a script, with
this folder on sys.path) and by the parent as registry.isolation.wire: it
needs nothing but the standard library.

Transport: one AF_UNIX SOCK_SEQPACKET socket pair, one message per packet
(so no framing), file descriptors (CPU shared memory) as SCM_RIGHTS beside the
packet that names them. A plain CPU worker also gets a call channel (the
"Q" message; its layout is core/call_ring.h): while it runs its ring loop
("R"), "C" messages and their replies go through the channel instead, byte
for byte as below, and the parent posts a yield on the channel before it
sends anything on the socket again. Every number is little-endian. Each
message starts with one byte saying what it is:

  parent -> worker
    b"H" hello       u32 version, u8 backend ("c" cpu, "g" cuda), i32 device ordinal, u8 checked
                     (1: copy each tensor into its own malloc'ed buffer for the call, so a
                     sanitizer sees its bounds, and log the parameters' ranges first)
    b"L" load        u32 launcher id, then NUL-separated: argument kinds (KINDS below),
                     library path, launcher symbol, cubin path ("" if none), bytes per
                     element of each parameter (comma-separated; 0 for non-tensors), the
                     library's entry symbol (kreg_entry_fn; "" if the launcher is only
                     called from Python). Reply K or E.
    b"M" CPU region  u32 region id, u64 size; the region's fd rides with the packet
    b"G" CUDA region u32 region id, u64 the allocation's size, 64-byte cudaIpcMemHandle of its base
    b"X" drop region u32 region id (its memory was freed in the parent)
    b"Q" call channel  the path of the registry's core module (loaded with ctypes: its
                     worker loop, core/ring_worker.h), UTF-8; the channel's memfd rides along
    b"R" ring        run the ring loop until the parent posts a yield on the channel
    b"C" call        u32 launcher id, then each parameter of the launcher as PARAM below,
                     in the launcher's order (returns, arguments; no stream). Reply K, E, F or G.
  worker -> parent
    b"K" done, the launcher returned NULL
    b"E" + UTF-8 text: the launcher (or a load) returned this error
    b"F" + UTF-8 text: the worker's CUDA context faulted (illegal address, ...); it exits
    b"G" + "<parameter index> after|before": a CUDA call's canary changed (GUARD_AFTER,
                     GUARD_BEFORE), or a watched neighbour (WATCH), which the worker wrote
                     back; the call's results are not to be used

  PARAM by kind:
    T  tensor    i64 ndim (-1: None, nothing follows), u32 region (NO_REGION: a NULL data
                 pointer; else its low 29 bits, and the flags GUARD_AFTER and GUARD_BEFORE:
                 on CUDA, the ZONE bytes after the end / before the start hold no data, and
                 the worker keeps canaries there during the call; WATCH: on CUDA, an argument
                 written in place, whose neighbours hold other data: the worker compares the
                 ZONE bytes on each side (within the region; a zone that meets another tensor
                 of the call is not watched) with what they held before the call, and writes
                 them back if they changed. Another stream of the parent writing there during
                 the call reads as the kernel's write), u64 offset into the
                 region, i64 numel, ndim x i64 sizes, ndim x i64 strides
    f  float     f32        i  int   i64        b  bool  u8
    l  int[]     i64 count, count x i64
    s  ScalarType?  i32 (a dtype code or -1)

A worker that dies while a call is in flight faulted; its exit status says how.
"""
import ctypes
import struct

MAX_MESSAGE = 1 << 20  # the largest packet either side reads (a call with many tensors is a few KiB)

VERSION = 4  # 3: a region's GUARD_* flags; 4: WATCH, a CUDA region's size
NO_REGION = 0xFFFFFFFF
GUARD_AFTER, GUARD_BEFORE = 1 << 31, 1 << 30  # core/ring_worker.cc's kGuardAfter, kGuardBefore
WATCH = 1 << 29  # core/call_message.h's kWatch
REGION_BITS = WATCH - 1
STAGING_REGION = 0  # the parent's staging buffer, for memory that is not shared

# A signature's argument kinds (registry type names) as KINDS letters; "d" is a float
# argument of a float64 launcher, which takes it as double (kreg/abi.h).
# The launcher ABI's structs (registry/include/kreg/abi.h) and each kind's C type:
# the parent's proxies and the worker build their prototypes from the same table.
class KregTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("numel", ctypes.c_int64), ("ndim", ctypes.c_int64),
                ("sizes", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]


class KregIntList(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_int64)), ("size", ctypes.c_int64)]


CTYPE_OF_KIND = {"T": KregTensor, "f": ctypes.c_float, "d": ctypes.c_double, "i": ctypes.c_int64, "b": ctypes.c_bool,
                 "l": KregIntList, "s": ctypes.c_int32}

KIND_OF_TYPE = {"Tensor": "T", "float": "f", "int": "i", "bool": "b", "int[]": "l", "ScalarType": "s"}

HELLO = struct.Struct("<cIciB")
CHECKED_CALL_LOG = "kreg-checked-call:"  # the worker's log line before a checked call: "<index> <start> <end>" each
# The worker's log line as it dies of an access to a guard page (guard_pages.py):
# "<parameter index> after|before write|read|access".
GUARD_LOG = "kreg-guard-page:"
LOAD_HEAD = struct.Struct("<cI")
CPU_REGION = struct.Struct("<cIQ")
CUDA_REGION_HEAD = struct.Struct("<cIQ")  # then the IPC handle
DROP = struct.Struct("<cI")
CALL_HEAD = struct.Struct("<cI")
TENSOR_HEAD = struct.Struct("<qIQq")  # ndim, region, offset, numel (ndim < 0: only the q)
NONE_TENSOR = struct.pack("<q", -1)


def pack_load(launcher_id: int, kinds: str, library: str, symbol: str, cubin: str, item_sizes,
              entry: str = "") -> bytes:
    sizes = ",".join(str(s) for s in item_sizes)
    return LOAD_HEAD.pack(b"L", launcher_id) + "\0".join((kinds, library, symbol, cubin, sizes, entry)).encode()


def unpack_load(message: bytes) -> tuple[int, str, str, str, str, list[int], str]:
    _, launcher_id = LOAD_HEAD.unpack_from(message)
    kinds, library, symbol, cubin, sizes, entry = message[LOAD_HEAD.size:].decode().split("\0")
    return launcher_id, kinds, library, symbol, cubin, [int(s) for s in sizes.split(",")], entry
