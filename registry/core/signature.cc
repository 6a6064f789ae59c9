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
  static const std::set<std::string> kLocals = {"table", "slot", "launcher", "stream",
                                                "error", "device_guard", "kreg_table", "outputs", "first"};
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
    parse_returns(&sig);
    skip_space();
    if (pos_ != text_.size()) fail_at(pos_, "expected end of signature");
    if (sig.first_tensor() < 0) {
      throw SignatureError("signature \"" + text_ +
                           "\" needs at least one Tensor argument that is not optional (the op "
                           "runs on its device)");
    }
    for (const Return& r : sig.returns) {
      if (sig.find_arg(r.name) >= 0) {
        throw SignatureError("signature \"" + text_ + "\": return \"" + r.name +
                             "\" has the name of an argument; rename one of them");
      }
    }
    return sig;
  }

 private:
  void parse_args(Signature* sig) {
    std::set<std::string> seen, aliases;
    bool keyword_only = false, seen_default = false;
    while (true) {
      if (peek() == '*') {
        if (keyword_only) fail_at(pos_, "a second '*'");
        ++pos_;
        keyword_only = true;
        skip_space();
        if (peek() != ',') fail_at(pos_, "expected ',' after '*' (keyword-only arguments follow it)");
        ++pos_;
        skip_space();
        continue;
      }
      Arg arg = type();
      arg.keyword_only = keyword_only;
      if (!is_space(peek())) fail_at(pos_, "expected a space and an argument name");
      skip_space();
      const size_t name_pos = pos_;
      arg.name = identifier("argument name");
      if (!seen.insert(arg.name).second) {
        fail_at(name_pos, "duplicate argument name \"" + arg.name + "\"");
      }
      if (arg.mutated && !aliases.insert(arg.alias).second) {
        fail_at(name_pos, "alias \"" + arg.alias + "\" is used twice",
                "give each mutated Tensor its own alias: Tensor(a!), Tensor(b!)");
      }
      skip_space();
      if (peek() == '=') {
        ++pos_;
        skip_space();
        parse_default(&arg);
        skip_space();
      }
      if (arg.has_default) {
        seen_default = true;
      } else if (seen_default && !keyword_only) {
        fail_at(name_pos, "argument \"" + arg.name + "\" has no default but follows one that has",
                "give it a default, move it before the defaults, or make it keyword-only with '*, '");
      }
      sig->args.push_back(arg);
      if (peek() != ',') return;
      ++pos_;
      skip_space();
    }
  }

  [[noreturn]] void unsupported_type(size_t start, const std::string& what) const {
    fail_at(start, "argument type \"" + what + "\" is not supported",
            std::string("supported: ") + kSupportedArgTypes);
  }

  Arg type() {
    const size_t start = pos_;
    const std::string name = word();
    Arg arg;
    if (name.empty()) {
      fail_at(start, std::string("expected an argument type (") + kSupportedArgTypes + ") or '*'");
    }
    if (name == "Tensor") {
      arg.type = ArgType::kTensor;
      if (peek() == '?') {
        ++pos_;
        arg.optional = true;
      } else if (peek() == '(') {
        ++pos_;
        arg.alias = word();
        if (arg.alias.empty() || peek() != '!' || text_[pos_ + 1] != ')') {
          unsupported_type(start, text_.substr(start, text_.find_first_of(" ,)", pos_ + 1) - start));
        }
        pos_ += 2;
        arg.mutated = true;
      } else if (peek() == '[') {
        unsupported_type(start, "Tensor[]");
      }
    } else if (name == "float" || name == "bool") {
      arg.type = name == "float" ? ArgType::kFloat : ArgType::kBool;
      if (peek() == '?' || peek() == '[') unsupported_type(start, name + peek() + (peek() == '[' ? "]" : ""));
    } else if (name == "int") {
      arg.type = ArgType::kInt;
      if (peek() == '[') {
        ++pos_;
        if (peek() != ']') unsupported_type(start, "int[N]");
        ++pos_;
        arg.type = ArgType::kIntList;
      }
      if (peek() == '?') unsupported_type(start, text_.substr(start, pos_ + 1 - start));
    } else if (name == "ScalarType") {
      if (peek() != '?') unsupported_type(start, "ScalarType (write ScalarType?, None meaning the default)");
      ++pos_;
      arg.type = ArgType::kScalarType;
      arg.optional = true;
    } else {
      unsupported_type(start, name + (peek() == '?' ? "?" : peek() == '[' ? "[]" : ""));
    }
    return arg;
  }

  void parse_default(Arg* arg) {
    const size_t start = pos_;
    auto reject = [&](const std::string& expected) {
      fail_at(start, "bad default for " + arg->type_text() + " " + arg->name, "expected " + expected);
    };
    if (arg->type == ArgType::kTensor && !arg->optional) {
      fail_at(start, "a Tensor argument cannot have a default", "use Tensor? name=None");
    }
    if (arg->optional) {
      if (word() != "None") reject("None");
      arg->default_text = "None";
    } else if (arg->type == ArgType::kBool) {
      const std::string w = word();
      if (w != "True" && w != "False") reject("True or False");
      arg->default_text = w;
    } else if (arg->type == ArgType::kInt) {
      arg->default_text = number(/*integer=*/true);
      if (arg->default_text.empty()) reject("an integer");
    } else if (arg->type == ArgType::kFloat) {
      arg->default_text = number(/*integer=*/false);
      if (arg->default_text.empty()) reject("a number, e.g. 1e-05");
    } else if (arg->type == ArgType::kIntList) {
      if (peek() != '[') reject("a list of integers, e.g. [0, 1]");
      ++pos_;
      std::string text = "[";
      skip_space();
      while (peek() != ']') {
        const std::string n = number(true);
        if (n.empty()) reject("a list of integers, e.g. [0, 1]");
        text += (text.size() > 1 ? ", " : "") + n;
        skip_space();
        if (peek() == ',') {
          ++pos_;
          skip_space();
        } else if (peek() != ']') {
          reject("a list of integers, e.g. [0, 1]");
        }
      }
      ++pos_;
      arg->default_text = text + "]";
    }
    arg->has_default = true;
  }

  // A decimal literal as written (sign, digits, optional fraction and
  // exponent), or "" if there is none at pos_.
  std::string number(bool integer) {
    const size_t start = pos_;
    if (peek() == '-' || peek() == '+') ++pos_;
    const size_t digits = pos_;
    while (isdigit(peek())) ++pos_;
    if (!integer) {
      if (peek() == '.') {
        ++pos_;
        while (isdigit(peek())) ++pos_;
      }
      if (pos_ > digits && (peek() == 'e' || peek() == 'E')) {
        ++pos_;
        if (peek() == '-' || peek() == '+') ++pos_;
        if (!isdigit(peek())) return "";
        while (isdigit(peek())) ++pos_;
      }
    }
    if (pos_ == digits || (pos_ == digits + 1 && text_[digits] == '.')) {
      pos_ = start;
      return "";
    }
    if (is_ident_char(peek()) || peek() == '.') return "";
    return text_.substr(start, pos_ - start);
  }

  static bool isdigit(char c) { return c >= '0' && c <= '9'; }

  void parse_returns(Signature* sig) {
    if (peek() == '(') {
      ++pos_;
      skip_space();
      while (peek() != ')') {
        sig->returns.push_back(one_return(*sig));
        skip_space();
        if (peek() == ',') {
          ++pos_;
          skip_space();
        } else if (peek() != ')') {
          fail_at(pos_, "expected ',' or ')' in the returns");
        }
      }
      ++pos_;
    } else {
      sig->returns.push_back(one_return(*sig));
    }
    const size_t n = sig->returns.size();
    std::set<std::string> names;
    for (size_t i = 0; i < n; ++i) {
      Return& r = sig->returns[i];
      if (!r.named) r.name = unnamed_return(*sig, n == 1 ? "" : std::to_string(i));
      if (!names.insert(r.name).second) {
        throw SignatureError("signature \"" + text_ + "\": two returns are called \"" + r.name + "\"");
      }
    }
  }

  Return one_return(const Signature& sig) {
    const size_t start = pos_;
    const std::string type = word();
    if (type.empty() && peek() != '(') {
      fail_at(start, "expected a return type", std::string("supported returns: ") + kSupportedReturns);
    }
    if (type != "Tensor" || peek() == '?' || peek() == '[' || peek() == '(') {
      std::string what = type.empty() ? std::string(1, peek()) : type;
      if (peek() == '(') what += "(...)";
      if (peek() == '[') what += "[]";
      if (peek() == '?') what += "?";
      fail_at(start, "return type \"" + what + "\" is not supported",
              std::string("supported returns: ") + kSupportedReturns +
                  "; an op that writes a Tensor(a!) argument returns ()");
    }
    Return r;
    if (is_space(peek())) {
      skip_space();
      if (is_ident_start(peek())) {
        const size_t name_pos = pos_;
        r.name = identifier("return name");
        r.named = true;
        if (sig.find_arg(r.name) >= 0) fail_at(name_pos, "return \"" + r.name + "\" has the name of an argument");
      }
    }
    return r;
  }

  // An unnamed return is "out" ("out0", "out1" of several). Where an argument
  // has that name (torch's out= convention, `Tensor(a!) out`), "result":
  // returns and arguments are parameters of one launcher.
  static std::string unnamed_return(const Signature& sig, const std::string& index) {
    if (sig.find_arg("out" + index) < 0) return "out" + index;
    std::string stem = "result";
    while (sig.find_arg(stem + index) >= 0) stem += "_";
    return stem + index;
  }

  std::string identifier(const char* what) {
    const size_t start = pos_;
    if (!is_ident_start(peek())) fail_at(start, std::string("expected ") + what);
    std::string name = word();
    if (name == "Tensor" || name == "ScalarType") {
      fail_at(start, std::string(what) + " \"" + name + "\" is a type name", "choose another name");
    }
    if (is_cpp_keyword(name)) {
      fail_at(start, std::string(what) + " \"" + name + "\" is a C++ keyword",
              "choose another name");
    }
    // Return names only name launcher parameters (the binding's locals carry a prefix).
    const bool clashes = std::string(what) == "return name"
                             ? (name == "stream" || name.rfind("kreg_", 0) == 0)
                             : std::string(what) == "argument name" && is_binding_local(name);
    if (clashes) {
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

std::string Arg::type_text() const {
  std::string text = arg_type_name(type);
  if (mutated) text += "(" + alias + "!)";
  if (optional) text += "?";
  return text;
}

std::string Signature::canonical() const {
  std::string out = name + "(";
  bool star = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ", ";
    if (args[i].keyword_only && !star) {
      out += "*, ";
      star = true;
    }
    out += args[i].type_text() + " " + args[i].name;
    if (args[i].has_default) out += "=" + args[i].default_text;
  }
  out += ") -> ";
  const bool tuple = returns.size() != 1;
  if (tuple) out += "(";
  for (size_t i = 0; i < returns.size(); ++i) {
    if (i > 0) out += ", ";
    out += "Tensor";
    if (returns[i].named) out += " " + returns[i].name;
  }
  if (tuple) out += ")";
  return out;
}

int Signature::tensor_count() const {
  return static_cast<int>(std::count_if(args.begin(), args.end(),
                                        [](const Arg& a) { return a.type == ArgType::kTensor; }));
}

int Signature::first_tensor() const {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_tensor() && !args[i].optional) return static_cast<int>(i);
  }
  return -1;
}

int Signature::find_arg(const std::string& arg_name) const {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name == arg_name) return static_cast<int>(i);
  }
  return -1;
}

int Signature::find_return(const std::string& return_name) const {
  for (size_t i = 0; i < returns.size(); ++i) {
    if (returns[i].name == return_name) return static_cast<int>(i);
  }
  return -1;
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
    case ArgType::kIntList:
      return "int[]";
    case ArgType::kScalarType:
      return "ScalarType";
  }
  return "?";
}

}  // namespace kreg
