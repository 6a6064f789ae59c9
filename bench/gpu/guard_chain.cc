// What each step of an isolated CUDA call's worker side costs, one process,
// the driver API: the user's kernel at n = 1 launched and waited for, with
// its output's guard zone armed and read back in several ways. Prints the
// median, 10th and 90th percentiles of each chain's latency (us) over many
// calls. `STEPS=chain bash bench/gpu/run_all.sh`, or by hand:
//   nvcc -cubin -arch=sm_90 -o /tmp/gc.cubin bench/gpu/guard_chain_kernels.cu
//   g++ -O2 -std=c++17 -I/usr/local/cuda/include bench/gpu/guard_chain.cc
//       -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/gc    (one line)
//   /tmp/gc /tmp/gc.cubin
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define CHECK(x)                                                      \
  do {                                                                \
    CUresult r_ = (x);                                                \
    if (r_ != CUDA_SUCCESS) {                                         \
      const char* s_ = nullptr;                                       \
      cuGetErrorString(r_, &s_);                                      \
      std::fprintf(stderr, "%s: %s (line %d)\n", #x, s_, __LINE__);   \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

using Clock = std::chrono::steady_clock;
static CUstream stream;

static void poll_stream() {
  for (;;) {
    CUresult r = cuStreamQuery(stream);
    if (r == CUDA_SUCCESS) return;
    if (r != CUDA_ERROR_NOT_READY) CHECK(r);
  }
}

static void poll_flag(volatile unsigned* flag, unsigned seq) {
  while (*flag != seq) {
  }
}

static void measure(const char* name, const std::function<void()>& chain, int calls = 20000) {
  for (int i = 0; i < 2000; ++i) chain();
  std::vector<double> us(calls);
  for (int i = 0; i < calls; ++i) {
    auto t0 = Clock::now();
    chain();
    us[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  std::sort(us.begin(), us.end());
  std::printf("%-58s median %6.2f us   p10 %6.2f   p90 %6.2f\n", name, us[calls / 2], us[calls / 10],
              us[calls * 9 / 10]);
}

int main(int argc, char** argv) {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUmodule mod;
  CHECK(cuModuleLoad(&mod, argv[1]));
  CUfunction user, zcopy, zcheck;
  CHECK(cuModuleGetFunction(&user, mod, "user_kernel"));
  CHECK(cuModuleGetFunction(&zcopy, mod, "zone_copy"));
  CHECK(cuModuleGetFunction(&zcheck, mod, "zone_check"));
  const int kZone = 64;
  CUdeviceptr buf;
  CHECK(cuMemAlloc(&buf, 4096));
  CUdeviceptr out = buf, x = buf + 1024, y = buf + 2048, zone = buf + 4;  // zone: just past out[0]
  CHECK(cuMemsetD8(buf, 0x3f, 4096));
  unsigned char* pinned;
  CHECK(cuMemHostAlloc(reinterpret_cast<void**>(&pinned), 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  std::memset(pinned, 0xa5, 4096);
  CUdeviceptr pinned_dev;
  CHECK(cuMemHostGetDevicePointer(&pinned_dev, pinned, 0));
  volatile unsigned* flag = reinterpret_cast<volatile unsigned*>(pinned + 2048);
  unsigned seq = 0;
  float a = 1.5f;
  long long n = 1;
  void* user_args[] = {&out, &x, &y, &a, &n};
  auto launch_user = [&] { CHECK(cuLaunchKernel(user, 1, 1, 1, 128, 1, 1, 0, stream, user_args, nullptr)); };
  int bytes = kZone;
  CUdeviceptr canary_dev = pinned_dev, slot_dev = pinned_dev + 64;
  void* arm_args[] = {&zone, &canary_dev, &bytes};
  void* copyback_args[] = {&slot_dev, &zone, &bytes};
  CUdeviceptr flag_dev = pinned_dev + 2048;
  unsigned seq_arg = 0;
  void* check_args[] = {&slot_dev, &zone, &bytes, &flag_dev, &seq_arg};

  measure("cuStreamQuery on an idle stream (one call)", [&] { (void)cuStreamQuery(stream); }, 200000);
  unsigned long long buffer_id = 0;
  measure("cuPointerGetAttribute(BUFFER_ID)", [&] {
    CHECK(cuPointerGetAttribute(&buffer_id, CU_POINTER_ATTRIBUTE_BUFFER_ID, out));
  }, 200000);
  measure("launch only (no wait)", [&] { launch_user(); }, 20000);
  CHECK(cuStreamSynchronize(stream));
  measure("launch + poll stream", [&] { launch_user(); poll_stream(); });
  measure("HtoD arm + launch + DtoH + poll stream (today)", [&] {
    CHECK(cuMemcpyHtoDAsync(zone, pinned, kZone, stream));
    launch_user();
    CHECK(cuMemcpyDtoHAsync(pinned + 64, zone, kZone, stream));
    poll_stream();
  });
  measure("memsetD8 arm + launch + DtoH + poll stream", [&] {
    CHECK(cuMemsetD8Async(zone, 0xa5, kZone, stream));
    launch_user();
    CHECK(cuMemcpyDtoHAsync(pinned + 64, zone, kZone, stream));
    poll_stream();
  });
  measure("kernel arm + launch + kernel copy-back + poll stream", [&] {
    CHECK(cuLaunchKernel(zcopy, 1, 1, 1, 64, 1, 1, 0, stream, arm_args, nullptr));
    launch_user();
    CHECK(cuLaunchKernel(zcopy, 1, 1, 1, 64, 1, 1, 0, stream, copyback_args, nullptr));
    poll_stream();
  });
  measure("launch + write-value flag + poll host flag", [&] {
    launch_user();
    ++seq;
    CHECK(cuStreamWriteValue32(stream, flag_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    poll_flag(flag, seq);
  });
  measure("kernel arm + launch + kernel check(flag) + poll host flag", [&] {
    CHECK(cuLaunchKernel(zcopy, 1, 1, 1, 64, 1, 1, 0, stream, arm_args, nullptr));
    launch_user();
    seq_arg = ++seq;
    CHECK(cuLaunchKernel(zcheck, 1, 1, 1, 64, 1, 1, 0, stream, check_args, nullptr));
    poll_flag(flag, seq);
  });
  measure("kernel arm + launch + kernel check(flag) + poll flag + query", [&] {
    CHECK(cuLaunchKernel(zcopy, 1, 1, 1, 64, 1, 1, 0, stream, arm_args, nullptr));
    launch_user();
    seq_arg = ++seq;
    CHECK(cuLaunchKernel(zcheck, 1, 1, 1, 64, 1, 1, 0, stream, check_args, nullptr));
    poll_flag(flag, seq);
    poll_stream();
  });
  measure("HtoD arm + launch + DtoH + write-value flag + poll host flag", [&] {
    CHECK(cuMemcpyHtoDAsync(zone, pinned, kZone, stream));
    launch_user();
    CHECK(cuMemcpyDtoHAsync(pinned + 64, zone, kZone, stream));
    ++seq;
    CHECK(cuStreamWriteValue32(stream, flag_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    poll_flag(flag, seq);
  });
  measure("launch + kernel check(flag) + poll host flag (no arm)", [&] {
    launch_user();
    seq_arg = ++seq;
    CHECK(cuLaunchKernel(zcheck, 1, 1, 1, 64, 1, 1, 0, stream, check_args, nullptr));
    poll_flag(flag, seq);
  });
  // Graph: arm + user + check captured once, replayed (the user kernel's args fixed: only a ceiling).
  CUgraph graph;
  CUgraphExec exec;
  CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  CHECK(cuLaunchKernel(zcopy, 1, 1, 1, 64, 1, 1, 0, stream, arm_args, nullptr));
  launch_user();
  CHECK(cuLaunchKernel(zcopy, 1, 1, 1, 64, 1, 1, 0, stream, copyback_args, nullptr));
  CHECK(cuStreamEndCapture(stream, &graph));
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  measure("graph(kernel arm, launch, kernel copy-back) + poll stream", [&] {
    CHECK(cuGraphLaunch(exec, stream));
    poll_stream();
  });
  return 0;
}
