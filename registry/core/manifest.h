// A kernel's manifest: kernels/<name>/kernel.toml, parsed and validated.
//
// Format (version 1) — every key is optional unless marked required:
//
//   format       = 1                      # required; an unknown version is an error
//   name         = "axpy"                 # the kernel's name, [a-z_][a-z0-9_]{0,63}; default:
//                                         #   derived from the folder's (kernel_name_from_folder:
//                                         #   "lab-02-axpy" -> "lab_02_axpy"). get() takes the
//                                         #   name or the folder's own
//   namespace    = "lab"                  # binding = "torch-library" only: the ops become
//                                         #   torch.ops.lab.<op>; default: the kernel's name
//   description  = "out = alpha * x + y"
//   binding      = "generated"            # "generated" (default), "torch-library" or "pybind":
//                                         #   generated: an op handle, built from the signature
//                                         #   torch-library: the same, and also registered as
//                                         #     torch.ops.<namespace>.<op> with a fake (meta)
//                                         #     kernel, so torch.compile sees it without a break
//                                         #   pybind: a hand-written PYBIND11_MODULE (slower)
//   binding_source = "axpy_pybind.cpp"    # required when binding = "pybind"
//   include_dirs = ["include"]            # searched for #include "..." and <...>
//   header_packages = ["nvidia-cutlass"]  # header libraries from installed Python packages,
//                                         #   by pip name, from a known table (core/header_packages.h:
//                                         #   nvidia-cutlass gives cute/ and cutlass/); searched
//                                         #   after include_dirs, for every compiler, without
//                                         #   copying and without a path. The key covers the
//                                         #   headers included (by content) and the version.
//   headers      = ["axpy.h"]             # extra files the build depends on
//   cflags       = ["-O3"]                # for every unit of every backend (C++ and nvcc;
//                                         #   nvcc hands the ones it does not know to the
//                                         #   host compiler), before the backend's own
//   ldflags      = []
//   reference    = "reference.py"         # Python module holding reference functions
//
//   [cpu]                                 # at least one of [cpu] / [cuda] is required
//   sources = ["axpy_cpu.cpp"]            # required, non-empty
//   cflags  = ["-O3"]
//
//   [cuda]
//   sources = ["axpy.cu"]
//   cflags  = ["-O3", "-lineinfo"]        # given to nvcc, after the top-level cflags
//   compiler = "nvcc"                     # [cuda] only: "nvcc" (default), "nvrtc" or "nvcc-cubin":
//                                         #   nvrtc: device_sources (the __global__ functions
//                                         #   and what they include) are compiled in-process
//                                         #   by NVRTC to a cubin; sources are then host C++
//                                         #   launchers calling them through kreg/launch.h
//                                         #   nvcc-cubin: the same, with `nvcc -cubin` as the
//                                         #   device compiler (code NVRTC cannot take: host-heavy
//                                         #   templates, CUTLASS); needs the CUDA toolkit
//   device_sources = ["axpy_device.cu"]   # required with compiler = "nvrtc" / "nvcc-cubin", else an error
//   device_cflags  = ["-lineinfo"]        # the device compiler's options (with those two only)
//   prelude = "gemm_prelude.cuh"          # with "nvrtc" only: a header compiled once into NVRTC's
//                                         #   precompiled header (kept by a compile server,
//                                         #   device/pch_server.py); the device sources are
//                                         #   compiled after it, so an edit skips what it instantiates
//   link_sources = ["gemm_epilogue.cu"]   # with "nvrtc" only: device sources compiled apart to
//                                         #   LTO-IR and linked with the rest by nvJitLink -lto
//                                         #   (device/lto_link.py): an edit of one compiles it alone
//                                         #   and links, skipping the front end of the others
//   kernels_used = ["gemm_bf16", "gemm_f16"]  # with link_sources only: the extern "C" kernels the
//                                         #   launchers launch; the link keeps these alone, each
//                                         #   linked on its own, side by side, from the first link
//                                         #   on (an edit of the main unit too); a kernel not listed
//                                         #   is left out. Without it the first link of a main unit
//                                         #   holds every kernel and learns their names
//   launcher_compiler = "c++"             # with "nvrtc" / "nvcc-cubin": what compiles `sources`
//                                         #   (the host launchers): "c++" (default: plain C++,
//                                         #   no CUDA header) or "nvcc": `nvcc -x cu -c` for each,
//                                         #   for launchers that include CUDA headers or a library's
//                                         #   host side (CUTLASS fills TMA descriptors only when
//                                         #   nvcc compiles the host code); their device pass
//                                         #   targets the cubin's arch, and the CUDA runtime is
//                                         #   linked static, so the library stays torch-free and
//                                         #   loads in an isolated worker. Kernels still live in
//                                         #   device_sources and launch through kreg/launch.h.
//   arch_specific = false                 # [cuda] only: true targets each architecture's
//                                         #   arch-specific variant where it has one (9.0 ->
//                                         #   sm_90a, 10.0 -> sm_100a: every capability from 9.0
//                                         #   on), on every path (TORCH_CUDA_ARCH_LIST "9.0a" for
//                                         #   nvcc, -arch=sm_90a for the cubins). Needed by wgmma,
//                                         #   TMA multicast, setmaxnreg, tcgen05 (CUTLASS 3.x
//                                         #   Hopper/Blackwell GEMMs): built without it, CUTLASS
//                                         #   compiles the kernel body to an error printf and
//                                         #   the build fails saying to set this key. On a
//                                         #   capability below 9.0 (no such variant) the plain
//                                         #   arch is built: the compiler's feature macros
//                                         #   (__CUDA_ARCH_FEAT_SM90_ALL, __CUDA_ARCH_SPECIFIC__)
//                                         #   are then undefined, which the code can test to take
//                                         #   a fallback path. The targeted list is env.cuda_arch
//                                         #   of the key (and the cubin's -arch).
//
//   [[op]]                                # at least one
//   signature  = "axpy(Tensor x, Tensor y, float alpha) -> Tensor"   # required
//   dtypes     = ["float32", "float16", "bfloat16"]  # default ["float32"]
//   launcher   = "axpy"                   # symbol prefix; default: the op's name
//   same_shape = ["x", "y"]               # default: every Tensor argument
//   reference  = "axpy"                   # function in the reference module; default: op name
//   baseline   = "torch_axpy"             # optional: a function in the reference module that
//                                         #   does the same with torch's own ops; sweeps time it
//   outputs    = { out = "like x" }       # each return's dtype and shape (core/output_spec.h):
//                                         #   "like x", "float32[x.shape[:-1]]",
//                                         #   "x.dtype[x.size(0), w.size(0)]"; a single return
//                                         #   defaults to "like <first Tensor argument>"
//   arg_dtypes = { idx = "int64" }        # Tensors whose dtype is fixed; the others share the
//                                         #   dispatch dtype (one of `dtypes`), which the first
//                                         #   of them decides at run time
//   backward   = "axpy_backward"          # another op of this kernel giving the gradients,
//                                         #   matched by names: its arguments are grad_<return>
//                                         #   or a forward argument/return (saved for it); its
//                                         #   returns are grad_<Tensor argument>
//   sweep      = { x = "[rows, cols]", w = "[cols]" }  # shapes for sweeps and generated tests,
//                                         #   in named sizes (registry/notebook/dtype_sweep.py maps
//                                         #   element counts onto them); default: every Tensor (n,)
//
//   [tune]                                # optional: the kernel's config space (core/config_space.h; read by core/tune_manifest.h)
//   params  = { THREADS = [256, 128, 512], ROWS = [1, 2, 4] }   # required: upper-case names, each
//                                         #   with its candidate integers (distinct, non-empty)
//   default = { THREADS = 256 }           # what a plain get builds; a parameter left out
//                                         #   defaults to its first value
//   rule    = "ROWS * THREADS <= 1024"    # which configs are valid: integers, names, + - * / %,
//                                         #   < <= > >= == !=, && || !, (); 0 is false. The default
//                                         #   must pass, and the rule must evaluate (no division by
//                                         #   zero) for every config.
//   Every unit of every backend gets a config as defines, -DNAME=VALUE, appended to `cflags`
//   and to [cuda] device_cflags (so the content key covers them: each config is its own build).
//   In an [[op]]: tune = ["THREADS"] names the parameters that op's code reads (default: all);
//   registry.tune varies only those for it, so a kernel's ops cost the sum of their spaces.
//   A source named like one launcher (gemm_bf16.cu for gemm's bfloat16) is that dtype's own
//   unit: registry.tune builds each config with the tuned dtypes' units only (core/dtype_units.h).
//   The parsed manifest carries the default config's; with_config() gives another's. Kernel
//   code keeps its hand-set value as the fallback: #ifndef ROWS / #define ROWS 1 / #endif.
//
// dtypes come from the one table in core/dtype.h: float32, float16, bfloat16,
// float64, int8, int16, int32, int64, uint8, bool, float8_e4m3fn, float8_e5m2.
//
// Every path is relative to the kernel's folder and must stay inside it: no
// absolute paths, no "..", no symlink that resolves outside. Unknown keys are
// errors (a typo must not silently drop a flag).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config_space.h"
#include "dtype.h"  // dtype_suffix, the dtype table
#include "identifier.h"  // is_c_identifier, which the manifest's names must pass
#include "op_spec.h"  // OpSpec: one [[op]] as read
#include "output_spec.h"
#include "signature.h"

namespace kreg {

inline constexpr int kManifestFormat = 1;
inline constexpr const char* kManifestFileName = "kernel.toml";

// The [cuda] compilers that build device code into its own cubin, in the
// order error messages list them ("nvcc" builds it with the launchers, through
// torch's load()). Each has its module in registry/device/ (compiler.py's
// COMPILERS, checked against this list by tests/test_device_compilers.py).
inline const std::vector<std::string> kDeviceCompilers = {"nvrtc", "nvcc-cubin"};

// A manifest problem, always naming the file and the field (dotted path, e.g.
// "op[0].dtypes" or "cuda.sources[1]"; empty when the whole file is at fault).
class ManifestError : public std::runtime_error {
 public:
  ManifestError(std::string file, std::string field, const std::string& message);
  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  std::string field_;
};

struct BackendSpec {
  bool present = false;
  std::vector<std::string> sources;  // relative to the kernel folder, as written
  std::vector<std::string> cflags;
  std::string compiler;                     // [cuda]: "nvcc", "nvrtc" or "nvcc-cubin"; empty for [cpu]
  std::vector<std::string> device_sources;  // compiler != "nvcc": the device compiler's inputs
  std::vector<std::string> device_cflags;   // compiler != "nvcc": the device compiler's options
  std::string prelude;                      // compiler == "nvrtc": the precompiled header's file, or empty
  std::vector<std::string> link_sources;    // compiler == "nvrtc": device sources compiled apart, linked -lto
  std::vector<std::string> kernels_used;    // with link_sources: the kernels linked, each alone; empty: learned
  std::string launcher_compiler;            // with a device cubin: "c++" or "nvcc"; else empty
  bool arch_specific = false;               // [cuda]: target sm_XYa where the arch has one

  // "nvrtc" or "nvcc-cubin" when the device code is compiled into its own
  // cubin and loaded with the driver API (`sources` are then host launchers
  // only), else "".
  std::string device_compiler() const {
    return compiler == "nvrtc" || compiler == "nvcc-cubin" ? compiler : std::string();
  }
};

struct Manifest {
  std::string file;  // absolute path of kernel.toml
  std::string dir;   // absolute path of the kernel's folder
  std::string folder;  // the folder's own name, as get() also accepts it ("lab-02-axpy")
  std::string name;    // the kernel's name: the `name` key, else derived from `folder`
  std::string torch_namespace;  // `namespace`: torch.ops.<this> (torch-library); default `name`
  std::string description;
  std::string binding = "generated";
  std::string binding_source;
  std::vector<std::string> include_dirs;
  std::vector<std::string> header_packages;  // known distribution names (header_packages.h)
  std::vector<std::string> headers;
  std::vector<std::string> cflags;
  std::vector<std::string> ldflags;
  std::string reference;
  BackendSpec cpu;
  BackendSpec cuda;
  std::vector<OpSpec> ops;
  ConfigSpace tune;  // empty without a [tune] table
  Config config;     // the config whose defines cflags ends with: the default, or with_config's
  std::string variant;  // "" for the kernel as written; a derived build's name (derived_manifest.h)
  // Empty but for a build of only some dtypes' units (with_dtypes, core/dtype_units.h):
  // then "<op>:<dtype>" for each dtype the build keeps.
  std::vector<std::string> dtype_subset;
  // A manifest held in memory, read from no file (a notebook cell's,
  // inline_manifest.h): its text, which the key covers in place of a
  // kernel.toml's content; `file` is then a label ("%%kernel <name>"), not a
  // path. "" for a manifest read from kernel.toml.
  std::string inline_text;
};

// Parses and validates; throws ManifestError.
Manifest parse_manifest(const std::string& manifest_path);

// Same, from text (for tests and fuzzing); `dir` is where relative paths resolve.
Manifest parse_manifest_text(const std::string& text, const std::string& manifest_path,
                             const std::string& dir);

// The same manifest building `config` (one value per parameter of its [tune]
// space): its defines replace the default's. Throws ManifestError naming the
// config and what is wrong with it (unknown parameter, value, the rule).
Manifest with_config(const Manifest& manifest, const Config& config);

// Kernel names reach paths and command lines: [a-z_][a-z0-9_]{0,63}.
bool is_valid_kernel_name(const std::string& name);

// The kernel name a folder gives when its manifest sets none: letters
// lowercased, each run of characters outside [a-z0-9_] one '_', a leading
// digit preceded by '_' ("lab-02-axpy" -> "lab_02_axpy", "02 Axpy" ->
// "_02_axpy"). Empty when the result would not be a valid name (longer than
// 64 characters): such a folder needs a `name` key.
std::string kernel_name_from_folder(const std::string& folder);

}  // namespace kreg
