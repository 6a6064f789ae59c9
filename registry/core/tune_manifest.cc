#include "tune_manifest.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "identifier.h"

namespace kreg {

namespace {

// The keys of [tune], in the order the format comment in manifest.h lists
// them (error messages show them in this order).
const char* const kTuneKeys[] = {"params", "default", "rule"};

// Upper case: a parameter is a macro, and must not collide with the kernel's
// own identifiers. [A-Z_][A-Z0-9_]*, the upper-case C identifiers.
bool is_parameter_name(const std::string& name) {
  return is_c_identifier(name) &&
         std::none_of(name.begin(), name.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

ConfigParam read_param(const std::string& name, const toml::node& values) {
  const std::string field = dotted("tune.params", name);
  if (!is_parameter_name(name)) {
    fail_field(field, "a parameter is a preprocessor define: use an upper-case C identifier ([A-Z_][A-Z0-9_]*)");
  }
  ConfigParam param;
  param.name = name;
  const toml::array* array = values.as_array();
  if (array == nullptr || array->empty()) fail_wrong_type(field, "a non-empty array of integers", values);
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::value<int64_t>* v = (*array)[i].as_integer();
    if (v == nullptr) fail_wrong_type(indexed(field, i), "an integer", (*array)[i]);
    if (std::find(param.values.begin(), param.values.end(), v->get()) != param.values.end()) {
      fail_field(indexed(field, i), "the value " + std::to_string(v->get()) + " is listed twice");
    }
    param.values.push_back(v->get());
  }
  param.default_value = param.values.front();
  return param;
}

}  // namespace

// [tune]: params = { NAME = [values] }, default = { NAME = value }, rule = "...".
ConfigSpace parse_tune_table(const toml::table& root) {
  ConfigSpace space;
  const toml::node* node = root.get("tune");
  if (node == nullptr) return space;
  const toml::table& tune = read_table(*node, "tune");
  // (The manifest's key aliases, "src" for "sources" and the like, name none of these keys.)
  check_keys(tune, "tune", std::vector<std::string>(std::begin(kTuneKeys), std::end(kTuneKeys)));
  const toml::node* params = tune.get("params");
  if (params == nullptr) fail_field("tune.params", "missing; add params = { NAME = [value, ...] }");
  for (const auto& [key, values] : read_table(*params, "tune.params")) {
    space.params.push_back(read_param(std::string(key.str()), values));
  }
  if (space.params.empty()) fail_field("tune.params", "empty; name at least one parameter, or remove [tune]");
  std::sort(space.params.begin(), space.params.end(),
            [](const ConfigParam& a, const ConfigParam& b) { return a.name < b.name; });
  if (const toml::node* n = tune.get("default")) {
    for (const auto& [key, value] : read_table(*n, "tune.default")) {
      const std::string name(key.str());
      const std::string field = dotted("tune.default", name);
      auto param = std::find_if(space.params.begin(), space.params.end(),
                                [&](const ConfigParam& p) { return p.name == name; });
      if (param == space.params.end()) fail_field(field, "not a parameter of tune.params");
      const toml::value<int64_t>* v = value.as_integer();
      if (v == nullptr) fail_wrong_type(field, "an integer", value);
      if (std::find(param->values.begin(), param->values.end(), v->get()) == param->values.end()) {
        fail_field(field, std::to_string(v->get()) + " is not one of the values tune.params." + name + " lists");
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
      fail_field("tune.rule", "rule \"" + text + "\": " + e.what());
    }
  }
  // The default must be a valid config (a plain get builds it), and every
  // config must be evaluable: a rule that divides by zero is found here, not mid-tuning.
  const Config fallback = space.default_config();
  try {
    if (space.rule.evaluate(fallback) == 0) {
      fail_field("tune.rule", "rule \"" + space.rule.text() + "\" rejects the default config " +
                                  config_label(fallback) + "; change tune.default or the rule");
    }
    space.enumerate();
  } catch (const RuleError& e) {
    fail_field("tune.rule", "rule \"" + space.rule.text() + "\": " + e.what());
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
    fail_field(field, "names parameters of the kernel's [tune] table, and there is none; add [tune] with "
                      "params = { NAME = [value, ...] }, or remove this key");
  }
  std::vector<std::string> names = read_string_list(*node, field);
  for (size_t k = 0; k < names.size(); ++k) {
    if (std::find(all.begin(), all.end(), names[k]) == all.end()) {
      std::string known;
      for (const std::string& name : all) known += (known.empty() ? "" : ", ") + name;
      fail_field(indexed(field, k), in_quotes(names[k]) + " is not a parameter of [tune]; its parameters: " + known);
    }
    if (std::find(names.begin(), names.begin() + k, names[k]) != names.begin() + k) {
      fail_field(indexed(field, k), in_quotes(names[k]) + " is listed twice");
    }
  }
  std::sort(names.begin(), names.end());  // the space's order
  return names;
}

}  // namespace kreg
