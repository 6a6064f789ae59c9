#include "launcher_table.h"

#include <algorithm>
#include <stdexcept>

#include "launcher_header.h"

namespace kreg {

std::unique_ptr<OwnedLauncherTable> make_launcher_table(
    const std::string& kernel, const OpSpec& op, const std::vector<std::pair<std::string, std::string>>& symbols,
    const std::function<void*(const std::string&)>& find) {
  auto owned = std::make_unique<OwnedLauncherTable>();
  LauncherTable& t = owned->table_;
  owned->op_name_ = kernel + "." + op.signature.name;
  for (const std::string& dtype : op.dtypes) {
    owned->dtypes_ += (owned->dtypes_.empty() ? "" : ", ") + dtype;
  }
  t.magic = kTableMagic;
  t.op_name = owned->op_name_.c_str();
  t.dtypes = owned->dtypes_.c_str();

  // The manifest parser refuses more than the fixed arrays hold; checked again
  // here because writing past them would corrupt the table silently.
  const auto& args = op.signature.args;
  if (op.arg_dtypes.size() > static_cast<size_t>(kMaxArgs) || op.outputs.size() > static_cast<size_t>(kMaxOutputs)) {
    throw std::runtime_error("op " + owned->op_name_ + " has more arguments or outputs than a launcher table holds");
  }
  for (const std::string& name : op.same_shape) {
    const auto at = std::find_if(args.begin(), args.end(), [&](const Arg& a) { return a.name == name; });
    if (at != args.end()) t.same_shape_mask |= uint64_t{1} << (at - args.begin());
  }
  std::fill(std::begin(t.arg_dtypes), std::end(t.arg_dtypes), -1);
  std::copy(op.arg_dtypes.begin(), op.arg_dtypes.end(), t.arg_dtypes);
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    const OutputSpec& spec = op.outputs[k];
    if (spec.dims.size() > static_cast<size_t>(kMaxOutputDims)) {
      throw std::runtime_error("op " + owned->op_name_ + ": an output has more shape terms than a launcher table holds");
    }
    TableOutputDecl& decl = t.outputs[k];
    decl.dtype_code = spec.dtype_code;
    decl.dtype_arg = spec.dtype_arg;
    decl.ndims = static_cast<int32_t>(spec.dims.size());
    for (size_t j = 0; j < spec.dims.size(); ++j) {
      const DimTerm& term = spec.dims[j];
      decl.dims[j] = TableDimTerm{static_cast<int32_t>(term.kind), term.arg, term.a, term.b};
    }
  }

  t.arg_count = static_cast<int32_t>(args.size());
  t.return_count = static_cast<int32_t>(op.signature.returns.size());
  t.first_tensor = op.signature.first_tensor();
  owned->arg_names_.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    owned->arg_names_.push_back(a.name);
    if (a.mutated) t.mutated_mask |= uint64_t{1} << i;
    switch (a.type) {
      case ArgType::kTensor: t.arg_kinds[i] = a.optional ? kKindOptionalTensor : kKindTensor; break;
      case ArgType::kFloat: t.arg_kinds[i] = kKindFloat; break;
      case ArgType::kInt: t.arg_kinds[i] = kKindInt; break;
      case ArgType::kBool: t.arg_kinds[i] = kKindBool; break;
      case ArgType::kIntList: t.arg_kinds[i] = kKindIntList; break;
      case ArgType::kScalarType: t.arg_kinds[i] = kKindScalarType; break;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) t.arg_names[i] = owned->arg_names_[i].c_str();
  t.entry = find(entry_symbol(op));
  if (t.entry == nullptr) {
    throw std::runtime_error("kernel " + kernel + ", op " + op.signature.name + ": the kernel library has no " +
                             entry_symbol(op) + " (the registry generates it into every kernel library it builds; "
                             "rebuild with registry.get(..., rebuild=True))");
  }

  std::vector<std::string> exported;
  bool missing = false;
  for (const auto& [dtype, symbol] : symbols) {
    const int code = dtype_code(dtype);
    void* address = code >= 0 && code < kTableDtypeSlots ? find(symbol) : nullptr;
    if (address == nullptr) {
      missing = true;
      continue;
    }
    t.launchers[code] = address;
    exported.push_back(launcher_symbol(op, dtype));
  }
  if (missing) {
    std::string message;
    for (const std::string& line : missing_launchers(kernel, {op}, exported)) {
      message += (message.empty() ? "" : "; ") + line;
    }
    throw std::runtime_error(message);
  }
  return owned;
}

std::unique_ptr<OwnedLauncherTable> routed_launcher_table(const OwnedLauncherTable& base,
                                                          const std::vector<Route>& routes) {
  auto owned = std::make_unique<OwnedLauncherTable>();
  owned->table_ = base.table_;
  owned->op_name_ = base.op_name_;
  owned->dtypes_ = base.dtypes_;
  owned->table_.op_name = owned->op_name_.c_str();
  owned->table_.dtypes = owned->dtypes_.c_str();
  owned->arg_names_ = base.arg_names_;
  for (size_t i = 0; i < owned->arg_names_.size(); ++i) owned->table_.arg_names[i] = owned->arg_names_[i].c_str();
  for (const Route& route : routes) {
    TableRoute r{};
    r.dtype_slot = dtype_code(route.dtype);
    if (r.dtype_slot < 0 || route.launcher == 0) {
      throw std::runtime_error("tuned route of " + base.op_name_ + ": unknown dtype '" + route.dtype + "' or no launcher");
    }
    size_t start = 0;
    while (start <= route.bucket.size()) {
      size_t end = route.bucket.find('x', start);
      if (end == std::string::npos) end = route.bucket.size();
      if (r.ndims == kMaxRouteDims) throw std::runtime_error("tuned route: more than 8 dims in " + route.bucket);
      try {
        r.bucket[r.ndims++] = std::stoll(route.bucket.substr(start, end - start));
      } catch (const std::logic_error&) {
        throw std::runtime_error("tuned route of " + base.op_name_ + ": bad bucket '" + route.bucket + "'");
      }
      start = end + 1;
    }
    r.launcher = reinterpret_cast<void*>(route.launcher);
    owned->routes_.push_back(r);
  }
  owned->table_.route_count = static_cast<int64_t>(owned->routes_.size());
  owned->table_.routes = owned->routes_.empty() ? nullptr : owned->routes_.data();
  return owned;
}

}  // namespace kreg
