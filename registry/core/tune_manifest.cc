#include "tune_manifest.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "closest_name.h"

namespace kreg {

namespace {

// The keys of [tune], in the order the format comment in manifest.h lists
// them (error messages show them in this order).
const char* const kTuneKeys[] = {"params", "default", "rule"};

[[noreturn]] void fail(const std::string& field, const std::string& message) {
  throw TuneTableError(field, message);
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

std::string dotted(const std::string& prefix, const std::string& key) { return prefix + "." + key; }

std::string indexed(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

// ---- typed readers: the manifest parser's, with its messages ---------------

[[noreturn]] void wrong_type(const std::string& field, const char* expected, const toml::node& node) {
  fail(field, std::string("expected ") + expected + ", got " + toml_type_name(node.type()));
}

std::string read_string(const toml::node& node, const std::string& field) {
  const toml::value<std::string>* value = node.as_string();
  if (value == nullptr) wrong_type(field, "a string", node);
  const std::string& s = value->get();
  // As everywhere in the manifest: a NUL is an error, not text cut short later.
  if (s.find('\0') != std::string::npos) fail(field, "contains a NUL character");
  return s;
}

std::vector<std::string> read_string_list(const toml::node& node, const std::string& field) {
  const toml::array* array = node.as_array();
  if (array == nullptr) wrong_type(field, "an array of strings", node);
  std::vector<std::string> out;
  for (size_t i = 0; i < array->size(); ++i) out.push_back(read_string((*array)[i], indexed(field, i)));
  return out;
}

const toml::table& read_table(const toml::node& node, const std::string& field) {
  const toml::table* table = node.as_table();
  if (table == nullptr) wrong_type(field, "a table", node);
  return *table;
}

// Unknown keys are errors, suggested as the manifest's are. (The manifest's
// own aliases, "src" for "sources" and the like, name none of these keys.)
void check_tune_keys(const toml::table& tune) {
  const std::vector<std::string> allowed(std::begin(kTuneKeys), std::end(kTuneKeys));
  for (const auto& [key, node] : tune) {
    const std::string name(key.str());
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    std::string message = "unknown key " + in_quotes(name);
    const std::string suggestion = closest_name(name, allowed);
    if (!suggestion.empty()) {
      message += " (did you mean " + in_quotes(suggestion) + "?)";
    } else {
      std::string expected;
      for (const std::string& k : allowed) expected += (expected.empty() ? "" : ", ") + k;
      message += "; expected one of " + expected;
    }
    fail(dotted("tune", name), message);
  }
}

// Upper case: a parameter is a macro, and must not collide with the kernel's
// own identifiers. [A-Z_][A-Z0-9_]*, the upper-case C identifiers.
bool is_parameter_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

ConfigParam read_param(const std::string& name, const toml::node& values) {
  const std::string field = dotted("tune.params", name);
  if (!is_parameter_name(name)) {
    fail(field, "a parameter is a preprocessor define: use an upper-case C identifier ([A-Z_][A-Z0-9_]*)");
  }
  ConfigParam param;
  param.name = name;
  const toml::array* array = values.as_array();
  if (array == nullptr || array->empty()) wrong_type(field, "a non-empty array of integers", values);
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::value<int64_t>* v = (*array)[i].as_integer();
    if (v == nullptr) wrong_type(indexed(field, i), "an integer", (*array)[i]);
    if (std::find(param.values.begin(), param.values.end(), v->get()) != param.values.end()) {
      fail(indexed(field, i), "the value " + std::to_string(v->get()) + " is listed twice");
    }
    param.values.push_back(v->get());
  }
  param.default_value = param.values.front();
  return param;
}

}  // namespace

TuneTableError::TuneTableError(std::string field, const std::string& message)
    : std::runtime_error(message), field_(std::move(field)) {}

// [tune]: params = { NAME = [values] }, default = { NAME = value }, rule = "...".
ConfigSpace parse_tune_table(const toml::table& root) {
  ConfigSpace space;
  const toml::node* node = root.get("tune");
  if (node == nullptr) return space;
  const toml::table& tune = read_table(*node, "tune");
  check_tune_keys(tune);
  const toml::node* params = tune.get("params");
  if (params == nullptr) fail("tune.params", "missing; add params = { NAME = [value, ...] }");
  for (const auto& [key, values] : read_table(*params, "tune.params")) {
    space.params.push_back(read_param(std::string(key.str()), values));
  }
  if (space.params.empty()) fail("tune.params", "empty; name at least one parameter, or remove [tune]");
  std::sort(space.params.begin(), space.params.end(),
            [](const ConfigParam& a, const ConfigParam& b) { return a.name < b.name; });
  if (const toml::node* n = tune.get("default")) {
    for (const auto& [key, value] : read_table(*n, "tune.default")) {
      const std::string name(key.str());
      const std::string field = dotted("tune.default", name);
      auto param = std::find_if(space.params.begin(), space.params.end(),
                                [&](const ConfigParam& p) { return p.name == name; });
      if (param == space.params.end()) fail(field, "not a parameter of tune.params");
      const toml::value<int64_t>* v = value.as_integer();
      if (v == nullptr) wrong_type(field, "an integer", value);
      if (std::find(param->values.begin(), param->values.end(), v->get()) == param->values.end()) {
        fail(field, std::to_string(v->get()) + " is not one of the values tune.params." + name + " lists");
      }
      param->default_value = v->get();
    }
  }
  std::vector<std::string> names;
  for (const ConfigParam& p : space.params) names.push_back(p.name);
  if (const toml::node* n = tune.get("rule")) {
    const std::string text = read_string(*n, "tune.rule");
    try {
      space.rule = ConfigRule::parse(text, names);
    } catch (const RuleError& e) {
      fail("tune.rule", "rule \"" + text + "\": " + e.what());
    }
  }
  // The default must be a valid config (a plain get builds it), and every
  // config must be evaluable: a rule that divides by zero is found here, not mid-tuning.
  const Config fallback = space.default_config();
  try {
    if (space.rule.evaluate(fallback) == 0) {
      fail("tune.rule", "rule \"" + space.rule.text() + "\" rejects the default config " +
                            config_label(fallback) + "; change tune.default or the rule");
    }
    space.enumerate();
  } catch (const RuleError& e) {
    fail("tune.rule", "rule \"" + space.rule.text() + "\": " + e.what());
  }
  return space;
}

// [[op]] tune = ["NAME", ...]: the [tune] parameters the op's code reads;
// registry.tune varies only those for it. Without the key, all of them.
std::vector<std::string> parse_op_tune(const toml::table& op, const std::string& op_field,
                                       const ConfigSpace& space) {
  std::vector<std::string> all;
  for (const ConfigParam& p : space.params) all.push_back(p.name);
  const toml::node* node = op.get("tune");
  if (node == nullptr) return all;
  const std::string field = dotted(op_field, "tune");
  if (space.empty()) {
    fail(field, "names parameters of the kernel's [tune] table, and there is none; add [tune] with "
                "params = { NAME = [value, ...] }, or remove this key");
  }
  std::vector<std::string> names = read_string_list(*node, field);
  for (size_t k = 0; k < names.size(); ++k) {
    if (std::find(all.begin(), all.end(), names[k]) == all.end()) {
      std::string known;
      for (const std::string& name : all) known += (known.empty() ? "" : ", ") + name;
      fail(indexed(field, k), in_quotes(names[k]) + " is not a parameter of [tune]; its parameters: " + known);
    }
    if (std::find(names.begin(), names.begin() + k, names[k]) != names.begin() + k) {
      fail(indexed(field, k), in_quotes(names[k]) + " is listed twice");
    }
  }
  std::sort(names.begin(), names.end());  // the space's order
  return names;
}

}  // namespace kreg
