#include "stable_binding_outputs.h"

namespace kreg::stable_outputs {

// Placed after the checks' helpers (ArgInfo, view_of) and before table_at.
const char* const kOwned = R"CPP(// An output of raw CUDA caching-allocator memory (new_raw_output): what the
// fast entry hands to Python through DLPack on a torch without
// torch_tensor_to_pyobject, with the shape DLPack borrows until then.
struct RawOutput {
  void* data = nullptr;
  int64_t numel = 0;
  int64_t ndim = 0;
  int slot = -1;
  int32_t device_index = 0;
  int64_t sizes[kMaxShapeDims];
  int64_t strides[kMaxShapeDims];
};

void free_raw(RawOutput* raw) {
  aoti_torch_cuda_caching_allocator_raw_delete(raw->data);
  delete raw;
}

ArgInfo info_of(const RawOutput& raw);

// Tensors the binding made (outputs), freed unless handed to torch: a
// tensor's handle, or raw memory, with what the call needs of it (`info`:
// its shape and strides point into the tensor or `raw`, so they move with it).
struct OwnedTensor {
  AtenTensorHandle handle = nullptr;
  RawOutput* raw = nullptr;
  ArgInfo info;
  OwnedTensor() = default;
  OwnedTensor(AtenTensorHandle h, const ArgInfo& i) : handle(h), info(i) {}
  explicit OwnedTensor(RawOutput* r) : raw(r), info(info_of(*r)) {}
  OwnedTensor(OwnedTensor&& other) noexcept : handle(other.handle), raw(other.raw), info(other.info) {
    other.handle = nullptr;
    other.raw = nullptr;
  }
  OwnedTensor& operator=(OwnedTensor&& other) noexcept {
    std::swap(handle, other.handle);
    std::swap(raw, other.raw);
    std::swap(info, other.info);
    return *this;
  }
  OwnedTensor(const OwnedTensor&) = delete;
  OwnedTensor& operator=(const OwnedTensor&) = delete;
  ~OwnedTensor() {
    if (handle != nullptr) aoti_torch_delete_tensor_object(handle);
    if (raw != nullptr) free_raw(raw);
  }
  RawOutput* release_raw() {
    RawOutput* r = raw;
    raw = nullptr;
    return r;
  }
  AtenTensorHandle release() {
    AtenTensorHandle h = handle;
    handle = nullptr;
    return h;
  }
};

ArgInfo info_of(const RawOutput& raw) {
  ArgInfo t;
  t.data = raw.data;
  t.numel = raw.numel;
  t.ndim = raw.ndim;
  t.sizes = raw.sizes;
  t.strides = raw.strides;
  t.torch_dtype = torch_codes()[raw.slot];
  t.slot = raw.slot;
  t.device_type = cuda_type();
  t.device_index = raw.device_index;
  t.contiguous = true;
  t.defined = true;
  return t;
}

const ArgInfo& info_of(const OwnedTensor& out) { return out.info; }
)CPP";

// Placed after check_tensors, before the backend's stream and guard.
const char* const kNew = R"CPP(// Fills `strides` for a contiguous tensor of `shape`; the element count its
// storage needs (an empty dim counted as 1, as torch's strides do).
int64_t contiguous_strides(const int64_t* shape, int64_t ndim, int64_t* strides) {
  int64_t numel = 1;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    strides[d] = numel;
    numel *= std::max<int64_t>(shape[d], 1);
  }
  return numel;
}

// A new output on the device of `first` (the caller holds a guard on it).
// aoti_torch_empty_strided takes the device's allocator as torch's own
// kernels do. `fill`: torch fills new memory (deterministic algorithms with
// fill_uninitialized_memory), so the dispatcher's aten::empty makes it, NaN
// filled, and an output a launcher leaves unwritten shows.
AtenTensorHandle new_output(const LauncherTable& table, const int64_t* shape, int64_t ndim, int slot,
                            const ArgInfo& first, bool fill) {
  int64_t strides[kMaxShapeDims];
  const int64_t numel = contiguous_strides(shape, ndim, strides);
  const int32_t dtype = torch_codes()[slot];
  // An isolated CUDA op's output: allocated flat with room past its end, then
  // viewed in its shape; the worker keeps canaries in that room while the
  // kernel runs (a write past the end lands in memory no tensor uses, and is named).
  const bool padded = __builtin_expect(table.output_padding > 0, 0);
  const int64_t whole_numel = numel + (table.output_padding + kCodeSizes[slot] - 1) / kCodeSizes[slot];
  const int64_t one = 1;
  const int64_t* alloc_shape = padded ? &whole_numel : shape;
  const int64_t* alloc_strides = padded ? &one : strides;
  const int64_t alloc_ndim = padded ? 1 : ndim;
  AtenTensorHandle out = nullptr;
  if (__builtin_expect(fill, 0)) {
    torch::stable::Tensor t = torch::stable::empty(
        torch::headeronly::IntHeaderOnlyArrayRef(alloc_shape, static_cast<size_t>(alloc_ndim)),
        static_cast<torch::headeronly::ScalarType>(dtype), std::nullopt,
        torch::stable::Device(static_cast<torch::headeronly::DeviceType>(first.device_type),
                              static_cast<torch::stable::accelerator::DeviceIndex>(first.device_index)));
    shim(aoti_torch_new_tensor_handle(t.get(), &out), "aoti_torch_new_tensor_handle");
  } else {
    @SHARED_OUTPUT@
    shim(aoti_torch_empty_strided(alloc_ndim, alloc_shape, alloc_strides, dtype, first.device_type,
                                  first.device_index, &out),
         "aoti_torch_empty_strided");
  }
  if (!padded) return out;
  AtenTensorHandle view = nullptr;
  const AOTITorchError error = aoti_torch__reinterpret_tensor(out, ndim, shape, strides, 0, &view);
  aoti_torch_delete_tensor_object(out);
  shim(error, "aoti_torch__reinterpret_tensor");
  return view;
}

// A new CUDA output as raw memory of torch's caching allocator, on the
// current stream, or null (an empty output, or no such shim in this
// torch): on an H200 with torch 2.11, ~1.9 us against ~3.9 us for
// aoti_torch_empty_strided, which goes through the dispatcher. Only for the
// fast entry on a torch without torch_tensor_to_pyobject, whose outputs reach
// Python through DLPack, which wraps the memory either way. `padding`: bytes
// past the end that the tensor does not cover (a guarded output's room).
RawOutput* new_raw_output(const int64_t* shape, int64_t ndim, int slot, const ArgInfo& first, int64_t padding) {
  if (aoti_torch_cuda_caching_allocator_raw_alloc == nullptr ||
      aoti_torch_cuda_caching_allocator_raw_delete == nullptr || std::find(shape, shape + ndim, 0) != shape + ndim) {
    return nullptr;
  }
  auto* raw = new RawOutput{};
  raw->ndim = ndim;
  raw->slot = slot;
  raw->device_index = first.device_index;
  std::copy(shape, shape + ndim, raw->sizes);
  raw->numel = contiguous_strides(shape, ndim, raw->strides);
  const auto bytes = static_cast<uint64_t>(raw->numel * kCodeSizes[slot] + padding);
  if (aoti_torch_cuda_caching_allocator_raw_alloc(bytes, &raw->data) != AOTI_TORCH_SUCCESS ||
      raw->data == nullptr) {
    delete raw;  // torch's own allocation below says what went wrong, if anything did
    return nullptr;
  }
  return raw;
}

// A new output's ArgInfo: its data, shape and strides read from the tensor
// (they live as long as it does), the rest known from how it was made
// (contiguous, `slot`'s dtype, `first`'s device): 3 shim calls where
// info_of(AtenTensorHandle) makes 10, ~40 ns an output on the 2-core machine.
ArgInfo info_of_new(AtenTensorHandle h, int64_t ndim, int slot, const ArgInfo& first) {
  ArgInfo t;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  shim(aoti_torch_get_data_ptr(h, &t.data), "aoti_torch_get_data_ptr");
  shim(aoti_torch_get_sizes(h, &sizes), "aoti_torch_get_sizes");
  shim(aoti_torch_get_strides(h, &strides), "aoti_torch_get_strides");
  t.sizes = sizes;
  t.strides = strides;
  t.ndim = ndim;
  t.numel = 1;
  for (int64_t d = 0; d < ndim; ++d) t.numel *= sizes[d];
  t.torch_dtype = torch_codes()[slot];
  t.slot = slot;
  t.device_type = first.device_type;
  t.device_index = first.device_index;
  t.contiguous = true;
  t.defined = true;
  return t;
}

// Output k, allocated from its declaration on the device of `first`; `raw`:
// the caller takes raw CUDA memory (new_raw_output) where it can be had.
OwnedTensor allocate(const LauncherTable& table, int k, const ArgInfo* const* args, const ArgInfo& first, bool fill,
                     bool raw) {
  const OutputDecl& decl = table.outputs[k];
  int64_t shape[kMaxShapeDims];
  int64_t ndim = 0;
  auto push = [&](int64_t size) {
    KREG_CHECK(ndim < kMaxShapeDims, table.op_name, ": output ", k, " has more than ", kMaxShapeDims, " dims");
    shape[ndim++] = size;
  };
  for (int j = 0; j < decl.ndims; ++j) {
    const DimTerm& term = decl.dims[j];
    if (term.kind == 0) {
      push(term.a);
      continue;
    }
    const ArgInfo& source = *args[term.arg];
    const int64_t n = source.ndim;
    if (term.kind == 1) {
      const int64_t d = term.a < 0 ? term.a + n : term.a;
      KREG_CHECK(d >= 0 && d < n, table.op_name, ": output ", k, " takes dim ", term.a, " of an argument with ", n,
                 " dims (shape ", sizes_of(source), ")");
      push(source.sizes[d]);
    } else {
      auto clamp = [n](int64_t v) { return v < 0 ? std::max<int64_t>(0, v + n) : std::min(v, n); };
      const int64_t start = clamp(term.a), stop = term.b == INT64_MAX ? n : clamp(term.b);
      for (int64_t d = start; d < stop; ++d) push(source.sizes[d]);
    }
  }
  const int slot = decl.dtype_code >= 0 ? decl.dtype_code : args[decl.dtype_arg]->slot;
  // A guarded output (table.output_padding) gets its room past the end in the same block.
  if (raw && !fill && first.device_type == cuda_type()) {
    if (RawOutput* r = new_raw_output(shape, ndim, slot, first, table.output_padding)) return OwnedTensor(r);
  }
  AtenTensorHandle out = new_output(table, shape, ndim, slot, first, fill);
  try {
    return OwnedTensor(out, info_of_new(out, ndim, slot, first));
  } catch (...) {
    aoti_torch_delete_tensor_object(out);
    throw;
  }
}
)CPP";

// The CPU output of an isolated op's table (registry/isolation/proxy.py): a
// large one comes from the shared output pool (core/shared_output_pool.h),
// which its worker maps, so the launcher writes it in place and nothing is
// copied back; otherwise, and if the pool has none, the CPU allocator.
const char* const kCpuShared =
    R"CPP(if (__builtin_expect(table.shared_output_allocate != nullptr, 0) && !padded) {
    void* data = table.shared_output_allocate(numel * kCodeSizes[slot]);  // null below the pool's minimum
    if (data != nullptr) {
      const AOTITorchError error = torch_from_blob(
          data, ndim, shape, strides, 0, dtype, first.device_type, first.device_index, &out,
          aoti_torch_layout_strided(), nullptr, 0,
          [](void* p, void* release) { reinterpret_cast<void (*)(void*)>(release)(p); },
          reinterpret_cast<void*>(table.shared_output_release));
      if (error != AOTI_TORCH_SUCCESS) table.shared_output_release(data);
      shim(error, "torch_from_blob");
      return out;
    }
  })CPP";

}  // namespace kreg::stable_outputs
