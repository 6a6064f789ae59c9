#include "signature.h"

#include <algorithm>
#include <set>

namespace kreg {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

// Names end up as C++ identifiers in generated code, so a keyword such as
// "float" or "int" as an argument name would make the binding fail to compile
// with an error far from its cause.
// Locals of the generated binding's op function (codegen.cc): an argument of
// the same name would shadow or redeclare them.
bool is_binding_local(const std::string& word) {
  static const std::set<std::string> kLocals = {"out", "table", "slot", "launcher", "stream",
                                                "error", "device_guard", "kreg_table"};
  return kLocals.count(word) > 0 || word.rfind("kreg_", 0) == 0;
}

bool is_cpp_keyword(const std::string& word) {
  static const std::set<std::string> kKeywords = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char16_t", "char32_t", "char8_t", "class", "compl", "concept",
      "const", "const_cast", "consteval", "constexpr", "constinit", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
      "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "restrict"};
  return kKeywords.count(word) > 0;
}

// Recursive-descent over one line of text; every error names the 1-based
// column so the user can find the spot in the manifest.
class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Signature parse() {
    Signature sig;
    skip_space();
    sig.name = identifier("op name");
    skip_space();
    expect('(', "'('");
    skip_space();
    if (peek() != ')') parse_args(&sig);
    expect(')', "')' or ','");
    skip_space();
    expect('-', "'->'");
    expect('>', "'->'");
    skip_space();
    const size_t ret_pos = pos_;
    const std::string ret = word();
    if (ret != "Tensor") fail_at(ret_pos, "expected return type Tensor");
    skip_space();
    if (pos_ != text_.size()) fail_at(pos_, "expected end of signature");
    if (sig.tensor_count() == 0) {
      throw SignatureError("signature \"" + text_ +
                           "\" needs at least one Tensor argument (the output is allocated "
                           "with the shape, dtype and device of the first Tensor)");
    }
    return sig;
  }

 private:
  void parse_args(Signature* sig) {
    std::set<std::string> seen;
    while (true) {
      Arg arg;
      arg.type = type();
      if (!is_space(peek())) fail_at(pos_, "expected a space and an argument name");
      skip_space();
      const size_t name_pos = pos_;
      arg.name = identifier("argument name");
      if (!seen.insert(arg.name).second) {
        fail_at(name_pos, "duplicate argument name \"" + arg.name + "\"");
      }
      sig->args.push_back(arg);
      skip_space();
      if (peek() != ',') return;
      ++pos_;
      skip_space();
    }
  }

  ArgType type() {
    const size_t start = pos_;
    const std::string name = word();
    if (name == "Tensor") return ArgType::kTensor;
    if (name == "float") return ArgType::kFloat;
    if (name == "int") return ArgType::kInt;
    if (name == "bool") return ArgType::kBool;
    if (name.empty()) fail_at(start, "expected an argument type (Tensor, float, int or bool)");
    fail_at(start, "unknown argument type \"" + name + "\"", "expected Tensor, float, int or bool");
  }

  std::string identifier(const char* what) {
    const size_t start = pos_;
    if (!is_ident_start(peek())) fail_at(start, std::string("expected ") + what);
    std::string name = word();
    if (is_cpp_keyword(name)) {
      fail_at(start, std::string(what) + " \"" + name + "\" is a C++ keyword",
              "choose another name");
    }
    if (std::string(what) == "argument name" && is_binding_local(name)) {
      fail_at(start, std::string(what) + " \"" + name + "\" is a name the generated binding uses",
              "choose another name");
    }
    return name;
  }

  // The run of identifier characters at pos_ (possibly empty).
  std::string word() {
    const size_t start = pos_;
    while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  void expect(char c, const char* what) {
    if (peek() != c) fail_at(pos_, std::string("expected ") + what);
    ++pos_;
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  // "<message> at column N in "<text>"[; <hint>]"
  [[noreturn]] void fail_at(size_t pos, const std::string& message,
                            const std::string& hint = "") const {
    std::string where = "at column " + std::to_string(pos + 1);
    if (pos >= text_.size()) where += " (end of text)";
    std::string full = message + " " + where + " in \"" + text_ + "\"";
    if (!hint.empty()) full += "; " + hint;
    throw SignatureError(full);
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

std::string Signature::canonical() const {
  std::string out = name + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ", ";
    out += arg_type_name(args[i].type);
    out += " ";
    out += args[i].name;
  }
  out += ") -> Tensor";
  return out;
}

int Signature::tensor_count() const {
  return static_cast<int>(std::count_if(args.begin(), args.end(),
                                        [](const Arg& a) { return a.type == ArgType::kTensor; }));
}

Signature parse_signature(const std::string& text) { return Parser(text).parse(); }

const char* arg_type_name(ArgType type) {
  switch (type) {
    case ArgType::kTensor:
      return "Tensor";
    case ArgType::kFloat:
      return "float";
    case ArgType::kInt:
      return "int";
    case ArgType::kBool:
      return "bool";
  }
  return "?";
}

}  // namespace kreg
