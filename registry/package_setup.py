"""setup.py of an AOT package, and the build facts it shares with the registry.

`python -m registry aot` (registry/tools/aot.py) copies this file verbatim as
the package's setup.py, beside kreg_build_spec.json: what to build, composed
by aot.py from the manifest with the JIT's own flag functions (keys.py). This
file only reads it, so a flag is composed in one place.

kreg_build_spec.json, format 1 (a package refuses another format):
    format           1
    package          the import name (<kernel>_ops)
    distribution     the distribution's name
    description      one line
    sources          {"def": [...], "cpu": [...], "cuda": [...]}: each module's units,
                     relative to setup.py; a backend not exported is absent
    include_dirs     relative to setup.py
    cxx_flags        every module's host flags
    cpu_cxx_flags    the CPU module's, after them ([cpu] cflags)
    cuda_cxx_flags   the CUDA module's host flags, after them (a carried cubin's
                     launchers: [cuda] cflags)
    nvcc_flags       the CUDA module's nvcc flags
    arch_specific    true: each GPU from 9.0 on gets its arch-specific target (sm_90a)
    link_flags       every module's
    package_data     files of the package to install beside it (_device/*.cubin)

The functions above main() hold where the registry is not installed; the
registry uses the same ones (environment.py), so a package and a JIT build
agree on libstdc++ and on arch-specific targets.
"""
import json
import os
import re

SPEC_FILE = "kreg_build_spec.json"
SPEC_FORMAT = 1


def torch_libstdcxx():
    """The libstdc++ shared library this process (torch) runs with, or None
    where that cannot be told (no /proc, or a libstdc++ linked in statically).

    Every build links it by path, ahead of the compiler's own -lstdc++. A
    toolchain that finds only libstdc++.a in its own library folder (say its
    libstdc++.so link dangles) would otherwise put a second, static copy of
    libstdc++ into each module; two copies of its locale state in one process
    break number formatting (an error message with a shape in it comes out
    cut short, or crashes). Where the compiler links the shared one anyway,
    this names the same library. Milliseconds: only builds ask.
    """
    import torch  # noqa: F401  (maps torch's libraries, and the libstdc++ they need)

    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libstdc++.so" not in line:
                    continue
                path = line.split(maxsplit=5)[-1].strip()
                if os.path.basename(path).startswith("libstdc++.so") and os.path.isfile(path):
                    return path
    except OSError:
        pass
    return None


def arch_specific_list(arch_list):
    """TORCH_CUDA_ARCH_LIST's form with each entry that has an arch-specific
    variant (every capability from 9.0 on: sm_90a, sm_100a, sm_120a) turned
    into it: "8.0;9.0+PTX" -> "8.0;9.0a+PTX". An entry with a suffix already
    ("9.0a", "10.0f") is kept; one below 9.0 stays plain (core/manifest.h:
    the code tests the compiler's feature macros for its fallback)."""
    entries = []
    for entry in arch_list.replace(" ", ";").split(";"):
        entry = entry.strip()
        match = re.fullmatch(r"(\d+)\.(\d+)(\+PTX)?", entry)
        if match and int(match.group(1)) >= 9:
            entry = f"{match.group(1)}.{match.group(2)}a{match.group(3) or ''}"
        if entry:
            entries.append(entry)
    return ";".join(entries)


def host_cpu_flags():
    """-mf16c where the CPU that builds has F16C, as the registry's own CPU
    builds do (without it every half <-> float conversion is a library call).
    Linux lists f16c in /proc/cpuinfo exactly when it is usable (AVX and the
    OS saving its state); elsewhere nothing is added. The manifest's flags
    come after these, so a -mno-f16c there wins."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return ["-mf16c"] if "f16c" in line.split(":", 1)[-1].split() else []
    except OSError:
        pass
    return []


def cuda_problem():
    """Why the CUDA module cannot be built here, or None."""
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    if CUDA_HOME is None or not os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc")):
        return "nvcc was not found; set CUDA_HOME to the CUDA toolkit"
    if not os.path.exists(os.path.join(CUDA_HOME, "include", "cuda_runtime.h")):
        return f"CUDA_HOME={CUDA_HOME} has no include/cuda_runtime.h; set CUDA_HOME to the CUDA toolkit"
    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and not torch.cuda.is_available():
        return 'no GPU is visible to choose the architectures from; set TORCH_CUDA_ARCH_LIST (e.g. "9.0")'
    return None


def target_archs(spec):
    """Sets TORCH_CUDA_ARCH_LIST for an arch-specific kernel (from the visible GPU when unset):
    built for plain sm_90, CUTLASS compiles such a kernel's body to an error printf."""
    import torch

    if not spec["arch_specific"]:
        return
    wanted = os.environ.get("TORCH_CUDA_ARCH_LIST") or "{}.{}".format(*torch.cuda.get_device_capability())
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch_specific_list(wanted)


def read_spec(here):
    with open(os.path.join(here, SPEC_FILE)) as file:
        spec = json.load(file)
    if spec.get("format") != SPEC_FORMAT:
        raise SystemExit(f"{SPEC_FILE} has format {spec.get('format')!r}; this setup.py reads format {SPEC_FORMAT}: "
                         f"export the package again with the registry that wrote it")
    return spec


def extensions(spec, here):
    """The package's extension modules: _C (the op schemas), _C_cpu, _C_cuda
    (built when nvcc is usable; KREG_AOT_CUDA=0 skips it, =1 requires it)."""
    from torch.utils.cpp_extension import CppExtension

    package, sources = spec["package"], spec["sources"]
    include_dirs = [os.path.join(here, d) for d in spec["include_dirs"]]
    cxx_flags = spec["cxx_flags"]
    link_flags = spec["link_flags"] + [lib for lib in [torch_libstdcxx()] if lib]
    modules = [CppExtension(f"{package}._C", sources["def"], include_dirs=include_dirs,
                            extra_compile_args=cxx_flags, extra_link_args=link_flags)]
    if "cpu" in sources:
        modules.append(CppExtension(f"{package}._C_cpu", sources["cpu"], include_dirs=include_dirs,
                                    extra_compile_args=host_cpu_flags() + cxx_flags + spec["cpu_cxx_flags"],
                                    extra_link_args=link_flags))
    wanted = os.environ.get("KREG_AOT_CUDA", "auto")
    if "cuda" in sources and wanted != "0":
        problem = cuda_problem()
        if problem is None:
            from torch.utils.cpp_extension import CUDAExtension

            target_archs(spec)
            modules.append(CUDAExtension(f"{package}._C_cuda", sources["cuda"], include_dirs=include_dirs,
                                         extra_compile_args={"cxx": cxx_flags + spec["cuda_cxx_flags"],
                                                             "nvcc": spec["nvcc_flags"]},
                                         extra_link_args=link_flags))
        elif wanted == "1":
            raise SystemExit(f"KREG_AOT_CUDA=1 but the CUDA kernels cannot be built: {problem}")
        else:
            print(f"{package}: building without the CUDA kernels: {problem}")
    return modules


def main():
    from setuptools import setup
    from torch.utils.cpp_extension import BuildExtension

    here = os.path.dirname(os.path.abspath(__file__))
    spec = read_spec(here)
    # Not `build_ext -j`: BuildExtension's ninja files share one build folder, so
    # modules built in parallel overwrite each other's (each module's own units do
    # compile in parallel).
    setup(
        name=spec["distribution"],
        version="0",
        description=spec["description"],
        packages=[spec["package"]],
        package_data={spec["package"]: spec["package_data"]},
        ext_modules=extensions(spec, here),
        cmdclass={"build_ext": BuildExtension},
        zip_safe=False,
    )


if __name__ == "__main__":  # pip runs setup.py as __main__; the registry imports the functions above
    main()
