#include "op_manifest.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "dtype.h"
#include "identifier.h"
#include "output_spec.h"
#include "signature.h"
#include "table_limits.h"

namespace kreg {

namespace {

using Aliases = std::map<std::string, std::string>;

// An [[op]]'s keys, in the order the format comment in manifest.h lists them
// (error messages show them in this order).
const char* const kOpKeys[] = {"signature", "dtypes",   "launcher", "same_shape", "reference",
                               "outputs",   "arg_dtypes", "backward", "baseline",   "sweep", "tune"};

// Other spellings of the table's dtypes (torch's, launcher suffixes), so the
// error can say what to write instead. Derived from the table where it can be.
const std::map<std::string, std::string>& dtype_aliases() {
  static const std::map<std::string, std::string> kAliases = [] {
    std::map<std::string, std::string> aliases = {
        {"float", "float32"},      {"half", "float16"},        {"double", "float64"},
        {"fp32", "float32"},       {"fp16", "float16"},        {"fp64", "float64"},
        {"torch.half", "float16"}, {"torch.float", "float32"}, {"torch.double", "float64"},
    };
    for (const DtypeInfo& d : dtype_table()) {
      aliases[d.suffix] = d.name;                        // "f32", "i64", ...
      aliases[std::string("torch.") + d.name] = d.name;  // "torch.float32", ...
    }
    return aliases;
  }();
  return kAliases;
}

// name -> text, from an inline table or a sub-table; every value a string.
std::vector<std::pair<std::string, std::string>> read_string_table(const toml::node& node,
                                                                   const std::string& field) {
  const toml::table& table = read_table(node, field);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : table) {
    const std::string name(key.str());
    out.emplace_back(name, read_string(value, dotted(field, name)));
  }
  return out;
}

int tensor_arg_or_fail(const Signature& sig, const std::string& name, const std::string& field) {
  const int arg = sig.find_arg(name);
  if (arg < 0 || !sig.args[arg].is_tensor()) {
    std::string tensors;
    for (const Arg& a : sig.args) {
      if (a.is_tensor()) tensors += (tensors.empty() ? "" : ", ") + a.name;
    }
    fail_field(field, in_quotes(name) + " is not a Tensor argument of " + sig.name + "; Tensor arguments: " + tensors);
  }
  return arg;
}

// Tensors whose dtype is fixed whatever the op is dispatched on (int64
// indices, float32 scales). The others share the dispatch dtype: that of the
// first of them, which picks the launcher.
std::vector<int32_t> parse_arg_dtypes(const toml::table& table, const std::string& prefix,
                                      const OpSpec& op) {
  std::vector<int32_t> codes(op.signature.args.size(), -1);
  const toml::node* node = table.get("arg_dtypes");
  if (node == nullptr) return codes;
  const std::string field = dotted(prefix, "arg_dtypes");
  for (const auto& [name, dtype] : read_string_table(*node, field)) {
    const int arg = tensor_arg_or_fail(op.signature, name, dotted(field, name));
    codes[arg] = dtype_code(dtype);
    if (codes[arg] < 0) {
      fail_field(dotted(field, name), "unknown dtype " + in_quotes(dtype) + "; use one of " + dtype_names());
    }
  }
  bool free_tensor = false;
  for (size_t i = 0; i < codes.size(); ++i) free_tensor |= op.signature.args[i].is_tensor() && codes[i] < 0;
  if (!free_tensor && op.dtypes.size() != 1) {
    fail_field(field, "every Tensor argument has a fixed dtype, so nothing picks among the " +
                          std::to_string(op.dtypes.size()) + " dtypes listed; list exactly one");
  }
  return codes;
}

std::vector<OutputSpec> parse_outputs(const toml::table& table, const std::string& prefix,
                                      const Signature& sig) {
  const std::string field = dotted(prefix, "outputs");
  std::vector<OutputSpec> outputs(sig.returns.size());
  std::vector<bool> declared(sig.returns.size(), false);
  if (const toml::node* node = table.get("outputs")) {
    for (const auto& [name, text] : read_string_table(*node, field)) {
      const int index = sig.find_return(name);
      if (index < 0) {
        std::string names;
        for (const Return& r : sig.returns) names += (names.empty() ? "" : ", ") + r.name;
        fail_field(dotted(field, name), in_quotes(name) + " is not a return of " + sig.name +
                                            (names.empty() ? " (it returns ())" : "; returns: " + names));
      }
      try {
        outputs[index] = parse_output_spec(text, sig, name);
      } catch (const SignatureError& e) {
        fail_field(dotted(field, name), e.what());
      }
      if (outputs[index].dims.size() > static_cast<size_t>(kMaxOutputDims)) {
        fail_field(dotted(field, name), "at most " + std::to_string(kMaxOutputDims) + " shape terms are supported");
      }
      declared[index] = true;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (declared[i]) continue;
    if (sig.returns.size() > 1) {
      fail_field(field, sig.name + " returns " + std::to_string(sig.returns.size()) + " tensors; declare " +
                            in_quotes(sig.returns[i].name) + ", e.g. outputs = { " + sig.returns[i].name +
                            " = \"like " + sig.args[sig.first_tensor()].name + "\" }");
    }
    outputs[i] = default_output_spec(sig);
  }
  return outputs;
}

// sweep = { x = "[rows, cols]", weight = "[cols]" }: each Tensor argument's
// shape in named sizes (registry.sweep maps its element counts onto them).
std::vector<std::pair<std::string, std::vector<std::string>>> parse_sweep(
    const toml::table& table, const std::string& prefix, const Signature& sig) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  const toml::node* node = table.get("sweep");
  if (node == nullptr) return out;
  const std::string field = dotted(prefix, "sweep");
  for (const auto& [name, text] : read_string_table(*node, field)) {
    const std::string where = dotted(field, name);
    tensor_arg_or_fail(sig, name, where);
    std::vector<std::string> dims;
    std::string t = text;
    t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
    if (t.size() < 2 || t.front() != '[' || t.back() != ']') {
      fail_field(where, in_quotes(text) + " is not a shape; write e.g. \"[rows, cols]\"");
    }
    std::stringstream parts(t.substr(1, t.size() - 2));
    for (std::string part; std::getline(parts, part, ',');) {
      const bool number = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
      if (!number && !is_c_identifier(part)) {
        fail_field(where, in_quotes(part) + " is neither a size name nor an integer");
      }
      dims.push_back(part);
    }
    out.emplace_back(name, dims);
  }
  // In signature order (a TOML table's keys come sorted): the first Tensor's sizes lead.
  std::stable_sort(out.begin(), out.end(),
                   [&](const auto& a, const auto& b) { return sig.find_arg(a.first) < sig.find_arg(b.first); });
  for (const Arg& a : sig.args) {
    const bool listed = std::any_of(out.begin(), out.end(), [&](const auto& p) { return p.first == a.name; });
    if (!out.empty() && a.is_tensor() && !a.optional && !listed) {
      fail_field(field, "no shape for Tensor argument " + in_quotes(a.name) +
                            "; give every Tensor that is not optional one");
    }
  }
  return out;
}

std::vector<std::string> parse_dtypes(const toml::table& table, const std::string& prefix) {
  const toml::node* node = table.get("dtypes");
  if (node == nullptr) return {"float32"};
  const std::string field = dotted(prefix, "dtypes");
  std::vector<std::string> dtypes = read_string_list(*node, field);
  if (dtypes.empty()) {
    fail_field(field, "empty; list at least one of " + dtype_names());
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const std::string& dtype = dtypes[i];
    if (dtype_suffix(dtype).empty()) {
      std::string message = "unknown dtype " + in_quotes(dtype);
      auto alias = dtype_aliases().find(dtype);
      if (alias != dtype_aliases().end()) {
        message += " (write " + in_quotes(alias->second) + ")";
      } else {
        message += "; use one of " + dtype_names();
      }
      fail_field(indexed(field, i), message);
    }
    if (!seen.insert(dtype).second) {
      fail_field(indexed(field, i), "duplicate dtype " + in_quotes(dtype));
    }
  }
  return dtypes;
}

std::vector<std::string> parse_same_shape(const toml::table& table, const std::string& prefix,
                                          const Signature& sig) {
  std::vector<std::string> tensors;
  for (const Arg& arg : sig.args) {
    if (arg.type == ArgType::kTensor) tensors.push_back(arg.name);
  }
  const toml::node* node = table.get("same_shape");
  if (node == nullptr) return tensors;
  const std::string field = dotted(prefix, "same_shape");
  std::vector<std::string> names = read_string_list(*node, field);
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::find(tensors.begin(), tensors.end(), names[i]) != tensors.end()) continue;
    std::string tensor_list;
    for (const std::string& t : tensors) tensor_list += (tensor_list.empty() ? "" : ", ") + t;
    fail_field(indexed(field, i), in_quotes(names[i]) + " is not a Tensor argument of " + sig.name +
                                      "; Tensor arguments: " + tensor_list);
  }
  return names;
}

// The string at `key` of an op's table, which must be a C identifier (a
// launcher, a function or another op: `what` says which); none if absent.
std::optional<std::string> read_identifier(const toml::table& table, const std::string& prefix, const char* key,
                                           const char* what) {
  const toml::node* n = table.get(key);
  if (n == nullptr) return std::nullopt;
  const std::string field = dotted(prefix, key);
  std::string name = read_string(*n, field);
  if (!is_c_identifier(name)) fail_field(field, std::string(key) + " " + in_quotes(name) + " is not " + what);
  return name;
}

OpSpec parse_op(const toml::table& table, const std::string& prefix, const Aliases& key_aliases) {
  check_keys(table, prefix, std::vector<std::string>(std::begin(kOpKeys), std::end(kOpKeys)), key_aliases);
  OpSpec op;
  const std::string sig_field = dotted(prefix, "signature");
  const toml::node* sig = table.get("signature");
  if (sig == nullptr) {
    fail_field(sig_field,
               "missing; e.g. signature = \"axpy(Tensor x, Tensor y, float alpha) -> Tensor\"");
  }
  try {
    op.signature = parse_signature(read_string(*sig, sig_field));
  } catch (const SignatureError& e) {
    fail_field(sig_field, e.what());
  }
  if (op.signature.args.size() > static_cast<size_t>(kMaxArgs) ||
      op.signature.returns.size() > static_cast<size_t>(kMaxOutputs)) {
    fail_field(sig_field, "at most " + std::to_string(kMaxArgs) + " arguments and " + std::to_string(kMaxOutputs) +
                              " returns are supported");
  }
  op.dtypes = parse_dtypes(table, prefix);
  op.launcher = read_identifier(table, prefix, "launcher", "a C identifier").value_or(op.signature.name);
  op.same_shape = parse_same_shape(table, prefix, op.signature);
  op.reference = read_identifier(table, prefix, "reference", "a function name").value_or(op.signature.name);
  op.baseline = read_identifier(table, prefix, "baseline", "a function name").value_or("");
  op.backward = read_identifier(table, prefix, "backward", "an op name").value_or("");
  op.arg_dtypes = parse_arg_dtypes(table, prefix, op);
  op.outputs = parse_outputs(table, prefix, op.signature);
  op.sweep = parse_sweep(table, prefix, op.signature);
  return op;
}

// A backward is another op of the kernel, matched by names: its arguments
// are grad_<return> (the gradient of a forward output), or a forward
// argument or return of the same name (saved for it, or passed again); its
// returns are grad_<Tensor argument>.
void check_backward(const std::vector<OpSpec>& ops, const OpSpec& op, const std::string& prefix) {
  if (op.backward.empty()) return;
  const std::string field = dotted(prefix, "backward");
  const OpSpec* bw = nullptr;
  for (const OpSpec& other : ops) {
    if (other.signature.name == op.backward) bw = &other;
  }
  if (bw == nullptr) fail_field(field, "no op " + in_quotes(op.backward) + " in this kernel; add an [[op]] for it");
  if (bw == &op) fail_field(field, "an op cannot be its own backward");
  const Signature& fwd = op.signature;
  for (const Arg& a : bw->signature.args) {
    if (a.name.rfind("grad_", 0) == 0 && fwd.find_return(a.name.substr(5)) >= 0) {
      if (!a.is_tensor()) fail_field(field, op.backward + "'s argument " + in_quotes(a.name) + " must be a Tensor");
      continue;
    }
    const int arg = fwd.find_arg(a.name);
    const int ret = fwd.find_return(a.name);
    if (arg < 0 && ret < 0) {
      fail_field(field, op.backward + "'s argument " + in_quotes(a.name) + " is neither grad_<an output of " +
                            fwd.name + "> nor an argument or output of " + fwd.name);
    }
    if (arg >= 0 && fwd.args[arg].type != a.type) {
      fail_field(field, op.backward + "'s argument " + in_quotes(a.name) + " is " + a.type_text() + " but " +
                            fwd.name + "'s is " + fwd.args[arg].type_text());
    }
    if (ret >= 0 && !a.is_tensor()) {
      fail_field(field, op.backward + "'s argument " + in_quotes(a.name) + " must be a Tensor");
    }
  }
  for (const Return& r : bw->signature.returns) {
    const int arg = r.name.rfind("grad_", 0) == 0 ? fwd.find_arg(r.name.substr(5)) : -1;
    if (arg < 0 || !fwd.args[arg].is_tensor()) {
      fail_field(field, op.backward + " returns " + in_quotes(r.name) +
                            "; name each return grad_<a Tensor argument of " + fwd.name +
                            ">, e.g. -> (Tensor grad_x, Tensor grad_weight)");
    }
  }
}

}  // namespace

std::vector<OpSpec> parse_op_tables(const toml::table& root,
                                    const std::map<std::string, std::string>& key_aliases) {
  std::vector<OpSpec> ops;
  const toml::node* node = root.get("op");
  if (node == nullptr) {
    fail_field("op", "no op; add an [[op]] table with signature = \"name(Tensor x) -> Tensor\"");
  }
  const toml::array* array = node->as_array();
  if (array == nullptr) fail_wrong_type("op", "an array of tables (write [[op]], not [op])", *node);
  if (array->empty()) fail_field("op", "no op; add an [[op]] table");
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string prefix = indexed("op", i);
    ops.push_back(parse_op(read_table((*array)[i], prefix), prefix, key_aliases));
    const std::string& name = ops.back().signature.name;
    auto [it, inserted] = seen.emplace(name, i);
    if (!inserted) {
      fail_field(dotted(prefix, "signature"),
                 "op " + in_quotes(name) + " is already defined by " + indexed("op", it->second));
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) check_backward(ops, ops[i], indexed("op", i));
  return ops;
}

}  // namespace kreg
