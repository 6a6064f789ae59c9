#include "stable_binding_text.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace kreg {
namespace {

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(StablePrologue, EveryPieceIsInPlaceOnceAndNoPlaceholderIsLeft) {
  for (const std::string backend : {"cpu", "cuda"}) {
    const std::string text = stable_prologue(backend);
    EXPECT_FALSE(std::regex_search(text, std::regex("@[A-Z_]+@"))) << backend;
    // The outputs' pieces (stable_binding_outputs.h), between the checks' helpers.
    EXPECT_EQ(count(text, "struct OwnedTensor {"), 1u) << backend;
    EXPECT_EQ(count(text, "OwnedTensor allocate("), 1u) << backend;
    EXPECT_LT(text.find("kreg_tensor view_of("), text.find("struct RawOutput {")) << backend;
    EXPECT_LT(text.find("void* check_tensors("), text.find("int64_t contiguous_strides(")) << backend;
    EXPECT_LT(text.find("OwnedTensor allocate("), text.find("void* current_stream(")) << backend;
    // Only the CPU's isolated outputs come from the shared pool.
    EXPECT_EQ(count(text, "table.shared_output_allocate(numel"), backend == "cpu" ? 1u : 0u) << backend;
  }
}

}  // namespace
}  // namespace kreg
