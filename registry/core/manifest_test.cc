#include "manifest.h"
#include "header_packages.h"
#include "temp_dir_for_tests.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kreg {
namespace {

namespace fs = std::filesystem;

// A scratch folder under /tmp, removed with everything in it.
using test_support::TempDir;

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

const char kOp[] =
    "[[op]]\n"
    "signature = \"axpy(Tensor x, Tensor y, float alpha) -> Tensor\"\n";
const char kCuda[] = "[cuda]\nsources = [\"axpy.cu\"]\n";

// <tmp>/axpy holds a complete kernel; <tmp>/outside.h and <tmp>/outside.cu
// sit next to it so that escapes have a real target.
class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path();
    dir_ = root_ + "/axpy";
    for (const char* file : {"axpy.cu", "axpy_cpu.cpp", "axpy.h", "include/axpy_math.h",
                             "reference.py", "bind.cpp", "sub/x.h"}) {
      write_file(fs::path(dir_) / file, "// " + std::string(file) + "\n");
    }
    write_file(fs::path(root_) / "outside.h", "// outside\n");
    write_file(fs::path(root_) / "outside.cu", "// outside\n");
    fs::create_symlink(root_ + "/outside.h", dir_ + "/escape.h");
    fs::create_symlink(root_, dir_ + "/escape_dir");
    fs::create_symlink(dir_ + "/axpy.h", dir_ + "/inside_link.h");
    write_file(fs::path(root_) / "Bad-Name" / "axpy.cu", "// bad folder\n");
  }

  Manifest parse(const std::string& text, const std::string& dir = "") const {
    const std::string d = dir.empty() ? dir_ : dir;
    return parse_manifest_text(text, d + "/kernel.toml", d);
  }

  TempDir tmp_;
  std::string root_;
  std::string dir_;
};

TEST_F(ManifestTest, MinimalManifestGetsDefaults) {
  Manifest m = parse(std::string("format = 1\n") + kCuda + kOp);
  EXPECT_EQ(m.name, "axpy");  // from the folder
  EXPECT_EQ(m.dir, dir_);
  EXPECT_EQ(m.file, dir_ + "/kernel.toml");
  EXPECT_EQ(m.binding, "generated");
  EXPECT_TRUE(m.binding_source.empty());
  EXPECT_TRUE(m.description.empty());
  EXPECT_TRUE(m.cflags.empty());
  EXPECT_TRUE(m.reference.empty());
  EXPECT_FALSE(m.cpu.present);
  ASSERT_TRUE(m.cuda.present);
  EXPECT_EQ(m.cuda.sources, std::vector<std::string>{"axpy.cu"});
  ASSERT_EQ(m.ops.size(), 1u);
  const OpSpec& op = m.ops[0];
  EXPECT_EQ(op.signature.canonical(), "axpy(Tensor x, Tensor y, float alpha) -> Tensor");
  EXPECT_EQ(op.dtypes, std::vector<std::string>{"float32"});
  EXPECT_EQ(op.launcher, "axpy");
  EXPECT_EQ(op.same_shape, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(op.reference, "axpy");
}

TEST_F(ManifestTest, FullManifestParses) {
  const std::string text = R"(
format = 1
name = "axpy"
description = "out = alpha * x + y"
binding = "pybind"
binding_source = "bind.cpp"
include_dirs = ["include", "."]
headers = ["axpy.h", "inside_link.h", "./sub/x.h"]
cflags = ["-O3"]
ldflags = ["-lm"]
reference = "reference.py"

[cpu]
sources = ["axpy_cpu.cpp"]
cflags = ["-march=native"]

[cuda]
sources = ["axpy.cu"]
cflags = ["-O3", "-lineinfo"]

[[op]]
signature = "axpy(Tensor x, Tensor y, float alpha) -> Tensor"
dtypes = ["float32", "float16", "bfloat16", "float64"]
launcher = "axpy_launch"
same_shape = ["y"]
reference = "axpy_ref"

[[op]]
signature = "scale(Tensor x, float s, int n, bool flag) -> Tensor"
)";
  Manifest m = parse(text);
  EXPECT_EQ(m.name, "axpy");  // a name key may repeat the folder's name
  EXPECT_EQ(m.description, "out = alpha * x + y");
  EXPECT_EQ(m.binding, "pybind");
  EXPECT_EQ(m.binding_source, "bind.cpp");
  EXPECT_EQ(m.include_dirs, (std::vector<std::string>{"include", "."}));
  EXPECT_EQ(m.headers, (std::vector<std::string>{"axpy.h", "inside_link.h", "./sub/x.h"}));
  EXPECT_EQ(m.cflags, std::vector<std::string>{"-O3"});
  EXPECT_EQ(m.ldflags, std::vector<std::string>{"-lm"});
  EXPECT_EQ(m.reference, "reference.py");
  EXPECT_TRUE(m.cpu.present);
  EXPECT_EQ(m.cpu.sources, std::vector<std::string>{"axpy_cpu.cpp"});
  EXPECT_EQ(m.cpu.cflags, std::vector<std::string>{"-march=native"});
  EXPECT_EQ(m.cuda.cflags, (std::vector<std::string>{"-O3", "-lineinfo"}));
  ASSERT_EQ(m.ops.size(), 2u);
  EXPECT_EQ(m.ops[0].dtypes.size(), 4u);
  EXPECT_EQ(m.ops[0].launcher, "axpy_launch");
  EXPECT_EQ(m.ops[0].same_shape, std::vector<std::string>{"y"});
  EXPECT_EQ(m.ops[0].reference, "axpy_ref");
  EXPECT_EQ(m.ops[1].signature.name, "scale");
  EXPECT_EQ(m.ops[1].same_shape, std::vector<std::string>{"x"});
  EXPECT_EQ(m.ops[1].launcher, "scale");
}

// Any folder holds a kernel: its name is the `name` key, else derived from
// the folder's name; the folder's own name is kept (get() accepts it too).
TEST_F(ManifestTest, NameKeyOrTheFoldersDerivedName) {
  const Manifest keyed = parse(std::string("format = 1\nname = \"my_axpy\"\n") + kCuda + kOp);
  EXPECT_EQ(keyed.name, "my_axpy");
  EXPECT_EQ(keyed.folder, "axpy");
  const Manifest derived = parse(std::string("format = 1\n") + kCuda + kOp, root_ + "/Bad-Name");
  EXPECT_EQ(derived.name, "bad_name");
  EXPECT_EQ(derived.folder, "Bad-Name");
}

TEST_F(ManifestTest, FolderWithoutADerivableNameSaysSetTheNameKey) {
  const std::string dir = root_ + "/" + std::string(70, 'k');
  write_file(fs::path(dir) / "axpy.cu", "// long folder\n");
  try {
    parse(std::string("format = 1\n") + kCuda + kOp, dir);
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.field(), "name");
    EXPECT_NE(std::string(e.what()).find("set name = \"...\" in kernel.toml"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse(std::string("format = 1\nname = \"k\"\n") + kCuda + kOp, dir).name, "k");
}

TEST_F(ManifestTest, NamespaceKeyNamesTorchOpsOfATorchLibraryBinding) {
  const std::string lib = "format = 1\nbinding = \"torch-library\"\n";
  EXPECT_EQ(parse(lib + kCuda + kOp).torch_namespace, "axpy");  // the kernel's name by default
  EXPECT_EQ(parse(lib + "namespace = \"lab\"\n" + kCuda + kOp).torch_namespace, "lab");
  try {
    parse(std::string("format = 1\nnamespace = \"lab\"\n") + kCuda + kOp);
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.field(), "namespace");
    EXPECT_NE(std::string(e.what()).find("binding = \"torch-library\""), std::string::npos) << e.what();
  }
}

TEST_F(ManifestTest, NvrtcCompilerTakesDeviceSources) {
  Manifest m = parse(std::string("format = 1\n") +
                     "[cuda]\nsources = [\"axpy_cpu.cpp\"]\ncompiler = \"nvrtc\"\n"
                     "device_sources = [\"axpy.cu\"]\ndevice_cflags = [\"-lineinfo\"]\n" + kOp);
  EXPECT_EQ(m.cuda.compiler, "nvrtc");
  EXPECT_EQ(m.cuda.device_sources, std::vector<std::string>{"axpy.cu"});
  EXPECT_EQ(m.cuda.device_cflags, std::vector<std::string>{"-lineinfo"});
  EXPECT_EQ(parse(std::string("format = 1\n") + kCuda + kOp).cuda.compiler, "nvcc");
}

// link_sources: device files compiled apart and linked -lto, with NVRTC only, never listed twice.
TEST_F(ManifestTest, LinkSourcesAreNvrtcFilesListedOnce) {
  write_file(fs::path(dir_) / "epilogue.cu", "__device__ float epilogue(float v) { return v; }\n");
  const std::string cuda = "[cuda]\nsources = [\"axpy_cpu.cpp\"]\ndevice_sources = [\"axpy.cu\"]\n";
  Manifest m = parse("format = 1\n" + cuda + "compiler = \"nvrtc\"\nlink_sources = [\"epilogue.cu\"]\n" + kOp);
  EXPECT_EQ(m.cuda.link_sources, std::vector<std::string>{"epilogue.cu"});
  EXPECT_TRUE(parse("format = 1\n" + cuda + "compiler = \"nvrtc\"\n" + kOp).cuda.link_sources.empty());
  for (const char* bad : {"compiler = \"nvcc-cubin\"\nlink_sources = [\"epilogue.cu\"]\n",
                          "compiler = \"nvrtc\"\nlink_sources = [\"missing.cu\"]\n",
                          "compiler = \"nvrtc\"\nlink_sources = [\"axpy.cu\"]\n"}) {
    try {
      parse("format = 1\n" + cuda + bad + kOp);
      FAIL() << "no error for " << bad;
    } catch (const ManifestError& e) {
      EXPECT_EQ(e.field().rfind("cuda.link_sources", 0), 0u) << e.what();  // the list, or its item
    }
  }
}

// kernels_used: with link_sources only, C identifiers, each once.
TEST_F(ManifestTest, KernelsUsedNameTheLinkedKernelsOnce) {
  write_file(fs::path(dir_) / "epilogue.cu", "__device__ float epilogue(float v) { return v; }\n");
  const std::string cuda = "[cuda]\nsources = [\"axpy_cpu.cpp\"]\ndevice_sources = [\"axpy.cu\"]\ncompiler = \"nvrtc\"\n";
  const std::string linked = cuda + "link_sources = [\"epilogue.cu\"]\n";
  Manifest m = parse("format = 1\n" + linked + "kernels_used = [\"gemm_bf16\", \"gemm_f16\"]\n" + kOp);
  EXPECT_EQ(m.cuda.kernels_used, (std::vector<std::string>{"gemm_bf16", "gemm_f16"}));
  EXPECT_TRUE(parse("format = 1\n" + linked + kOp).cuda.kernels_used.empty());
  for (const std::string& bad : {cuda + "kernels_used = [\"gemm_bf16\"]\n",
                                 linked + "kernels_used = []\n",
                                 linked + "kernels_used = [\"gemm<float>\"]\n",
                                 linked + "kernels_used = [\"a\", \"b\", \"a\"]\n",
                                 linked + "kernels_used = \"gemm_bf16\"\n"}) {
    try {
      parse("format = 1\n" + bad + kOp);
      FAIL() << "no error for " << bad;
    } catch (const ManifestError& e) {
      EXPECT_EQ(e.field().rfind("cuda.kernels_used", 0), 0u) << e.what();
    }
  }
}

// prelude: NVRTC's precompiled header, a file of the kernel, with NVRTC only.
TEST_F(ManifestTest, PreludeIsAnNvrtcFileOfTheKernel) {
  write_file(fs::path(dir_) / "axpy_prelude.cuh", "#pragma once\n");
  const std::string cuda = "[cuda]\nsources = [\"axpy_cpu.cpp\"]\ndevice_sources = [\"axpy.cu\"]\n";
  Manifest m = parse("format = 1\n" + cuda + "compiler = \"nvrtc\"\nprelude = \"axpy_prelude.cuh\"\n" + kOp);
  EXPECT_EQ(m.cuda.prelude, "axpy_prelude.cuh");
  EXPECT_EQ(parse("format = 1\n" + cuda + "compiler = \"nvrtc\"\n" + kOp).cuda.prelude, "");
  for (const char* bad : {"compiler = \"nvcc-cubin\"\nprelude = \"axpy_prelude.cuh\"\n",
                          "compiler = \"nvrtc\"\nprelude = \"missing.cuh\"\n"}) {
    try {
      parse("format = 1\n" + cuda + bad + kOp);
      FAIL() << "no error for " << bad;
    } catch (const ManifestError& e) {
      EXPECT_EQ(e.field(), "cuda.prelude") << e.what();
    }
  }
}

// nvcc-cubin: the NVRTC path's shape (device_sources -> a cubin, host
// launchers in sources) with nvcc as the device compiler.
TEST_F(ManifestTest, NvccCubinCompilerTakesDeviceSources) {
  Manifest m = parse(std::string("format = 1\n") +
                     "[cuda]\nsources = [\"axpy_cpu.cpp\"]\ncompiler = \"nvcc-cubin\"\n"
                     "device_sources = [\"axpy.cu\"]\ndevice_cflags = [\"-lineinfo\"]\n" + kOp);
  EXPECT_EQ(m.cuda.compiler, "nvcc-cubin");
  EXPECT_EQ(m.cuda.device_sources, std::vector<std::string>{"axpy.cu"});
  EXPECT_EQ(m.cuda.device_cflags, std::vector<std::string>{"-lineinfo"});
  try {
    parse(std::string("format = 1\n[cuda]\nsources = [\"axpy.cu\"]\ncompiler = \"nvcc-cubin\"\n") + kOp);
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.field(), "cuda.device_sources");
    EXPECT_NE(std::string(e.what()).find("with compiler = \"nvcc-cubin\""), std::string::npos) << e.what();
  }
}

TEST_F(ManifestTest, DeviceCompilerMistakesNameTheField) {
  auto field_of = [&](const std::string& backend) {
    try {
      parse(std::string("format = 1\n") + backend + kOp);
    } catch (const ManifestError& e) {
      return e.field();
    }
    return std::string("no error");
  };
  EXPECT_EQ(field_of("[cuda]\nsources = [\"axpy.cu\"]\ncompiler = \"clang\"\n"), "cuda.compiler");
  EXPECT_EQ(field_of("[cuda]\nsources = [\"axpy.cu\"]\ncompiler = \"nvrtc\"\n"), "cuda.device_sources");
  EXPECT_EQ(field_of("[cuda]\nsources = [\"axpy.cu\"]\ndevice_sources = [\"axpy.cu\"]\n"),
            "cuda.device_sources");
  EXPECT_EQ(field_of("[cpu]\nsources = [\"axpy_cpu.cpp\"]\ncompiler = \"nvrtc\"\n"), "cpu.compiler");
  EXPECT_EQ(field_of("[cuda]\nsources = [\"axpy.cu\"]\ncompiler = \"nvrtc\"\n"
                     "device_sources = [\"../outside.cu\"]\n"),
            "cuda.device_sources[0]");
}

TEST_F(ManifestTest, ParseManifestReadsFileWithAbsolutePaths) {
  write_file(fs::path(dir_) / "kernel.toml", std::string("format = 1\n") + kCuda + kOp);
  Manifest m = parse_manifest(dir_ + "/kernel.toml");
  EXPECT_EQ(m.file, dir_ + "/kernel.toml");
  EXPECT_EQ(m.dir, dir_);
  EXPECT_EQ(m.name, "axpy");
  EXPECT_TRUE(fs::path(m.file).is_absolute());
}

TEST_F(ManifestTest, ParseManifestNamesUnreadableFile) {
  const std::string missing = dir_ + "/nope/kernel.toml";
  try {
    parse_manifest(missing);
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.file(), missing);
    EXPECT_EQ(e.field(), "");
    EXPECT_EQ(std::string(e.what()).rfind(missing + ": ", 0), 0u) << e.what();
  }
  EXPECT_THROW(parse_manifest(dir_), ManifestError);  // a folder is not a manifest
}

TEST_F(ManifestTest, EmptyFileIsMissingFormat) {
  write_file(fs::path(dir_) / "kernel.toml", "");
  try {
    parse_manifest(dir_ + "/kernel.toml");
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.field(), "format");
  }
}

TEST(ManifestErrorTest, WhatNamesFileAndField) {
  EXPECT_STREQ(ManifestError("/k/kernel.toml", "cuda.srcs", "unknown key").what(),
               "/k/kernel.toml: cuda.srcs: unknown key");
  EXPECT_STREQ(ManifestError("/k/kernel.toml", "", "bad").what(), "/k/kernel.toml: bad");
}

TEST_F(ManifestTest, GarbageTomlReportsLineAndColumn) {
  try {
    parse("format = 1\n[cuda\nsources = []\n");
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.field(), "");
    EXPECT_NE(std::string(e.what()).find(" 2:"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(dir_ + "/kernel.toml: ", 0), 0u) << e.what();
  }
}

TEST_F(ManifestTest, UnknownKeySuggestsTheRightOne) {
  try {
    parse("format = 1\n[cuda]\nsrcs = [\"axpy.cu\"]\n" + std::string(kOp));
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.field(), "cuda.srcs");
    EXPECT_NE(std::string(e.what()).find("did you mean \"sources\""), std::string::npos)
        << e.what();
  }
}

TEST_F(ManifestTest, SignatureErrorBecomesManifestError) {
  try {
    parse(std::string("format = 1\n") + kCuda + "[[op]]\nsignature = \"axpy(Tensor x\"\n");
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.field(), "op[0].signature");
    EXPECT_NE(std::string(e.what()).find("expected ')'"), std::string::npos) << e.what();
  }
}

TEST_F(ManifestTest, NonAsciiInStringsAndCommentsIsKept) {
  // U+00E9 and U+00A7 are among the characters toml++ 3.3 mishandles when it
  // tests them for whitespace; inside strings and comments they are fine.
  const std::string text = "format = 1 # r\xC3\xA9sum\xC3\xA9\n"
                           "description = \"caf\xC3\xA9 \xC2\xA7 \xE4\xB8\xAD\"\n" +
                           std::string(kCuda) + kOp;
  EXPECT_EQ(parse(text).description, "caf\xC3\xA9 \xC2\xA7 \xE4\xB8\xAD");
  const std::string multi_line = "format = 1\ndescription = \"\"\"\\\n  x\xC3\xA9\"\"\"\n" +
                                 std::string(kCuda) + kOp;
  EXPECT_EQ(parse(multi_line).description, "x\xC3\xA9");
}

TEST_F(ManifestTest, NonAsciiThatTripsTomlPlusPlusIsAnError) {
  const std::string tail = std::string(kCuda) + kOp;
  const std::vector<std::string> texts = {
      "format = 1\nname = \xC3\xA9\n" + tail,         // outside a string
      "format = 1\n[cuda\xC3\xBA]\n" + tail,          // in a table header
      "format = 1\nx = 1['a\xC3\xBA']\n" + tail,      // where an error path scans ahead
      "format = 1\ndescription = \"\"\"\\\n\xC2\xA7\"\"\"\n" + tail,  // tomlplusplus#190
  };
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    try {
      parse(text);
      ADD_FAILURE() << "accepted";
    } catch (const ManifestError& e) {
      EXPECT_EQ(e.field(), "");
      EXPECT_NE(std::string(e.what()).find("TOML at "), std::string::npos) << e.what();
    }
  }
}

// ---- the corpus of bad manifests --------------------------------------------

struct BadManifest {
  const char* label;
  std::string text;
  std::string field;  // expected ManifestError::field()
  std::string dir;    // folder to parse in; empty means the good "axpy" folder
};

TEST_F(ManifestTest, BadManifestsNameTheField) {
  const std::string head = "format = 1\n";
  const std::string ok = head + kCuda + kOp;
  const std::string op = kOp;
  const std::string cuda = kCuda;
  auto with_sources = [&](const std::string& sources) {
    return head + "[cuda]\nsources = " + sources + "\n" + op;
  };
  auto with_op_line = [&](const std::string& line) { return head + cuda + op + line + "\n"; };
  const std::vector<BadManifest> corpus = {
      {"missing format", cuda + op, "format", ""},
      {"format 2", "format = 2\n" + cuda + op, "format", ""},
      {"format as string", "format = \"1\"\n" + cuda + op, "format", ""},
      {"sources is a string", with_sources("\"axpy.cu\""), "cuda.sources", ""},
      {"cflags is a string", "cflags = \"-O3\"\n" + ok, "cflags", ""},
      {"cflags holds a number", "cflags = [\"-O3\", 3]\n" + ok, "cflags[1]", ""},
      {"description is a number", "description = 3\n" + ok, "description", ""},
      {"unknown top-level key", "srcs = []\n" + ok, "srcs", ""},
      {"unknown key in cuda", head + "[cuda]\nsources = [\"axpy.cu\"]\nflags = []\n" + op,
       "cuda.flags", ""},
      {"unknown key in op", with_op_line("dtype = [\"float32\"]"), "op[0].dtype", ""},
      {"missing sources", head + "[cuda]\ncflags = []\n" + op, "cuda.sources", ""},
      {"empty sources", with_sources("[]"), "cuda.sources", ""},
      {"source does not exist", with_sources("[\"axpy.cu\", \"nope.cu\"]"), "cuda.sources[1]", ""},
      {"path with ..", with_sources("[\"../outside.cu\"]"), "cuda.sources[0]", ""},
      {"path with inner ..", with_sources("[\"sub/../axpy.cu\"]"), "cuda.sources[0]", ""},
      {"absolute path", with_sources("[\"" + dir_ + "/axpy.cu\"]"), "cuda.sources[0]", ""},
      {"empty path", "headers = [\"\"]\n" + ok, "headers[0]", ""},
      {"symlink escaping the folder", "headers = [\"escape.h\"]\n" + ok, "headers[0]", ""},
      {"symlinked folder escaping", "headers = [\"escape_dir/outside.h\"]\n" + ok, "headers[0]",
       ""},
      {"include dir symlink escaping", "include_dirs = [\"escape_dir\"]\n" + ok,
       "include_dirs[0]", ""},
      {"include dir is a file", "include_dirs = [\"axpy.h\"]\n" + ok, "include_dirs[0]", ""},
      {"header is a folder", "headers = [\"include\"]\n" + ok, "headers[0]", ""},
      {"missing reference module", "reference = \"nope.py\"\n" + ok, "reference", ""},
      {"name Bad-Name", "name = \"Bad-Name\"\n" + ok, "name", ""},
      {"name ../x", "name = \"../x\"\n" + ok, "name", ""},
      {"name empty", "name = \"\"\n" + ok, "name", ""},
      {"name starts with digit", "name = \"9lives\"\n" + ok, "name", ""},
      {"name too long", "name = \"" + std::string(65, 'a') + "\"\n" + ok, "name", ""},
      {"namespace not an identifier", "binding = \"torch-library\"\nnamespace = \"a.b\"\n" + ok, "namespace", ""},
      {"no backend", head + op, "", ""},
      {"backend is not a table", head + "cuda = \"axpy.cu\"\n" + op, "cuda", ""},
      {"no op", head + cuda, "op", ""},
      {"op is a table", head + cuda + "[op]\nsignature = \"f(Tensor x) -> Tensor\"\n", "op", ""},
      {"op without signature", head + cuda + "[[op]]\ndtypes = [\"float32\"]\n",
       "op[0].signature", ""},
      {"bad signature", head + cuda + "[[op]]\nsignature = \"axpy(Tensor x) -> float\"\n",
       "op[0].signature", ""},
      {"signature without tensor", head + cuda + "[[op]]\nsignature = \"f(int n) -> Tensor\"\n",
       "op[0].signature", ""},
      {"bad second signature", ok + "[[op]]\nsignature = \"scale(Tensor x\"\n", "op[1].signature",
       ""},
      {"duplicate op name", ok + op, "op[1].signature", ""},
      {"unknown dtype", with_op_line("dtypes = [\"float32\", \"half\"]"), "op[0].dtypes[1]", ""},
      {"duplicate dtype", with_op_line("dtypes = [\"float16\", \"float16\"]"), "op[0].dtypes[1]",
       ""},
      {"empty dtypes", with_op_line("dtypes = []"), "op[0].dtypes", ""},
      {"same_shape names a float", with_op_line("same_shape = [\"x\", \"alpha\"]"),
       "op[0].same_shape[1]", ""},
      {"same_shape names nothing", with_op_line("same_shape = [\"z\"]"), "op[0].same_shape[0]",
       ""},
      {"launcher not an identifier", with_op_line("launcher = \"axpy-v2\""), "op[0].launcher", ""},
      {"pybind without binding_source", "binding = \"pybind\"\n" + ok, "binding_source", ""},
      {"binding_source without pybind", "binding_source = \"bind.cpp\"\n" + ok, "binding_source",
       ""},
      {"unknown binding", "binding = \"cffi\"\n" + ok, "binding", ""},
      {"header_packages is a string", "header_packages = \"nvidia-cutlass\"\n" + ok, "header_packages", ""},
      {"header package not known", "header_packages = [\"nvidia-cutlass\", \"cutlas\"]\n" + ok,
       "header_packages[1]", ""},
      {"header package given as a path",
       "header_packages = [\"cutlass_library/source/include\"]\n" + ok, "header_packages[0]", ""},
      {"header package twice", "header_packages = [\"nvidia-cutlass\", \"nvidia-cutlass\"]\n" + ok,
       "header_packages[1]", ""},
      {"garbage TOML", "format = 1\n[cuda\n]]]\n", "", ""},
      {"duplicate key", "format = 1\nformat = 1\n" + cuda + op, "", ""},
  };
  for (const BadManifest& c : corpus) {
    SCOPED_TRACE(c.label);
    const std::string dir = c.dir.empty() ? dir_ : c.dir;
    try {
      parse(c.text, dir);
      ADD_FAILURE() << "accepted:\n" << c.text;
    } catch (const ManifestError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_EQ(e.file(), dir + "/kernel.toml");
      const std::string prefix = e.file() + ": " + (c.field.empty() ? "" : c.field + ": ");
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
  }
}

TEST_F(ManifestTest, HeaderPackagesNameKnownDistributions) {
  const std::string ok = std::string("format = 1\n") + kCuda + kOp;
  EXPECT_TRUE(parse(ok, dir_).header_packages.empty());
  const Manifest m = parse("header_packages = [\"nvidia-cutlass\"]\n" + ok, dir_);
  EXPECT_EQ(m.header_packages, std::vector<std::string>{"nvidia-cutlass"});
  // Where its headers are comes from the table, not the manifest.
  const KnownHeaderPackage* cutlass = find_header_package("nvidia-cutlass");
  ASSERT_NE(cutlass, nullptr);
  EXPECT_EQ(cutlass->import_folder, "cutlass_library");
  EXPECT_EQ(cutlass->include_dirs,
            (std::vector<std::string>{"source/include", "source/tools/util/include"}));
  EXPECT_EQ(find_header_package("cutlass"), nullptr);
}

TEST_F(ManifestTest, AnUnknownHeaderPackageSaysWhichNamesThereAre) {
  try {
    parse(std::string("format = 1\nheader_packages = [\"nvidia_cutlass\"]\n") + kCuda + kOp, dir_);
    ADD_FAILURE() << "accepted an unknown header package";
  } catch (const ManifestError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("did you mean \"nvidia-cutlass\"?"), std::string::npos) << what;
    EXPECT_NE(what.find("include_dirs"), std::string::npos) << what;  // what to do for other headers
  }
}

TEST_F(ManifestTest, AnUnknownDtypeSaysWhichTableNameToWrite) {
  // Launcher suffixes and torch.<name> of every dtype in the table, and torch's short names.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"i32", "int32"}, {"b8", "bool"}, {"torch.int64", "int64"}, {"f8e5m2", "float8_e5m2"},
      {"half", "float16"}, {"bf16", "bfloat16"}};
  for (const auto& [written, meant] : cases) {
    SCOPED_TRACE(written);
    try {
      parse(std::string("format = 1\n") + kCuda + kOp + "dtypes = [\"" + written + "\"]\n", dir_);
      ADD_FAILURE() << "accepted dtype " << written;
    } catch (const ManifestError& e) {
      EXPECT_NE(std::string(e.what()).find("(write \"" + meant + "\")"), std::string::npos) << e.what();
    }
  }
}

TEST(ManifestKernelNameTest, Validity) {
  for (const char* good : {"a", "_", "axpy", "axpy_v2", "_private", "a0123456789"}) {
    EXPECT_TRUE(is_valid_kernel_name(good)) << good;
  }
  EXPECT_TRUE(is_valid_kernel_name(std::string(64, 'a')));
  for (const char* bad : {"", "Axpy", "Bad-Name", "../x", "9lives", "a b", "a.b", "a/b", "é"}) {
    EXPECT_FALSE(is_valid_kernel_name(bad)) << bad;
  }
  EXPECT_FALSE(is_valid_kernel_name(std::string(65, 'a')));
  EXPECT_FALSE(is_valid_kernel_name(std::string("a\0b", 3)));
}

TEST(ManifestKernelNameTest, DerivedFromAnyFolderName) {
  EXPECT_EQ(kernel_name_from_folder("axpy"), "axpy");
  EXPECT_EQ(kernel_name_from_folder("lab-02-axpy"), "lab_02_axpy");
  EXPECT_EQ(kernel_name_from_folder("Lab 02: AXPY"), "lab_02_axpy");
  EXPECT_EQ(kernel_name_from_folder("02-axpy"), "_02_axpy");
  EXPECT_EQ(kernel_name_from_folder("_private"), "_private");
  EXPECT_EQ(kernel_name_from_folder("caf\xc3\xa9"), "caf_");
  EXPECT_EQ(kernel_name_from_folder(std::string(64, 'a')), std::string(64, 'a'));
  EXPECT_EQ(kernel_name_from_folder(std::string(65, 'a')), "");
}

TEST(ManifestDtypeSuffixTest, KnownAndUnknown) {
  EXPECT_EQ(dtype_suffix("float32"), "f32");
  EXPECT_EQ(dtype_suffix("float16"), "f16");
  EXPECT_EQ(dtype_suffix("bfloat16"), "bf16");
  EXPECT_EQ(dtype_suffix("float64"), "f64");
  EXPECT_EQ(dtype_suffix("half"), "");
  EXPECT_EQ(dtype_suffix(""), "");
}

}  // namespace
}  // namespace kreg

namespace kreg {
namespace {

class ManifestOpsTest : public ManifestTest {
 protected:
  Manifest with_ops(const std::string& ops) const { return parse("format = 1\n" + std::string(kCuda) + ops); }

  void expect_error(const std::string& ops, const std::string& field, const std::string& part) const {
    try {
      with_ops(ops);
      ADD_FAILURE() << "accepted:\n" << ops;
    } catch (const ManifestError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
};

const char kLayernorm[] =
    "[[op]]\n"
    "signature = \"ln(Tensor x, Tensor w, Tensor? b, float eps=1e-05) -> (Tensor y, Tensor mean, Tensor rstd)\"\n"
    "dtypes = [\"float32\", \"bfloat16\"]\n";

TEST_F(ManifestOpsTest, OutputsArgDtypesSweepAndBaseline) {
  const Manifest m = with_ops(std::string(kLayernorm) +
                              "outputs = { y = \"like x\", mean = \"float32[x.shape[:-1]]\", rstd = \"float32[x.shape[:-1]]\" }\n"
                              "arg_dtypes = { w = \"float32\" }\n"
                              "sweep = { x = \"[rows, cols]\", w = \"[cols]\", b = \"[cols]\" }\n"
                              "baseline = \"torch_ln\"\n");
  const OpSpec& op = m.ops[0];
  ASSERT_EQ(op.outputs.size(), 3u);
  EXPECT_EQ(op.outputs[1].text, "float32[x.shape[:-1]]");
  EXPECT_EQ(op.arg_dtypes, (std::vector<int32_t>{-1, 0, -1, -1}));
  ASSERT_EQ(op.sweep.size(), 3u);
  EXPECT_EQ(op.sweep[0].first, "x");  // signature order, not the table's sorted keys
  EXPECT_EQ(op.sweep[0].second, (std::vector<std::string>{"rows", "cols"}));
  EXPECT_EQ(op.baseline, "torch_ln");
}

TEST_F(ManifestOpsTest, ASingleReturnDefaultsToTheFirstTensor) {
  const Manifest m = with_ops(kOp);
  ASSERT_EQ(m.ops[0].outputs.size(), 1u);
  EXPECT_EQ(m.ops[0].outputs[0].text, "like x");
}

TEST_F(ManifestOpsTest, MistakesNameTheFieldAndTheFix) {
  expect_error(kLayernorm, "op[0].outputs", "declare \"y\", e.g. outputs = { y = \"like x\" }");
  expect_error(std::string(kLayernorm) + "outputs = { z = \"like x\" }\n", "op[0].outputs.z",
               "\"z\" is not a return of ln; returns: y, mean, rstd");
  expect_error(std::string(kOp) + "outputs = { out = \"like q\" }\n", "op[0].outputs.out",
               "\"q\" is not a Tensor argument of axpy");
  expect_error(std::string(kOp) + "arg_dtypes = { alpha = \"int64\" }\n", "op[0].arg_dtypes.alpha",
               "\"alpha\" is not a Tensor argument of axpy");
  expect_error(std::string(kOp) + "arg_dtypes = { x = \"int4\" }\n", "op[0].arg_dtypes.x", "unknown dtype \"int4\"");
  expect_error(std::string(kOp) + "dtypes = [\"float32\", \"float16\"]\narg_dtypes = { x = \"int64\", y = \"int64\" }\n",
               "op[0].arg_dtypes", "list exactly one");
  expect_error(std::string(kOp) + "sweep = { x = \"[n]\" }\n", "op[0].sweep", "no shape for Tensor argument \"y\"");
  expect_error(std::string(kOp) + "sweep = { x = \"n\", y = \"[n]\" }\n", "op[0].sweep.x", "is not a shape");
}

TEST_F(ManifestOpsTest, BackwardIsAnotherOpMatchedByNames) {
  const std::string fwd =
      "[[op]]\nsignature = \"norm(Tensor x, Tensor w, float eps=1e-06) -> Tensor y\"\nsame_shape = []\n"
      "backward = \"norm_backward\"\n";
  const Manifest m = with_ops(fwd +
                              "[[op]]\nsignature = \"norm_backward(Tensor grad_y, Tensor x, Tensor w, Tensor y, "
                              "float eps) -> (Tensor grad_x, Tensor grad_w)\"\nsame_shape = []\n"
                              "outputs = { grad_x = \"like x\", grad_w = \"like w\" }\n");
  EXPECT_EQ(m.ops[0].backward, "norm_backward");
  expect_error(fwd, "op[0].backward", "no op \"norm_backward\" in this kernel");
  expect_error(fwd + "[[op]]\nsignature = \"norm_backward(Tensor grad_z, Tensor x) -> Tensor grad_x\"\n",
               "op[0].backward", "\"grad_z\" is neither grad_<an output of norm>");
  expect_error(fwd + "[[op]]\nsignature = \"norm_backward(Tensor grad_y, float x) -> Tensor grad_x\"\n",
               "op[0].backward", "argument \"x\" is float but norm's is Tensor");
  expect_error(fwd + "[[op]]\nsignature = \"norm_backward(Tensor grad_y, Tensor x) -> Tensor dx\"\n",
               "op[0].backward", "name each return grad_<a Tensor argument of norm>");
}

TEST_F(ManifestOpsTest, NewDtypesAreAccepted) {
  const Manifest m = with_ops(std::string(kOp) + "dtypes = [\"int8\", \"int64\", \"bool\", \"float8_e4m3fn\"]\n");
  EXPECT_EQ(m.ops[0].dtypes.size(), 4u);
}

}  // namespace
}  // namespace kreg

// ---- [tune]: the config space ----------------------------------------------

namespace kreg {
namespace {

class ManifestTuneTest : public ManifestTest {
 protected:
  Manifest parse_tune(const std::string& tune) const {
    return parse(std::string("format = 1\ncflags = [\"-O3\"]\n") + kCuda + kOp + "[tune]\n" + tune);
  }
  // The field and message of the error parsing `tune` raises.
  std::pair<std::string, std::string> error_of(const std::string& tune) const {
    try {
      parse_tune(tune);
    } catch (const ManifestError& e) {
      return {e.field(), e.what()};
    }
    return {"(no error)", ""};
  }
};

// How [tune] itself reads is tune_manifest_test.cc's; here, what the manifest does with it.
TEST_F(ManifestTuneTest, TheDefaultConfigIsBuiltByDefault) {
  Manifest m = parse_tune("params = { THREADS = [256, 128, 512], ROWS = [1, 2, 4] }\ndefault = { ROWS = 2 }\n");
  ASSERT_EQ(m.tune.params.size(), 2u);
  EXPECT_EQ(config_label(m.config), "ROWS=2,THREADS=256");
  // The default's defines reach every unit: after the manifest's own flags, and the device compiler's.
  EXPECT_EQ(m.cflags, (std::vector<std::string>{"-O3", "-DROWS=2", "-DTHREADS=256"}));
  EXPECT_EQ(m.cuda.device_cflags, (std::vector<std::string>{"-DROWS=2", "-DTHREADS=256"}));
}

TEST_F(ManifestTuneTest, NoTuneTableLeavesFlagsAlone) {
  Manifest m = parse(std::string("format = 1\ncflags = [\"-O3\"]\n") + kCuda + kOp);
  EXPECT_TRUE(m.tune.empty());
  EXPECT_TRUE(m.config.empty());
  EXPECT_EQ(m.cflags, std::vector<std::string>{"-O3"});
}

TEST_F(ManifestTuneTest, RulePrecedenceAndArithmetic) {
  const std::vector<std::string> names{"A", "B"};
  const Config c{{"A", 7}, {"B", 2}};
  EXPECT_EQ(ConfigRule::parse("A + B * 3", names).evaluate(c), 13);
  EXPECT_EQ(ConfigRule::parse("(A + B) * 3", names).evaluate(c), 27);
  EXPECT_EQ(ConfigRule::parse("A / B", names).evaluate(c), 3);
  EXPECT_EQ(ConfigRule::parse("A % B", names).evaluate(c), 1);
  EXPECT_EQ(ConfigRule::parse("A - B - 1", names).evaluate(c), 4);  // left-associative
  EXPECT_EQ(ConfigRule::parse("-A + 10", names).evaluate(c), 3);
  EXPECT_EQ(ConfigRule::parse("A > B && B >= 2 || A == 0", names).evaluate(c), 1);
  EXPECT_EQ(ConfigRule::parse("!(A != 7)", names).evaluate(c), 1);
  EXPECT_EQ(ConfigRule::parse("A < 7 || B <= 1", names).evaluate(c), 0);
}

TEST_F(ManifestTuneTest, ItsErrorsNameTheFileAndTheField) {
  auto [field, what] = error_of("params = { ROWS = [1, 2], THREADS = [128, 256] }\nrule = \"ROWS > 1\"\n");
  EXPECT_EQ(field, "tune.rule");
  EXPECT_EQ(what, dir_ + "/kernel.toml: tune.rule: rule \"ROWS > 1\" rejects the default config "
                         "ROWS=1,THREADS=128; change tune.default or the rule");
  EXPECT_EQ(error_of("params = { ROWS = [1] }\nrules = \"1\"\n").first, "tune.rules");
}

TEST_F(ManifestTuneTest, WithConfigReplacesTheDefaultsDefines) {
  Manifest m = parse_tune("params = { T = [256, 128], R = [1, 2] }\nrule = \"R * T <= 256\"\n");
  Manifest other = with_config(m, {{"T", 128}, {"R", 2}});
  EXPECT_EQ(other.cflags, (std::vector<std::string>{"-O3", "-DR=2", "-DT=128"}));
  EXPECT_EQ(other.cuda.device_cflags, (std::vector<std::string>{"-DR=2", "-DT=128"}));
  EXPECT_EQ(config_label(other.config), "R=2,T=128");
  EXPECT_EQ(m.cflags, (std::vector<std::string>{"-O3", "-DR=1", "-DT=256"}));  // unchanged
  try {
    with_config(m, {{"T", 256}, {"R", 2}});
    FAIL() << "the rule rejects R=2,T=256";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("the rule \"R * T <= 256\" rejects R=2,T=256"), std::string::npos) << e.what();
  }
  EXPECT_THROW(with_config(m, {{"T", 64}, {"R", 1}}), ManifestError);   // not a candidate
  EXPECT_THROW(with_config(m, {{"T", 256}}), ManifestError);             // R missing
  EXPECT_THROW(with_config(m, {{"T", 256}, {"R", 1}, {"X", 1}}), ManifestError);
}

TEST_F(ManifestTuneTest, AnOpNamesTheParametersItReads) {
  const std::string two_ops =
      std::string("format = 1\n") + kCuda +
      "[[op]]\nsignature = \"fwd(Tensor x) -> Tensor\"\ntune = [\"ROWS\", \"BLOCK\"]\n"
      "[[op]]\nsignature = \"bwd(Tensor x) -> Tensor\"\ntune = []\n"
      "[[op]]\nsignature = \"other(Tensor x) -> Tensor\"\n"
      "[tune]\nparams = { BLOCK = [1, 2], ROWS = [1, 4], UNROLL = [1, 8] }\n";
  Manifest m = parse(two_ops);
  EXPECT_EQ(m.ops[0].tune_params, (std::vector<std::string>{"BLOCK", "ROWS"}));  // the space's order
  EXPECT_TRUE(m.ops[1].tune_params.empty());
  EXPECT_EQ(m.ops[2].tune_params, (std::vector<std::string>{"BLOCK", "ROWS", "UNROLL"}));  // all by default
  EXPECT_EQ(with_config(m, {{"BLOCK", 2}, {"ROWS", 1}, {"UNROLL", 8}}).ops[0].tune_params, m.ops[0].tune_params);
  EXPECT_TRUE(parse(std::string("format = 1\n") + kCuda + kOp).ops[0].tune_params.empty());  // no [tune]
}

TEST_F(ManifestTuneTest, AnOpsTuneErrorsNameTheOp) {
  const std::string text = std::string("format = 1\n") + kCuda + kOp +
                           "[[op]]\nsignature = \"other(Tensor x) -> Tensor\"\ntune = [\"COLS\"]\n"
                           "[tune]\nparams = { ROWS = [1, 2] }\n";
  try {
    parse(text);
    FAIL() << "COLS is not a parameter";
  } catch (const ManifestError& e) {
    EXPECT_EQ(e.field(), "op[1].tune[0]");
    EXPECT_STREQ(e.what(), (dir_ + "/kernel.toml: op[1].tune[0]: \"COLS\" is not a parameter of [tune]; "
                                   "its parameters: ROWS").c_str());
  }
}

TEST(ConfigLabelTest, RoundTrips) {
  const Config c{{"A", -3}, {"B", 40}};
  EXPECT_EQ(parse_config_label(config_label(c)), c);
  EXPECT_THROW(parse_config_label("A=1,B"), RuleError);
  EXPECT_THROW(parse_config_label("A=x"), RuleError);
}

}  // namespace
}  // namespace kreg
