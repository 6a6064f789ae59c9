// The epilogue's last step, per element of alpha * (a @ b) + beta * c + bias
// in f32: edit it (e.g. return fmaxf(value, 0.0f) for a ReLU) and `get` again.
// A unit of its own ([cuda] link_sources), linked into the kernels by
// nvJitLink -lto: an edit compiles this file alone (it includes no CUTLASS
// header, so in milliseconds) and relinks each kernel, all at once.
namespace gemm_nvrtc {
__device__ float epilogue(float value);
}

__device__ float gemm_nvrtc::epilogue(float value) { return value; }
