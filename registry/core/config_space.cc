#include "config_space.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace kreg {

namespace {

struct Token {
  enum Kind { kNumber, kName, kOp, kEnd } kind;
  std::string text;
  size_t column;  // 1-based
};

const char* const kOps2[] = {"<=", ">=", "==", "!=", "&&", "||"};
const char kOps1[] = "+-*/%<>()!";

std::vector<Token> tokenize(const std::string& text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    const size_t start = i;
    if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
      tokens.push_back({Token::kNumber, text.substr(start, i - start), start + 1});
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
      tokens.push_back({Token::kName, text.substr(start, i - start), start + 1});
    } else {
      std::string op;
      for (const char* two : kOps2) {
        if (text.compare(i, 2, two) == 0) op = two;
      }
      if (op.empty() && std::string(kOps1).find(c) != std::string::npos) op = std::string(1, c);
      if (op.empty()) {
        throw RuleError("unexpected character '" + std::string(1, c) + "' at column " + std::to_string(start + 1) +
                        "; a rule uses integers, parameter names, + - * / %, < <= > >= == !=, && || ! and ()");
      }
      i += op.size();
      tokens.push_back({Token::kOp, op, start + 1});
    }
  }
  tokens.push_back({Token::kEnd, "", text.size() + 1});
  return tokens;
}

// Binding power of each binary operator (higher binds tighter), as in C.
int precedence(const std::string& op) {
  static const std::map<std::string, int> table = {
      {"||", 1}, {"&&", 2}, {"==", 3}, {"!=", 3}, {"<", 4}, {"<=", 4}, {">", 4},
      {">=", 4}, {"+", 5}, {"-", 5}, {"*", 6}, {"/", 6}, {"%", 6}};
  auto it = table.find(op);
  return it == table.end() ? 0 : it->second;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

class RuleParser {
 public:
  RuleParser(const std::string& text, const std::vector<std::string>& names, std::vector<ConfigRule::Node>* nodes)
      : tokens_(tokenize(text)), names_(names), nodes_(nodes) {}

  void parse() {
    expression(1);
    if (peek().kind != Token::kEnd) fail_at(peek(), "unexpected '" + peek().text + "'");
  }

 private:
  const Token& peek() const { return tokens_[at_]; }
  const Token& next() { return tokens_[at_++]; }

  [[noreturn]] void fail_at(const Token& t, const std::string& what) const {
    throw RuleError(what + " at column " + std::to_string(t.column));
  }

  int add(ConfigRule::Node node) {
    nodes_->push_back(std::move(node));
    return static_cast<int>(nodes_->size()) - 1;
  }

  int expression(int min_precedence) {
    int left = unary();
    while (peek().kind == Token::kOp) {
      const int p = precedence(peek().text);
      if (p == 0 || p < min_precedence) break;
      const std::string op = next().text;
      const int right = expression(p + 1);  // left-associative
      ConfigRule::Node node{ConfigRule::Node::kBinary};
      node.op = op;
      node.a = left;
      node.b = right;
      left = add(std::move(node));
    }
    return left;
  }

  int unary() {
    const Token& t = peek();
    if (t.kind == Token::kOp && (t.text == "-" || t.text == "!")) {
      next();
      ConfigRule::Node node{ConfigRule::Node::kUnary};
      node.op = t.text;
      node.a = unary();
      return add(std::move(node));
    }
    return primary();
  }

  int primary() {
    const Token t = next();
    if (t.kind == Token::kNumber) {
      ConfigRule::Node node{ConfigRule::Node::kNumber};
      try {
        node.value = std::stoll(t.text);
      } catch (const std::out_of_range&) {
        fail_at(t, "the number " + t.text + " does not fit in 64 bits");
      }
      return add(std::move(node));
    }
    if (t.kind == Token::kName) {
      if (std::find(names_.begin(), names_.end(), t.text) == names_.end()) {
        fail_at(t, "unknown name '" + t.text + "'; the parameters are " + join_names(names_));
      }
      ConfigRule::Node node{ConfigRule::Node::kName};
      node.name = t.text;
      return add(std::move(node));
    }
    if (t.kind == Token::kOp && t.text == "(") {
      const int inner = expression(1);
      if (peek().kind != Token::kOp || peek().text != ")") fail_at(peek(), "missing ')'");
      next();
      return inner;
    }
    fail_at(t, t.kind == Token::kEnd ? std::string("the rule ends where a value is expected")
                                     : "expected a number, a name or '(', got '" + t.text + "'");
  }

  std::vector<Token> tokens_;
  size_t at_ = 0;
  const std::vector<std::string>& names_;
  std::vector<ConfigRule::Node>* nodes_;
};

}  // namespace

ConfigRule ConfigRule::parse(const std::string& text, const std::vector<std::string>& names) {
  ConfigRule rule;
  rule.text_ = text;
  RuleParser(text, names, &rule.nodes_).parse();
  return rule;
}

int64_t ConfigRule::evaluate(const Config& config) const {
  if (nodes_.empty()) return 1;
  std::vector<int64_t> values(nodes_.size());
  // Operands always come before their node, so one pass in order evaluates the tree.
  // (&& and || evaluate both sides: the rule has no side effects, and errors are
  // reported the same whatever the order.)
  const auto where = [&] { return " (with " + config_label(config) + ")"; };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    int64_t& v = values[i];
    switch (n.kind) {
      case Node::kNumber: v = n.value; break;
      case Node::kName: {
        auto it = std::find_if(config.begin(), config.end(), [&](const auto& p) { return p.first == n.name; });
        if (it == config.end()) throw RuleError("no value for '" + n.name + "'" + where());
        v = it->second;
        break;
      }
      case Node::kUnary: {
        const int64_t a = values[n.a];
        if (n.op == "!") {
          v = a == 0;
        } else if (__builtin_sub_overflow(int64_t(0), a, &v)) {
          throw RuleError("overflow in -" + std::to_string(a) + where());
        }
        break;
      }
      case Node::kBinary: {
        const int64_t a = values[n.a], b = values[n.b];
        const std::string& op = n.op;
        bool overflow = false;
        if (op == "+") overflow = __builtin_add_overflow(a, b, &v);
        else if (op == "-") overflow = __builtin_sub_overflow(a, b, &v);
        else if (op == "*") overflow = __builtin_mul_overflow(a, b, &v);
        else if (op == "/" || op == "%") {
          if (b == 0) throw RuleError("division by zero in '" + op + "'" + where());
          if (a == INT64_MIN && b == -1) overflow = true;
          else v = op == "/" ? a / b : a % b;
        }
        else if (op == "<") v = a < b;
        else if (op == "<=") v = a <= b;
        else if (op == ">") v = a > b;
        else if (op == ">=") v = a >= b;
        else if (op == "==") v = a == b;
        else if (op == "!=") v = a != b;
        else if (op == "&&") v = a != 0 && b != 0;
        else if (op == "||") v = a != 0 || b != 0;
        if (overflow) throw RuleError("overflow in " + std::to_string(a) + " " + op + " " + std::to_string(b) + where());
        break;
      }
    }
  }
  return values.back();
}

Config ConfigSpace::default_config() const {
  Config config;
  for (const ConfigParam& p : params) config.emplace_back(p.name, p.default_value);
  return config;
}

std::vector<Config> ConfigSpace::enumerate() const {
  std::vector<Config> out;
  if (params.empty()) return out;
  const Config first = default_config();
  out.push_back(first);
  std::vector<size_t> at(params.size(), 0);
  while (true) {
    Config config;
    for (size_t i = 0; i < params.size(); ++i) config.emplace_back(params[i].name, params[i].values[at[i]]);
    if (config != first && rule.evaluate(config) != 0) out.push_back(std::move(config));
    size_t i = params.size();
    while (i > 0 && ++at[i - 1] == params[i - 1].values.size()) at[--i] = 0;
    if (i == 0) break;
  }
  return out;
}

std::string ConfigSpace::check(const Config& config) const {
  for (const auto& [name, value] : config) {
    // A named copy: clang before 16 cannot capture a structured binding in a lambda.
    const std::string& wanted = name;
    auto p = std::find_if(params.begin(), params.end(), [&](const ConfigParam& q) { return q.name == wanted; });
    if (p == params.end()) return "unknown parameter '" + name + "'";
    if (std::find(p->values.begin(), p->values.end(), value) == p->values.end()) {
      return name + "=" + std::to_string(value) + " is not one of its values";
    }
  }
  for (const ConfigParam& p : params) {
    if (std::none_of(config.begin(), config.end(), [&](const auto& kv) { return kv.first == p.name; })) {
      return "no value for '" + p.name + "'";
    }
  }
  if (rule.evaluate(config) == 0) return "the rule \"" + rule.text() + "\" rejects " + config_label(config);
  return "";
}

std::vector<std::string> config_defines(const Config& config) {
  std::vector<std::string> out;
  for (const auto& [name, value] : config) out.push_back("-D" + name + "=" + std::to_string(value));
  return out;
}

std::string config_label(const Config& config) {
  std::string out;
  for (const auto& [name, value] : config) out += (out.empty() ? "" : ",") + name + "=" + std::to_string(value);
  return out;
}

Config parse_config_label(const std::string& label) {
  Config config;
  size_t start = 0;
  while (start < label.size()) {
    size_t end = label.find(',', start);
    if (end == std::string::npos) end = label.size();
    const std::string item = label.substr(start, end - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw RuleError("bad config '" + label + "': expected NAME=VALUE,...");
    try {
      size_t used = 0;
      const int64_t value = std::stoll(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument(item);
      config.emplace_back(item.substr(0, eq), value);
    } catch (const std::logic_error&) {
      throw RuleError("bad config '" + label + "': " + item + " is not NAME=integer");
    }
    start = end + 1;
  }
  std::sort(config.begin(), config.end());
  return config;
}

}  // namespace kreg
