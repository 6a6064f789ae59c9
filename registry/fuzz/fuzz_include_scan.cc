// libFuzzer target: kreg::find_include_directives on arbitrary bytes.
//
// It runs on every source and header of a kernel before each build, so it
// must never crash or hang, and what it returns must be well formed: one
// directive per line at most, lines in increasing order and within the
// text, a non-empty name that holds neither a newline nor its closing quote.
// Anything else traps, and the fuzzer reports and minimizes the input.
#include <cstdint>
#include <string>
#include <vector>

#include "include_scan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<kreg::IncludeDirective> found = kreg::find_include_directives(text);
  int lines = 1;
  for (char c : text) lines += c == '\n';
  int previous = 0;
  for (const kreg::IncludeDirective& d : found) {
    if (d.line <= previous || d.line > lines) __builtin_trap();
    previous = d.line;
    if (d.name.empty()) __builtin_trap();
    if (d.name.find('\n') != std::string::npos) __builtin_trap();
    if (d.name.find(d.angled ? '>' : '"') != std::string::npos) __builtin_trap();
  }
  return 0;
}
