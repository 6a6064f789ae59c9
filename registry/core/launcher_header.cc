#include "launcher_header.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace kreg {
namespace {

std::string param_type(const Arg& arg, const std::string& dtype) {
  switch (arg.type) {
    case ArgType::kTensor: return "kreg_tensor";
    case ArgType::kFloat: return scalar_c_type(dtype);
    case ArgType::kInt: return "int64_t";
    case ArgType::kBool: return "bool";
    case ArgType::kIntList: return "kreg_int_list";
    case ArgType::kScalarType: return "int32_t";
  }
  return "";
}

// "const char *" -> "const char*"; collapse spaces so compilers' spellings compare.
std::string normalize_type(std::string t) {
  std::string out;
  for (char c : t) {
    if (c == '\t' || c == '\n') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ' || out.back() == '*' || out.back() == '&')) continue;
    if ((c == '*' || c == '&') && !out.empty() && out.back() == ' ') out.pop_back();
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  // Spellings of the same type compilers print.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"long int", "int64_t"}, {"long", "int64_t"}, {"_Bool", "bool"}, {"struct kreg_tensor", "kreg_tensor"}}) {
    if (out == from) out = to;
  }
  return out;
}

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A parameter as written, with or without its name: its type.
std::string strip_name(const std::string& param) {
  std::string p = param;
  while (!p.empty() && p.back() == ' ') p.pop_back();
  size_t end = p.size();
  size_t start = end;
  while (start > 0 && is_ident_char(p[start - 1])) --start;
  const std::string last = p.substr(start);
  static const std::set<std::string> kTypeWords = {"float", "double", "int", "bool", "char", "void", "long",
                                                   "short", "unsigned", "signed", "int64_t", "int32_t",
                                                   "kreg_tensor", "kreg_int_list", "_Bool", "size_t"};
  // A trailing identifier after other text that is not itself a type word is a name.
  if (start > 0 && !last.empty() && !kTypeWords.count(last) && p.find_first_not_of(' ') < start) {
    p = p.substr(0, start);
  }
  return normalize_type(p);
}

// Every "<symbol>(...)" in text: its parameter types.
std::vector<std::vector<std::string>> param_lists(const std::string& text, const std::string& symbol) {
  std::vector<std::vector<std::string>> lists;
  for (size_t at = text.find(symbol); at != std::string::npos; at = text.find(symbol, at + 1)) {
    if (at > 0 && is_ident_char(text[at - 1])) continue;
    size_t i = at + symbol.size();
    while (i < text.size() && text[i] == ' ') ++i;
    if (i >= text.size() || text[i] != '(') continue;
    int depth = 0;
    std::vector<std::string> params;
    std::string current;
    size_t j = i;
    for (; j < text.size(); ++j) {
      const char c = text[j];
      if (c == '(') {
        if (depth++ == 0) continue;
      } else if (c == ')') {
        if (--depth == 0) break;
      } else if (c == ',' && depth == 1) {
        params.push_back(strip_name(current));
        current.clear();
        continue;
      }
      current += c;
    }
    if (j >= text.size()) continue;
    if (!current.empty() || !params.empty()) params.push_back(strip_name(current));
    if (params.size() == 1 && (params[0].empty() || params[0] == "void")) params.clear();
    lists.push_back(params);
  }
  return lists;
}

std::string join_params(const std::vector<LauncherParam>& params, bool with_names) {
  std::string out;
  for (const LauncherParam& p : params) {
    out += (out.empty() ? "" : ", ") + p.type + (with_names ? " " + p.name : "");
  }
  return out;
}

bool conflict_reported(const std::string& output, const std::string& symbol) {
  // g++: "conflicting declaration of C function"; clang: "conflicting types for";
  // nvcc's front end: "declaration is incompatible with", or, where a
  // parameter type differs (two overloads to it), "more than one instance of
  // overloaded function "f" has "C" linkage".
  for (const char* phrase : {"conflicting declaration", "conflicting types", "declaration is incompatible",
                             "conflicts with", "redeclared with different",
                             "more than one instance of overloaded function"}) {
    for (size_t at = output.find(phrase); at != std::string::npos; at = output.find(phrase, at + 1)) {
      const size_t line_end = output.find('\n', at);
      const std::string line = output.substr(at, line_end == std::string::npos ? std::string::npos : line_end - at);
      if (line.find(symbol) != std::string::npos) return true;
      // clang names the symbol after the phrase on the same line; nvcc may wrap.
      const size_t next_end = line_end == std::string::npos ? line_end : output.find('\n', line_end + 1);
      if (line_end != std::string::npos &&
          output.substr(line_end, next_end == std::string::npos ? std::string::npos : next_end - line_end).find(symbol) !=
              std::string::npos) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::string scalar_c_type(const std::string& dtype) { return dtype == "float64" ? "double" : "float"; }

std::vector<LauncherParam> launcher_params(const Signature& signature, const std::string& dtype) {
  std::vector<LauncherParam> params;
  for (const Return& r : signature.returns) params.push_back({"kreg_tensor", r.name, "the output " + r.name});
  for (const Arg& a : signature.args) {
    params.push_back({param_type(a, dtype), a.name, a.type_text() + " " + a.name});
  }
  params.push_back({"void*", "stream", "the stream"});
  return params;
}

std::string launcher_symbol(const OpSpec& op, const std::string& dtype) {
  return op.launcher + "_" + dtype_suffix(dtype);
}

std::string generate_launcher_header(const std::string& kernel, const std::vector<OpSpec>& ops) {
  std::ostringstream out;
  out << "// Generated by the kernel registry from the signatures in " << kernel
      << "'s kernel.toml (launcher header v" << kLauncherHeaderVersion
      << ").\n// Force-included into every source of the kernel library: a launcher whose\n"
      << "// parameters disagree with these prototypes does not compile.\n"
      << "#ifndef KREG_LAUNCHERS_" << kernel << "_H_\n#define KREG_LAUNCHERS_" << kernel << "_H_\n"
      << "#include \"kreg/abi.h\"\n";
  for (const OpSpec& op : ops) {
    out << "\n// " << op.signature.canonical() << "\n";
    for (const std::string& dtype : op.dtypes) {
      out << "KREG_API const char* " << launcher_symbol(op, dtype) << "("
          << join_params(launcher_params(op.signature, dtype), true) << ");\n";
    }
  }
  out << generate_launcher_entries(ops);
  out << "\n#endif\n";
  return out.str();
}

std::string entry_symbol(const OpSpec& op) { return "kreg_entry__" + op.signature.name; }

namespace {

// "v[2].tensor", "(float)v[3].f64": parameter `index` of the launcher, read from the values.
std::string value_of(const LauncherParam& param, size_t index, bool is_return, const Arg* arg) {
  const std::string v = "values[" + std::to_string(index) + "]";
  if (is_return) return v + ".tensor";
  switch (arg->type) {
    case ArgType::kTensor: return v + ".tensor";
    case ArgType::kFloat: return param.type == "double" ? v + ".f64" : "(float)" + v + ".f64";
    case ArgType::kInt: return v + ".i64";
    case ArgType::kBool: return v + ".b";
    case ArgType::kIntList: return v + ".list";
    case ArgType::kScalarType: return v + ".dtype";
  }
  return v;
}

std::string entry_call(const OpSpec& op, const std::string& dtype) {
  const std::vector<LauncherParam> params = launcher_params(op.signature, dtype);
  std::string text = "((const char* (*)(" + join_params(params, false) + "))launcher)(";
  const size_t returns = op.signature.returns.size();
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    const Arg* arg = i < returns ? nullptr : &op.signature.args[i - returns];
    text += value_of(params[i], i, i < returns, arg) + ", ";
  }
  return text + "stream)";
}

}  // namespace

std::string generate_launcher_entries(const std::vector<OpSpec>& ops) {
  std::ostringstream out;
  out << "\n// Each op's entry: spreads the shared binding's values into its launchers' typed\n"
      << "// parameters (kreg_entry_fn, kreg/abi.h). Weak: every source includes this header,\n"
      << "// and the link keeps one of the identical copies.\n";
  for (const OpSpec& op : ops) {
    bool has_float = false;
    for (const Arg& a : op.signature.args) has_float = has_float || a.type == ArgType::kFloat;
    out << "KREG_API __attribute__((weak)) const char* " << entry_symbol(op)
        << "(const void* launcher, const kreg_value* values, void* stream, int32_t wide) {\n";
    if (has_float) {
      out << "  if (wide) return " << entry_call(op, "float64") << ";\n";
    } else {
      out << "  (void)wide;\n";
    }
    out << "  return " << entry_call(op, "float32") << ";\n}\n";
  }
  return out.str();
}

std::vector<std::string> required_launchers(const std::vector<OpSpec>& ops) {
  std::vector<std::string> out;
  for (const OpSpec& op : ops) {
    for (const std::string& dtype : op.dtypes) out.push_back(launcher_symbol(op, dtype));
  }
  return out;
}

std::vector<std::string> explain_launcher_mismatch(const std::vector<OpSpec>& ops,
                                                   const std::string& compiler_output,
                                                   const std::vector<std::string>& excerpts) {
  std::vector<std::string> messages;
  for (const OpSpec& op : ops) {
    for (const std::string& dtype : op.dtypes) {
      const std::vector<LauncherParam> expected = launcher_params(op.signature, dtype);
      std::vector<std::string> expected_types;
      for (const LauncherParam& p : expected) expected_types.push_back(normalize_type(p.type));
      const std::string symbol = launcher_symbol(op, dtype);
      if (!conflict_reported(compiler_output, symbol)) continue;
      std::string head = "op " + op.signature.name + ", launcher " + symbol + ": ";
      // The definition's parameter list: the one that is not the prototype's.
      std::vector<std::string> defined;
      bool found = false;
      std::vector<std::string> texts = {compiler_output};
      texts.insert(texts.end(), excerpts.begin(), excerpts.end());
      for (const std::string& text : texts) {
        for (const auto& list : param_lists(text, symbol)) {
          if (list != expected_types) {
            defined = list;
            found = true;
            break;
          }
        }
        if (found) break;
      }
      const std::string want = "the signature " + op.signature.canonical() + " needs (" +
                               join_params(expected, true) + ")";
      if (!found) {
        messages.push_back(head + "its definition does not match the prototype generated from the signature; " + want);
        continue;
      }
      if (defined.size() != expected_types.size()) {
        messages.push_back(head + "it takes " + std::to_string(defined.size()) + " parameters but " + want +
                           " (" + std::to_string(expected_types.size()) +
                           ": each return, each argument, then the stream)");
        continue;
      }
      for (size_t i = 0; i < defined.size(); ++i) {
        if (defined[i] == expected_types[i]) continue;
        const LauncherParam& p = expected[i];
        messages.push_back(head + "parameter " + std::to_string(i + 1) + " (" + p.what + ") must be " + p.type +
                           " but the launcher takes " + defined[i] + "; " + want);
        break;
      }
    }
  }
  return messages;
}

std::vector<std::string> missing_launchers(const std::string& kernel, const std::vector<OpSpec>& ops,
                                           const std::vector<std::string>& exported) {
  std::vector<std::string> messages;
  const std::set<std::string> have(exported.begin(), exported.end());
  for (const OpSpec& op : ops) {
    for (const std::string& dtype : op.dtypes) {
      const std::string symbol = launcher_symbol(op, dtype);
      if (have.count(symbol)) continue;
      messages.push_back("kernel " + kernel + ", op " + op.signature.name + ": no launcher for " + dtype +
                         "; define KREG_API const char* " + symbol + "(" +
                         join_params(launcher_params(op.signature, dtype), true) + ") in the kernel's sources, or remove " +
                         dtype + " from the op's dtypes in kernel.toml");
    }
  }
  return messages;
}

}  // namespace kreg
