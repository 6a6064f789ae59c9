// Kernels for guard_chain.cc: a stand-in for a user's kernel at n = 1, and
// the two ways a worker could move a guard zone's bytes without a copy
// engine (compute only, so no cross-engine wait on the stream).
extern "C" __global__ void user_kernel(float* out, const float* x, const float* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

// One thread a byte: dst[i] = src[i] for i < bytes (src or dst may be mapped host memory).
extern "C" __global__ void zone_copy(unsigned char* dst, const unsigned char* src, int bytes) {
  int i = threadIdx.x;
  if (i < bytes) dst[i] = src[i];
}

// Copies the zone into mapped host memory, then raises the host's flag to `seq` (the host polls it, not the stream).
extern "C" __global__ void zone_check(unsigned char* host_dst, const unsigned char* zone, int bytes,
                                      volatile unsigned* host_flag, unsigned seq) {
  int i = threadIdx.x;
  if (i < bytes) host_dst[i] = zone[i];
  __syncthreads();
  if (i == 0) {
    __threadfence_system();
    *host_flag = seq;
  }
}
