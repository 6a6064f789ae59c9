#include "key.h"

#include <algorithm>
#include <stdexcept>

namespace kreg {

namespace {

const char kFormatInput[] = "key.format";

bool by_name(const KeyInput& a, const KeyInput& b) { return a.name < b.name; }

// Inserts or replaces, keeping `inputs` sorted by name with unique names.
void put(std::vector<KeyInput>& inputs, const std::string& name, const std::string& value) {
  auto it = std::lower_bound(inputs.begin(), inputs.end(), KeyInput{name, {}}, by_name);
  if (it != inputs.end() && it->name == name) {
    it->value = value;
  } else {
    inputs.insert(it, KeyInput{name, value});
  }
}

// List values hold NUL between items; a diff line shows them as spaces.
std::string printable(std::string value) {
  std::replace(value.begin(), value.end(), '\0', ' ');
  return value;
}

std::string changed_line(const KeyInput& before, const KeyInput& after) {
  // A file's value is a digest: "changed" says all a reader can use.
  if (before.name.compare(0, 5, "file:") == 0) return before.name + " changed";
  return before.name + ": " + printable(before.value) + " -> " + printable(after.value);
}

}  // namespace

KeyBuilder& KeyBuilder::add(const std::string& name, const std::string& value) {
  put(inputs_, name, value);
  return *this;
}

KeyBuilder& KeyBuilder::add_list(const std::string& name, const std::vector<std::string>& items) {
  std::string joined;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) joined += '\0';
    joined += items[i];
  }
  return add(name, joined);
}

KeyBuilder& KeyBuilder::add_file(const std::string& label, const std::string& path) {
  std::optional<Digest> digest = hash_file(path);
  if (!digest) {
    throw std::runtime_error("cannot read " + path + " (key input file:" + label +
                             "): check that it exists and is readable");
  }
  return add_file_digest(label, *digest);
}

KeyBuilder& KeyBuilder::add_file_digest(const std::string& label, const Digest& digest) {
  return add("file:" + label, digest.hex());
}

Key KeyBuilder::finish() const {
  Key key;
  key.inputs = inputs_;
  // The format is always the registry's own; recording it among the inputs
  // lets a format bump show up in "why did it rebuild?".
  const std::string format = std::to_string(kKeyFormat);
  put(key.inputs, kFormatInput, format);
  FieldHasher hasher;
  hasher.field(kFormatInput, format);
  for (const KeyInput& input : key.inputs) {
    if (input.name != kFormatInput) hasher.field(input.name, input.value);
  }
  key.digest = hasher.digest();
  return key;
}

std::vector<std::string> diff_key_inputs(const std::vector<KeyInput>& before,
                                         const std::vector<KeyInput>& after) {
  // Callers pass Key::inputs (sorted), but a memo read from disk is sorted
  // only by convention, so sort copies before merging.
  std::vector<KeyInput> a = before;
  std::vector<KeyInput> b = after;
  std::stable_sort(a.begin(), a.end(), by_name);
  std::stable_sort(b.begin(), b.end(), by_name);
  std::vector<std::string> lines;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].name < b[j].name)) {
      lines.push_back(a[i++].name + " removed");
    } else if (i == a.size() || b[j].name < a[i].name) {
      lines.push_back(b[j++].name + " added");
    } else {
      if (a[i].value != b[j].value) lines.push_back(changed_line(a[i], b[j]));
      ++i;
      ++j;
    }
  }
  return lines;
}

}  // namespace kreg
