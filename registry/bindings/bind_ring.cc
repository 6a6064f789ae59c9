// Isolated calls through the shared call channel (core/call_ring.h):
// the parent's channels and slots (core/isolated_call.h) for
// registry/isolation/, and the worker's loop (core/ring_worker.h) as plain C
// functions, which worker.py reaches by loading this module with ctypes (it
// runs without torch and without the registry package; the module's Python
// init never runs there).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>
#include <memory>
#include <thread>

#include "isolated_call.h"
#include "on_demand.h"
#include "ring_worker.h"

namespace py = pybind11;

#define KREG_EXPORT extern "C" __attribute__((visibility("default")))

KREG_EXPORT const char* kreg_ring_worker_attach(int fd) { return kreg::ring_worker::attach(fd); }
KREG_EXPORT void kreg_ring_worker_add_launcher(uint32_t id, const void* entry, const void* launcher, const char* kinds,
                                               const int64_t* item_sizes) {
  kreg::ring_worker::add_launcher(id, entry, launcher, kinds, item_sizes);
}
KREG_EXPORT void kreg_ring_worker_add_region(uint32_t id, uintptr_t base, uintptr_t end, uintptr_t reserved,
                                             uintptr_t reserved_end) {
  kreg::ring_worker::add_region(id, base, end, reserved, reserved_end);
}
KREG_EXPORT void kreg_ring_worker_drop_region(uint32_t id) { kreg::ring_worker::drop_region(id); }
KREG_EXPORT void kreg_ring_worker_serve(int64_t spin_ns) { kreg::ring_worker::serve(spin_ns); }
KREG_EXPORT void kreg_ring_worker_install_fault_handler() { kreg::ring_worker::install_fault_handler(); }
KREG_EXPORT void kreg_ring_worker_set_cuda(void* stream, const void* stream_query, const void* stream_synchronize,
                                           const void* error_name, const void* error_string,
                                           const void* copy_to_device, const void* copy_to_host,
                                           const void* alloc_host) {
  kreg::ring_worker::set_cuda(stream, stream_query, stream_synchronize, error_name, error_string, copy_to_device,
                              copy_to_host, alloc_host);
}

namespace kreg::python {
namespace {

std::atomic<uint64_t> next_generation{1};

std::shared_ptr<IsolatedChannel> new_channel() {
  auto channel = std::make_shared<IsolatedChannel>();
  channel->ring = CallRing::create();
  channel->generation = next_generation.fetch_add(1);
  return channel;
}

}  // namespace

void init_ring_on_demand(py::module_& m) {
  using Channel = IsolatedChannel;
  py::class_<Channel, std::shared_ptr<Channel>>(m, "CallChannel")
      .def(py::init(&new_channel))
      .def_property_readonly("fd", [](const Channel& c) { return c.ring.fd(); })
      .def_readonly("generation", &Channel::generation)
      .def_property("in_ring", [](const Channel& c) { return c.in_ring.load(); },
                    [](Channel& c, bool v) { c.in_ring.store(v); })
      .def_property_readonly("broken", [](const Channel& c) { return c.broken.load(); })
      .def_readwrite("spin_ns", &Channel::spin_ns)
      .def_property_readonly("spin_budget_ns", [](const Channel& c) { return c.ring.spin_budget_ns(); })
      .def_property_readonly("wakes", [](const Channel& c) { return c.ring.wakes(); })
      .def_property_readonly("posts", [](const Channel& c) { return c.posts.load(); })
      .def_property_readonly("calls", [](const Channel& c) { return c.calls.load(); })
      .def_property_readonly("staged_calls", [](const Channel& c) { return c.staged_calls.load(); })
      .def_property_readonly("staged_bytes", [](const Channel& c) { return c.staged_bytes.load(); })
      .def("add_storage", [](Channel& c, uintptr_t base, uintptr_t end, uint32_t id) {
        std::lock_guard<std::mutex> hold(c.tables);
        c.storages.push_back({base, end, id});
      })
      .def("drop_storage", [](Channel& c, uint32_t id) {
        std::lock_guard<std::mutex> hold(c.tables);
        c.storages.erase(std::remove_if(c.storages.begin(), c.storages.end(),
                                       [id](const Channel::Region& r) { return r.id == id; }),
                        c.storages.end());
        c.cuda_allocations.erase(std::remove_if(c.cuda_allocations.begin(), c.cuda_allocations.end(),
                                               [id](const Channel::CudaAllocation& a) { return a.id == id; }),
                                c.cuda_allocations.end());
      })
      // A CUDA worker's channel: the driver's cuStreamQuery, cuStreamSynchronize, cuPointerGetAttribute.
      .def("set_cuda_driver", [](Channel& c, uintptr_t query, uintptr_t synchronize, uintptr_t attribute) {
        std::lock_guard<std::mutex> hold(c.tables);
        c.driver.stream_query = reinterpret_cast<int (*)(void*)>(query);
        c.driver.stream_synchronize = reinterpret_cast<int (*)(void*)>(synchronize);
        c.driver.pointer_get_attribute = reinterpret_cast<int (*)(void*, int, uintptr_t)>(attribute);
        c.cuda = query != 0 && synchronize != 0 && attribute != 0;
      })
      .def("add_cuda_allocation", [](Channel& c, uintptr_t base, uintptr_t end, uint64_t buffer_id, uint32_t id) {
        std::lock_guard<std::mutex> hold(c.tables);
        c.cuda_allocations.push_back({base, end, buffer_id, id});
      })
      .def("add_pool", [](Channel& c, int64_t segment, uint32_t region) {
        std::lock_guard<std::mutex> hold(c.tables);
        c.pool[segment] = region;
      })
      .def("drop_pool", [](Channel& c, int64_t segment) {
        std::lock_guard<std::mutex> hold(c.tables);
        c.pool.erase(segment);
      })
      .def("set_staging", [](Channel& c, uint32_t region, uintptr_t base, int64_t size) {
        std::lock_guard<std::mutex> hold(c.tables);
        c.staging_region = region;
        c.staging_base = base;
        c.staging_size = size;
      })
      // Python's side of a call: claim() before writing, release() after the reply is read.
      .def("claim", [](Channel& c) {
        py::gil_scoped_release no_gil;
        while (c.busy.exchange(true, std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(20));
      })
      .def("release", [](Channel& c) { c.busy.store(false, std::memory_order_release); })
      .def("idle", [](const Channel& c) { return c.ring.idle(); })
      .def("post", [](Channel& c, py::bytes message) {
        const std::string_view text = message;
        if (text.size() > kRequestCapacity) throw std::invalid_argument("an isolated call's message is over 1 MiB");
        std::memcpy(c.ring.request(), text.data(), text.size());
        c.ring.post(kRequestCall, static_cast<uint32_t>(text.size()));
      })
      .def("post_yield", [](Channel& c) { c.ring.post(kRequestYield, 0); })
      .def("spin", [](Channel& c, int64_t spin_ns) { return c.ring.spin_for_reply(spin_ns); })
      // Sleeps up to `seconds` for the reply: True when it came. Ctrl-C raises KeyboardInterrupt.
      .def("wait", [](Channel& c, double seconds) {
        WaitResult result;
        {
          py::gil_scoped_release no_gil;
          result = c.ring.wait_for_reply(static_cast<int64_t>(seconds * 1e9));
        }
        if (result == WaitResult::kInterrupted && PyErr_CheckSignals() != 0) throw py::error_already_set();
        return result == WaitResult::kReady;
      })
      .def("reply", [](const Channel& c) {
        return py::bytes(reinterpret_cast<const char*>(c.ring.reply()), c.ring.header()->reply_bytes);
      });
  // The fast path finds a slot's channel by its generation among these.
  m.def("add_call_channel", [](std::shared_ptr<Channel> channel) { add_channel(std::move(channel)); });
  m.def("drop_call_channel", [](const Channel& channel) { drop_channel(channel.generation); });
  m.def("isolated_entry", [] { return reinterpret_cast<uintptr_t>(&kreg_isolated_entry); });

  py::class_<IsolatedSlot, std::shared_ptr<IsolatedSlot>>(m, "IsolatedSlot")
      .def(py::init([](uintptr_t fallback, uintptr_t source_entry, uintptr_t slow, uintptr_t fault_text,
                       std::string kinds, std::string roles, std::vector<int64_t> item_sizes) {
        auto slot = std::make_shared<IsolatedSlot>();
        slot->fallback = reinterpret_cast<const void*>(fallback);
        slot->source_entry = reinterpret_cast<kreg_entry_fn>(source_entry);
        slot->slow = reinterpret_cast<SlowPath>(slow);
        slot->fault_text = reinterpret_cast<const char*>(fault_text);
        slot->kinds = std::move(kinds);
        slot->roles = std::move(roles);
        slot->item_sizes = std::move(item_sizes);
        return slot;
      }))
      .def_property_readonly("address", [](IsolatedSlot& s) { return reinterpret_cast<uintptr_t>(&s); })
      .def("bind", [](IsolatedSlot& s, uint64_t generation, uint32_t launcher_id) {
        s.launcher_id = launcher_id;
        s.generation = generation;
      });
}

}  // namespace kreg::python
