// The isolated worker's call loop (registry/isolation/worker.py, which
// runs with no torch and loads the core module with ctypes for this): waits
// on the call channel (call_ring.h), reads each wire.py "C" message, calls
// the kernel library's entry (kreg_entry_fn, kreg/abi.h) with the launcher,
// writes the reply. It returns to Python only when the parent asks it to
// (kRequestYield: memory to map, a launcher to load, shutdown).
//
// Its SIGSEGV handler names the argument whose guard page a ring call hit,
// as guard_pages.py's does for the calls Python runs (wire.GUARD_LOG); for
// those it hands the signal to that handler.
#pragma once

#include <cstdint>

namespace kreg::ring_worker {

// Maps the channel of `fd`; nullptr or an error text.
const char* attach(int fd);
// A launcher the parent loaded as `id`: the library's entry, the launcher,
// wire.py's kinds of its parameters and their bytes per element.
void add_launcher(uint32_t id, const void* entry, const void* launcher, const char* kinds, const int64_t* item_sizes);
// A region the worker mapped (guard_pages.py): [base, end) between guard pages at [reserved, reserved_end).
void add_region(uint32_t id, uintptr_t base, uintptr_t end, uintptr_t reserved, uintptr_t reserved_end);
void drop_region(uint32_t id);
// Serves calls until the parent posts kRequestYield (acknowledged before returning).
void serve(int64_t spin_ns);
// Installs the SIGSEGV handler (once), keeping the one there for the calls Python runs.
void install_fault_handler();
// A CUDA worker: launchers get `stream` (the worker's), and each call waits
// for it with the driver's cuStreamQuery (polled) / cuStreamSynchronize; an
// error there is replied as 'F' + its name and text (cuGetErrorName /
// cuGetErrorString), and the worker exits after the reply, its context being
// unusable. A call's guarded zones (call_message.h) get the canary through
// cuMemcpyHtoDAsync before the launch (a watched zone is copied out with
// cuMemcpyDtoHAsync instead) and are copied back with cuMemcpyDtoHAsync
// after it, into memory from cuMemAllocHost; a watched zone that changed is
// written back.
void set_cuda(void* stream, const void* stream_query, const void* stream_synchronize, const void* error_name,
              const void* error_string, const void* copy_to_device, const void* copy_to_host,
              const void* alloc_host);

}  // namespace kreg::ring_worker
