// The build keys: what each artifact's key covers, made here only (Python
// asks through _core; registry/builder/keys.py names the same functions).
//
// What each key covers (a change here moves every cached key):
//   kernel-lib / module   kernel, backend, kind, file:<label> per scanned file
//                         (manifest, sources, include closure), flags.cflags,
//                         flags.<backend>, flags.ldflags, include_dirs,
//                         package:<name> (each header package's version:
//                         header_packages.h; its files are file:pkg:<name>/...),
//                         device_compiler (host launchers of a cubin: "nvrtc"
//                         or "nvcc-cubin"), launcher_compiler (only when
//                         "nvcc": then toolchain.nvcc and env.cuda_arch stay
//                         in a direct build's key), launcher_header (kernel-libs: the
//                         digest of the launcher prototypes and entries, as
//                         generated and force-included, launcher_header.h), signature:<op>
//                         per op (kernel-libs: its canonical text), and the environment's env.* and
//                         toolchain.* inputs (toolchain.command_lines: the digest of
//                         registry/command_lines.py, every flag the registry adds;
//                         a direct build leaves out those of torch, Python and
//                         nvcc: kNotDirectInputs)
//                         + the files its dependency record adds (dep_record.h)
//   device (cubin)        kernel, backend "cuda", kind "device", recipe (what
//                         the compiler is handed besides its options and the
//                         files, as composed: cubin_build.keyed_recipe), file:<label> per file its
//                         snapshot holds (content digests: the bytes compiled),
//                         flags.device (the compiler's options), include_dirs,
//                         package:<name> per header package,
//                         and the compiler's own inputs (its identity)
//                         + the files its dependency record adds
//   binding (shared)      kind, backend, template, source (the generated text's digest),
//                         file:registry/include/kreg/abi.h and
//                         file:registry/include/kreg/launcher_table.h (what the
//                         text includes), stable_abi (the torch it targets),
//                         the environment less env.cuda_arch,
//                         toolchain.kernel_lib and nvcc's inputs (a binding is
//                         host C++), less torch's and Python's versions (it is
//                         built on their stable ABIs), env.cuda as its major
//                         (kNotBindingInputs)
// One binding serves every signature; an op's namespace (registered at run
// time, kreg_define) is "kreg_" + 16 hex of (signature, backend, template).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dep_record.h"
#include "header_packages.h"
#include "key.h"
#include "manifest.h"

namespace kreg {

// What Python knows about this process and machine.
struct PlanFacts {
  std::string backend;                        // "cpu" | "cuda", already chosen
  std::map<std::string, std::string> env;     // env.* and toolchain.* key inputs
  std::string registry_include;               // the kernel ABI headers' folder (absolute)
  std::vector<HeaderPackage> header_packages; // the manifest's header_packages, as found here
  std::vector<std::string> loaded_namespaces; // op namespaces and shared bindings loaded in this process
  bool rebuild = false;                       // rebuild=True: build every artifact again
};

// How a backend's code is built: the one rule, asked from Python too.
// Device code in its own cubin: BackendSpec::device_compiler() of [cuda].
bool uses_device_module(const Manifest& manifest, const std::string& backend);
// Torch-free libraries the registry compiles itself (registry/builder/direct.py):
// CPU kernel libraries and the host launchers of device code in a cubin.
bool built_directly(const Manifest& manifest, const std::string& backend);

// An inline manifest's text as a kernel-lib key input: "file:kernel.toml",
// the label a kernel folder's manifest has, = the text's digest. nullopt for
// a manifest read from a file (its content is keyed as every file is).
std::optional<KeyInput> inline_manifest_input(const Manifest& manifest);

// The kernel-lib base key and binding pieces, for tools and tests.
Key kernel_lib_key(const Manifest& manifest, const PlanFacts& facts, const std::vector<std::string>& files);
std::string binding_namespace(const Signature& signature, const std::string& backend);
// The shared binding's key (codegen.h): no signature, no kernel. Safe from
// any thread; the generated text is made once per process and backend, and
// hashed again only when another input (env, abi.h) differs from the last call's.
Key binding_key(const std::string& backend, const std::map<std::string, std::string>& env,
                const std::string& registry_include);
// Its module name (load()'s and the cache entry's): "kreg_binding_cpu_<16 hex of the key>".
std::string binding_module_name(const std::string& backend, const Key& key);
// The cubin's base key (registry/device/cubin_build.py): `files` are (path,
// content digest) of the snapshot compiled, labeled as a kernel library's
// are; `compiler_inputs` the device compiler's identity (name -> value).
Key device_key(const Manifest& manifest, const std::string& registry_include,
               const std::vector<std::pair<std::string, Digest>>& files, const std::string& recipe,
               const std::vector<std::string>& options,
               const std::vector<std::pair<std::string, std::string>>& compiler_inputs,
               const std::vector<HeaderPackage>& packages = {});
// The manifest's include path: the kernel folder, its include_dirs, its header
// packages' dirs, the registry's headers.
std::vector<std::string> include_dirs(const Manifest& manifest, const std::string& registry_include,
                                      const std::vector<HeaderPackage>& packages = {});
// The sources a kernel library (or pybind module) compiles.
std::vector<std::string> kernel_sources(const Manifest& manifest, const std::string& backend,
                                        const std::string& registry_include);

// The roots a kernel library's key labels its files by: the kernel folder
// (no prefix), the registry's headers ("registry/include/") and each header
// package's import folder ("pkg:<name>/").
std::vector<LabelRoot> key_label_roots(const Manifest& manifest, const std::string& registry_include,
                                       const std::vector<HeaderPackage>& packages = {});

}  // namespace kreg
