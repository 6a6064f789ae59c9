// A kernel's config space: named integer parameters, each with its candidate
// values, and an optional validity rule over them. A config (one value per
// parameter) is handed to every unit of the kernel as preprocessor defines
// (-DNAME=VALUE), so each config is its own build with its own content key
// (the defines are part of the flags the key covers). The manifest's [tune]
// table declares the space (manifest.h documents the syntax); `registry.tune`
// searches it and keeps the winners in the tuned table (tuned_table.h).
//
// The rule is a small integer expression language, evaluated in 64-bit
// signed arithmetic: integer literals, parameter names, + - * / % (C
// semantics: / truncates), comparisons < <= > >= == !=, && || ! (0 is false,
// anything else true), unary -, parentheses. A config is valid when the rule
// evaluates to non-zero. Division by zero and overflow are errors, not
// "invalid": a rule that cannot be evaluated is a bug in the manifest.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kreg {

// What is wrong with a rule: its text, where, and what to do.
class RuleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A parsed rule. Empty (no text) is always true.
class ConfigRule {
 public:
  ConfigRule() = default;
  // Parses `text`; every name must be one of `names`. Throws RuleError.
  static ConfigRule parse(const std::string& text, const std::vector<std::string>& names);
  const std::string& text() const { return text_; }
  bool empty() const { return nodes_.empty(); }
  // Throws RuleError (division by zero, overflow) naming the values it had.
  int64_t evaluate(const std::vector<std::pair<std::string, int64_t>>& config) const;

  struct Node {
    enum Kind { kNumber, kName, kUnary, kBinary } kind;
    std::string op;    // kUnary: "-" or "!"; kBinary: the operator
    int64_t value = 0; // kNumber
    std::string name;  // kName
    int a = -1, b = -1;  // operands (indices into nodes_)
  };

 private:
  std::string text_;
  std::vector<Node> nodes_;  // the root is the last
};

// One parameter of the space.
struct ConfigParam {
  std::string name;             // a C identifier: it becomes a -D define
  std::vector<int64_t> values;  // candidates, in the order written, non-empty, distinct
  int64_t default_value = 0;    // what a plain get builds: `default`, else values[0]
};

// A config: one value per parameter, in the space's order (sorted by name).
using Config = std::vector<std::pair<std::string, int64_t>>;

struct ConfigSpace {
  std::vector<ConfigParam> params;  // sorted by name
  ConfigRule rule;

  bool empty() const { return params.empty(); }
  Config default_config() const;
  // Every config of the cartesian product the rule accepts, the default
  // first, then in odometer order (the last parameter fastest). Throws
  // RuleError when the rule cannot be evaluated for one of them.
  std::vector<Config> enumerate() const;
  // Why `config` is not a member of this space ("" if it is): a missing or
  // unknown parameter, a value not among the candidates, or the rule.
  std::string check(const Config& config) const;
};

// "-DNAME=VALUE" per parameter.
std::vector<std::string> config_defines(const Config& config);
// "NAME=VALUE,NAME=VALUE": a config's name in tables and messages.
std::string config_label(const Config& config);
// The inverse of config_label; throws RuleError on bad text.
Config parse_config_label(const std::string& label);

}  // namespace kreg
