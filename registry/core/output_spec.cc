#include "output_spec.h"

#include "dtype.h"

namespace kreg {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class SpecParser {
 public:
  SpecParser(const std::string& text, const Signature& sig, const std::string& output)
      : text_(text), sig_(sig), output_(output) {}

  OutputSpec parse() {
    OutputSpec spec;
    skip();
    const std::string first = word();
    skip();
    if (first == "like") {
      const int arg = tensor_arg(word());
      spec.dtype_arg = arg;
      spec.dims.push_back(DimTerm{DimTerm::kSlice, arg, 0, kSliceEnd});
      spec.text = "like " + sig_.args[arg].name;
      end();
      return spec;
    }
    if (peek() == '.') {  // NAME.dtype
      ++pos_;
      if (word() != "dtype") fail("expected NAME.dtype or a dtype name before '['");
      spec.dtype_arg = tensor_arg(first);
      spec.text = first + ".dtype[";
    } else {
      spec.dtype_code = dtype_code(first);
      if (spec.dtype_code < 0) {
        fail("\"" + first + "\" is neither a dtype (" + dtype_names() + ") nor NAME.dtype");
      }
      spec.text = first + "[";
    }
    skip();
    expect('[');
    skip();
    std::string dims_text;
    while (peek() != ']') {
      dims_text += (dims_text.empty() ? "" : ", ") + dim(&spec);
      skip();
      if (peek() == ',') {
        ++pos_;
        skip();
      } else if (peek() != ']') {
        fail("expected ',' or ']'");
      }
    }
    ++pos_;
    spec.text += dims_text + "]";
    end();
    return spec;
  }

 private:
  std::string dim(OutputSpec* spec) {
    if (is_digit(peek())) {
      const int64_t value = integer();
      spec->dims.push_back(DimTerm{DimTerm::kConst, -1, value, 0});
      return std::to_string(value);
    }
    const std::string name = word();
    const int arg = tensor_arg(name);
    expect('.');
    const std::string member = word();
    if (member == "size") {
      expect('(');
      const int64_t d = integer();
      expect(')');
      spec->dims.push_back(DimTerm{DimTerm::kSize, arg, d, 0});
      return name + ".size(" + std::to_string(d) + ")";
    }
    if (member != "shape") fail("expected " + name + ".shape, " + name + ".shape[a:b] or " + name + ".size(i)");
    if (peek() != '[') {
      spec->dims.push_back(DimTerm{DimTerm::kSlice, arg, 0, kSliceEnd});
      return name + ".shape";
    }
    ++pos_;
    DimTerm term{DimTerm::kSlice, arg, 0, kSliceEnd};
    std::string text = name + ".shape[";
    if (peek() != ':') {
      term.a = integer();
      text += std::to_string(term.a);
    }
    if (peek() != ':') fail("expected a slice such as [:-1] or [1:] (use .size(i) for one dim)");
    ++pos_;
    text += ":";
    if (peek() != ']') {
      term.b = integer();
      text += std::to_string(term.b);
    }
    expect(']');
    spec->dims.push_back(term);
    return text + "]";
  }

  int tensor_arg(const std::string& name) {
    const int arg = sig_.find_arg(name);
    if (name.empty()) fail("expected the name of a Tensor argument");
    if (arg < 0 || !sig_.args[arg].is_tensor()) fail("\"" + name + "\" is not a Tensor argument of " + sig_.name);
    if (sig_.args[arg].optional) fail("\"" + name + "\" is optional (it may be None); refer to a Tensor that is always given");
    return arg;
  }

  int64_t integer() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (!is_digit(peek())) fail("expected an integer");
    while (is_digit(peek())) ++pos_;
    return std::stoll(text_.substr(start, pos_ - start));
  }

  std::string word() {
    const size_t start = pos_;
    if (is_ident_start(peek())) {
      while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void end() {
    skip();
    if (pos_ != text_.size()) fail("unexpected text after the declaration");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw SignatureError("output \"" + output_ + "\" = \"" + text_ + "\": " + message + " at column " +
                         std::to_string(pos_ + 1) +
                         "; write e.g. \"like x\", \"float32[x.shape[:-1]]\" or "
                         "\"x.dtype[x.size(0), w.size(0)]\"");
  }

  const std::string& text_;
  const Signature& sig_;
  const std::string& output_;
  size_t pos_ = 0;
};

std::string python_dims(const Signature& sig, const OutputSpec& spec) {
  std::string out;
  for (const DimTerm& t : spec.dims) {
    if (!out.empty()) out += ", ";
    const std::string name = t.arg >= 0 ? sig.args[t.arg].name : "";
    if (t.kind == DimTerm::kConst) {
      out += std::to_string(t.a);
    } else if (t.kind == DimTerm::kSize) {
      out += name + ".shape[" + std::to_string(t.a) + "]";
    } else {
      out += "*" + name + ".shape[" + (t.a ? std::to_string(t.a) : "") + ":" +
             (t.b == kSliceEnd ? "" : std::to_string(t.b)) + "]";
    }
  }
  return "(" + out + (spec.dims.size() == 1 ? ",)" : ")");
}

}  // namespace

OutputSpec parse_output_spec(const std::string& text, const Signature& signature,
                             const std::string& output_name) {
  return SpecParser(text, signature, output_name).parse();
}

OutputSpec default_output_spec(const Signature& signature) {
  const int first = signature.first_tensor();
  return parse_output_spec("like " + signature.args.at(first).name, signature, signature.returns.empty() ? "out" : signature.returns[0].name);
}

std::string fake_function(const Signature& signature, const std::vector<OutputSpec>& outputs,
                          const std::string& fn_name, const std::string& label) {
  // The parameters as the schema has them (defaults, a bare * before the
  // keyword-only ones): torch calls a fake with the arguments its caller
  // wrote, leaving defaulted ones out and passing keyword-only ones by name.
  // Defaults are canonical (signature.h), and each is a Python literal.
  std::string params;
  bool star_written = false;
  for (const Arg& a : signature.args) {
    if (!params.empty()) params += ", ";
    if (a.keyword_only && !star_written) {
      params += "*, ";
      star_written = true;
    }
    params += a.name;
    if (a.has_default) params += "=" + a.default_text;
  }
  const std::string device = signature.args.at(signature.first_tensor()).name + ".device";
  std::string body;
  for (const OutputSpec& spec : outputs) {
    const std::string dtype = spec.dtype_code >= 0
                                  ? std::string("torch.") + dtype_table()[spec.dtype_code].name
                                  : signature.args[spec.dtype_arg].name + ".dtype";
    body += (body.empty() ? "" : ", ") + std::string("torch.empty(") + python_dims(signature, spec) +
            ", dtype=" + dtype + ", device=" + device + ")";
  }
  if (outputs.empty()) body = "None";
  else if (outputs.size() > 1) body = "(" + body + ")";
  // The fake is also the Meta kernel, and the dispatcher prefers Meta over CPU
  // and CUDA: a meta tensor among real ones lands here, not in the binding's
  // device checks, so the fake must raise as the kernel would (all-meta
  // inputs, and fake tensors under torch.compile, share one device and pass).
  const Arg& first = signature.args.at(signature.first_tensor());
  std::string others;
  for (const Arg& a : signature.args) {
    if (a.type != ArgType::kTensor || &a == &first) continue;
    others += "(\"" + a.name + "\", " + a.name + "), ";
  }
  std::string check;
  if (!others.empty()) {
    check = "    for _name, _tensor in (" + others + "):\n"
            "        if _tensor is not None and _tensor.device != " + first.name + ".device:\n"
            "            raise RuntimeError(f\"" + (label.empty() ? signature.name : label) + ": argument '{_name}' is on {_tensor.device} but '" +
            first.name + "' is on {" + first.name + ".device}; put all tensors on one device "
            "(meta tensors only with meta tensors)\")\n";
  }
  return "def " + fn_name + "(" + params + "):\n" + check + "    return " + body + "\n";
}

}  // namespace kreg
