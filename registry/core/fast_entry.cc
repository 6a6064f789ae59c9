#include "fast_entry.h"

namespace kreg {
namespace {

// DLPack's C exchange API (dlpack.h 1.2 on), the struct
// torch.Tensor.__dlpack_c_exchange_api__ points to. Declared here: ATen's
// dlpack.h refuses TORCH_TARGET_VERSION, and the layout is DLPack's ABI, not torch's.
constexpr const char* kDlpack = R"CPP(namespace dl {
struct Device {
  int32_t device_type;  // kDLCPU 1, kDLCUDA 2
  int32_t device_id;
};
struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct Version {
  uint32_t major;
  uint32_t minor;
};
struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  Tensor dl_tensor;
};
struct ExchangeApiHeader {
  Version version;
  ExchangeApiHeader* prev_api;
};
struct ExchangeApi {
  ExchangeApiHeader header;
  int (*managed_tensor_allocator)(Tensor*, ManagedTensorVersioned**, void*, void (*)(void*, const char*, const char*));
  int (*managed_tensor_from_py_object_no_sync)(void*, ManagedTensorVersioned**);
  int (*managed_tensor_to_py_object_no_sync)(ManagedTensorVersioned*, void**);
  int (*dltensor_from_py_object_no_sync)(void*, Tensor*);
  int (*current_work_stream)(int32_t, int32_t, void**);
};
constexpr int32_t kCpu = 1;
constexpr int32_t kCuda = 2;
}  // namespace dl
)CPP";

// The conversions every fast call shares.
constexpr const char* kHelpers = R"CPP(// torch 2.14's stable conversion of a tensor to Python (stable/c/shim.h,
// above the target): weak, so null on an older torch.
extern "C" __attribute__((weak)) AOTITorchError torch_tensor_to_pyobject(AtenTensorHandle, void*, void**);

namespace {

const dl::ExchangeApi* dlpack() { return static_cast<const dl::ExchangeApi*>(python.dlpack); }

// A plain tensor: exactly torch.Tensor (no subclass, so no fake tensor and no
// __torch_function__), strided memory DLPack can describe (no meta, sparse or
// functorch wrapper: torch refuses those), a dtype of the table, on the CPU
// or a CUDA device, not needing grad while grad mode is on.
bool plain_tensor(PyObject* object, dl::Tensor& dt, ArgInfo& t) {
  if (Py_TYPE(object) != reinterpret_cast<PyTypeObject*>(python.tensor_type)) return false;
  if (dlpack()->dltensor_from_py_object_no_sync(object, &dt) != 0) {
    PyErr_Clear();
    return false;
  }
  if (dt.dtype.lanes != 1 || (dt.strides == nullptr && dt.ndim > 0)) return false;
  int slot = -1;
  for (int i = 0; i < kDtypeCount && slot < 0; ++i) {
    if (kCodeDlTypes[i].code == dt.dtype.code && kCodeDlTypes[i].bits == dt.dtype.bits) slot = i;
  }
  if (slot < 0) return false;  // the dispatcher's kernel names it
  if (dt.device.device_type == dl::kCpu) {
    t.device_type = cpu_type();
    t.device_index = -1;
  } else if (dt.device.device_type == dl::kCuda) {
    t.device_type = cuda_type();
    t.device_index = dt.device.device_id;
  } else {
    return false;
  }
  if (aoti_torch_grad_mode_is_enabled()) {
    PyObject* needs_grad =
        python.requires_grad_get != nullptr
            ? python.requires_grad_get(python.requires_grad_descriptor, object, python.tensor_type)
            : PyObject_GetAttr(object, python.requires_grad);
    if (needs_grad == nullptr) {
      PyErr_Clear();
      return false;
    }
    Py_DECREF(needs_grad);
    if (needs_grad == Py_True) return false;
  }
  t.data = static_cast<char*>(dt.data) + dt.byte_offset;
  t.ndim = dt.ndim;
  t.sizes = dt.shape;
  t.strides = dt.strides;
  t.numel = 1;
  for (int32_t d = 0; d < dt.ndim; ++d) t.numel *= dt.shape[d];
  // As torch decides is_contiguous(): size-1 dims have any stride; no elements, contiguous.
  t.contiguous = true;
  int64_t expected = 1;
  for (int32_t d = dt.ndim - 1; d >= 0 && t.numel != 0; --d) {
    if (dt.shape[d] == 1) continue;
    if (dt.strides[d] != expected) {
      t.contiguous = false;
      break;
    }
    expected *= dt.shape[d];
  }
  t.slot = slot;
  t.torch_dtype = torch_codes()[slot];
  t.defined = true;
  return true;
}

bool as_double(PyObject* object, double& value) {
  if (PyFloat_CheckExact(object)) {
    value = PyFloat_AsDouble(object);
    return true;
  }
  if (!PyLong_CheckExact(object)) return false;
  value = PyLong_AsDouble(object);
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

bool as_int64(PyObject* object, int64_t& value) {
  if (!PyLong_CheckExact(object)) return false;
  int overflow = 0;
  value = PyLong_AsLongLongAndOverflow(object, &overflow);
  if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  return true;
}

bool as_bool(PyObject* object, bool& value) {
  if (object != Py_True && object != Py_False) return false;
  value = object == Py_True;
  return true;
}

// No torch function mode (torch.device as a context included) and no
// dispatch mode (fake tensors, FlopCounterMode, ...) active: they must see the call.
bool plain_context() {
  if (python_true(python.function_mode)) return false;
  PyObject* depth = python.dispatch_modes();
  if (depth == nullptr) {
    PyErr_Clear();
    return false;
  }
  const long modes = PyLong_AsLong(depth);
  Py_DECREF(depth);
  return modes == 0;
}

// An output handed to Python through DLPack: the Python tensor owns the
// binding's handle, or its raw memory, and frees it with itself.
struct Exported {
  dl::ManagedTensorVersioned managed;
  AtenTensorHandle handle = nullptr;
  RawOutput* raw = nullptr;
};

// An output as the Python tensor of the very tensor the binding allocated
// (its storage resizable, its CUDA memory the caching allocator's, so
// record_stream holds), through torch 2.14's stable conversion; on an older
// torch, through DLPack, whose Python tensor wraps the memory instead (not
// resizable; record_stream does nothing on it).
PyObject* to_python(OwnedTensor& out) {
  if (torch_tensor_to_pyobject != nullptr) {
    void* object = nullptr;
    if (torch_tensor_to_pyobject(out.handle, nullptr, &object) != AOTI_TORCH_SUCCESS || object == nullptr) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "kernel registry: torch could not wrap an output");
      return nullptr;
    }
    return static_cast<PyObject*>(object);  // a reference of its own: `out` frees the binding's
  }
  const ArgInfo info = info_of(out);
  auto* exported = new Exported{};
  exported->raw = out.release_raw();
  exported->handle = out.release();
  dl::ManagedTensorVersioned& m = exported->managed;
  m.version = dl::Version{1, 0};
  m.manager_ctx = exported;
  m.deleter = [](dl::ManagedTensorVersioned* self) {
    auto* e = static_cast<Exported*>(self->manager_ctx);
    if (e->handle != nullptr) aoti_torch_delete_tensor_object(e->handle);
    if (e->raw != nullptr) free_raw(e->raw);
    delete e;
  };
  const bool cpu = info.device_type == cpu_type();
  m.dl_tensor = dl::Tensor{info.data, dl::Device{cpu ? dl::kCpu : dl::kCuda, cpu ? 0 : info.device_index},
                           static_cast<int32_t>(info.ndim),
                           dl::DataType{kCodeDlTypes[info.slot].code, kCodeDlTypes[info.slot].bits, 1},
                           const_cast<int64_t*>(info.sizes), const_cast<int64_t*>(info.strides), 0};
  void* object = nullptr;
  if (dlpack()->managed_tensor_to_py_object_no_sync(&m, &object) != 0) {
    m.deleter(&m);  // not taken: still ours
    return nullptr;
  }
  return static_cast<PyObject*>(object);
}

// Bumps a tensor's version counter through torch._C._increment_version,
// which takes a sequence of tensors (torch 2.11's stable ABI has no shim for
// it): ~0.1 us, its Python wrapper in torch.autograd.graph ~0.3 us (2-core
// machine, torch 2.14). The 1-tuple is kept between calls, which saves making
// and freeing one a call (~0.05 us); it is taken while in use, so a call
// nested in this one (through a Python fallback) makes its own, and kept
// again only when nothing else holds it. False: a Python error.
bool bump_version(PyObject* tensor) {
  static PyObject* kept_tuple = nullptr;
  PyObject* one = kept_tuple;
  kept_tuple = nullptr;
  if (one == nullptr && (one = PyTuple_New(1)) == nullptr) return false;
  Py_INCREF(tensor);
  PyTuple_SetItem(one, 0, tensor);  // takes the reference; releases what it held (None, or nothing)
  PyObject* done = python.increment_version(one);
  if (Py_REFCNT(one) == 1 && kept_tuple == nullptr) {
    Py_INCREF(Py_None);
    PyTuple_SetItem(one, 0, Py_None);  // the tensor is not kept past the call
    kept_tuple = one;
  } else {
    Py_DECREF(one);
  }
  if (done == nullptr) return false;
  Py_DECREF(done);
  return true;
}

// Other Python threads run while the kernel does, as with torch's own bindings.
struct WithoutGil {
  PyThreadState* state = PyEval_SaveThread();
  WithoutGil() = default;
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;
  ~WithoutGil() { PyEval_RestoreThread(state); }
};

// The profiler sees the op by its name, as the dispatcher's op is seen as
// kreg_<hash>::call. Only while it profiles: the shim's record allocates one
// each call, ~1 us on an H200 even with no profiler on.
struct Recorded {
  AtenRecordFunctionHandle guard = nullptr;
  Recorded(const char* name, bool profiling) {
    if (!profiling) return;
    if (aoti_record_function_start(name, nullptr, nullptr, 0, &guard) != AOTI_TORCH_SUCCESS) guard = nullptr;
  }
  Recorded(const Recorded&) = delete;
  Recorded& operator=(const Recorded&) = delete;
  ~Recorded() {
    if (guard != nullptr) aoti_record_function_end(guard);
  }
};

)CPP";

// The entry itself: arguments read by the table's kinds, as the boxed kernel
// reads them (codegen.cc), then the same run().
constexpr const char* kFastCall = R"CPP(
// Whether the table's op has a fast entry: int[], ScalarType? and an optional
// Tensor(a!) always take the dispatcher.
bool convertible(const LauncherTable& table) {
  for (int i = 0; i < table.arg_count; ++i) {
    const char kind = table.arg_kinds[i];
    if (kind == 'l' || kind == 's' || (kind == 'O' && ((table.mutated_mask >> i) & 1u))) return false;
  }
  return true;
}

PyObject* fast_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  try {
    int64_t address = 0;
    if (!as_int64(self, address)) Py_RETURN_NOTIMPLEMENTED;
    const LauncherTable& table = table_at(address);
    if (nargs != table.arg_count || !plain_context()) Py_RETURN_NOTIMPLEMENTED;
    CallArgs a;
    dl::Tensor views[kMaxArgs];
    kreg_value* values = a.values + table.return_count;
    for (int i = 0; i < table.arg_count; ++i) {
      PyObject* object = args[i];
      switch (table.arg_kinds[i]) {
        case 'O':
          if (object == Py_None) break;
          [[fallthrough]];
        case 'T':
          if (!plain_tensor(object, views[i], a.infos[i])) Py_RETURN_NOTIMPLEMENTED;
          a.tensors[i] = &a.infos[i];
          break;
        case 'f':
          if (!as_double(object, values[i].f64)) Py_RETURN_NOTIMPLEMENTED;
          break;
        case 'i':
          if (!as_int64(object, values[i].i64)) Py_RETURN_NOTIMPLEMENTED;
          break;
        case 'b':
          if (!as_bool(object, values[i].b)) Py_RETURN_NOTIMPLEMENTED;
          break;
        default:
          Py_RETURN_NOTIMPLEMENTED;
      }
    }
    const bool fill = table.return_count > 0 && fills_new_memory_gil_held();  // only outputs are new memory
    OwnedTensor outs[kMaxOutputs];
    {
      const Recorded recorded(table.op_name, python_true(python.profiler_enabled));
      const WithoutGil no_gil;
      run(table, a, fill, outs, /*raw=*/torch_tensor_to_pyobject == nullptr);
    }
    // A tensor written in place has its version counter bumped, as the
    // dispatcher's ADInplaceOrView fallback does for a Tensor(a!) argument, so
    // autograd sees the write (an inference tensor has none: left alone).
    for (int i = 0; i < table.arg_count; ++i) {
      if (((table.mutated_mask >> i) & 1u) && !bump_version(args[i])) return nullptr;
    }
    if (table.return_count == 0) Py_RETURN_NONE;
    if (table.return_count == 1) return to_python(outs[0]);
    PyObject* tuple = PyTuple_New(table.return_count);
    if (tuple == nullptr) return nullptr;
    for (int k = 0; k < table.return_count; ++k) {
      PyObject* out = to_python(outs[k]);
      if (out == nullptr || PyTuple_SetItem(tuple, k, out) != 0) {
        Py_DECREF(tuple);
        return nullptr;
      }
    }
    return tuple;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyMethodDef fast_call_def = {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_call)),
                             METH_FASTCALL, nullptr};

// A new reference kept for the process's life.
PyObject* kept(PyObject* object) {
  Py_INCREF(object);
  return object;
}

}  // namespace

// What the binding needs of Python (PythonSide, codegen.cc), from
// registry/load.py: (torch.Tensor, its __dlpack_c_exchange_api__ capsule or
// None, torch._C._get_deterministic_algorithms,
// torch._C._get_deterministic_fill_uninitialized_memory,
// torch._C._is_torch_function_mode_enabled, torch._C._len_torch_dispatch_stack,
// torch._C._increment_version, torch._C._autograd._profiler_enabled). Returns 1 when the fast entry can
// be had (a DLPack exchange API of version 1.2 or later), 0 when not, -1 with
// a Python error.
extern "C" int kreg_init(PyObject* config) {
  PyObject *tensor_type, *capsule, *deterministic, *fill_memory, *function_mode, *dispatch_modes, *increment_version,
      *profiler_enabled;
  if (!PyArg_ParseTuple(config, "OOOOOOOO", &tensor_type, &capsule, &deterministic, &fill_memory, &function_mode,
                        &dispatch_modes, &increment_version, &profiler_enabled)) {
    return -1;
  }
  python.profiler_enabled.bind(profiler_enabled, 0);
  python.deterministic.bind(deterministic, 0);
  python.fill_memory.bind(fill_memory, 0);
  python.function_mode.bind(function_mode, 0);
  python.dispatch_modes.bind(dispatch_modes, 0);
  python.increment_version.bind(increment_version, 1);
  python.tensor_type = kept(tensor_type);
  python.requires_grad = PyUnicode_InternFromString("requires_grad");
  if (python.requires_grad == nullptr) return -1;
  // The descriptor is used only while it is a data descriptor (a tensor's
  // __dict__ cannot shadow it), as torch's getset is.
  if (PyObject* descriptor = PyObject_GetAttr(tensor_type, python.requires_grad)) {
    auto get = reinterpret_cast<descrgetfunc>(PyType_GetSlot(Py_TYPE(descriptor), Py_tp_descr_get));
    if (get != nullptr && PyType_GetSlot(Py_TYPE(descriptor), Py_tp_descr_set) != nullptr) {
      python.requires_grad_descriptor = descriptor;
      python.requires_grad_get = get;
    } else {
      Py_DECREF(descriptor);
    }
  }
  PyErr_Clear();
  if (capsule == Py_None) return 0;
  const auto* api = static_cast<const dl::ExchangeApi*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
  if (api == nullptr) return -1;
  if (api->header.version.major != 1 || api->header.version.minor < 2) return 0;
  python.dlpack = api;
  return 1;
}

// A Python function bound to the table at `address`, or None for an op the
// fast entry does not convert (or where torch offers no DLPack exchange API).
extern "C" PyObject* kreg_fast_entry(int64_t address) {
  if (python.dlpack == nullptr || !convertible(table_at(address))) Py_RETURN_NONE;
  PyObject* object = PyLong_FromLongLong(address);
  if (object == nullptr) return nullptr;
  PyObject* function = PyCFunction_New(&fast_call_def, object);
  Py_DECREF(object);
  return function;
}
)CPP";

}  // namespace

std::string fast_entry() {
  return std::string("// The handle's fast entry (core/fast_entry.h).\n") + kDlpack + kHelpers + kFastCall;
}

}  // namespace kreg
