#include "launcher_table_image.h"

#include <dlfcn.h>

#include <cstring>
#include <stdexcept>

namespace kreg {
namespace {

size_t offset_of(const LauncherTable& table, const void* field) {
  return static_cast<size_t>(static_cast<const char*>(field) - reinterpret_cast<const char*>(&table));
}

}  // namespace

TableImage launcher_table_image(const LauncherTable& table) {
  const std::string op = table.op_name != nullptr ? table.op_name : "?";
  if (table.route_count != 0 || table.routes != nullptr) {
    throw std::runtime_error("op " + op + ": a table with tuned routes has no image; image the default config's");
  }
  if (table.shared_output_allocate != nullptr || table.shared_output_release != nullptr || table.output_padding != 0) {
    throw std::runtime_error("op " + op + ": an isolated op's table has no image");
  }
  TableImage image;
  image.bytes.assign(reinterpret_cast<const char*>(&table), sizeof(LauncherTable));
  auto clear = [&](const void* field) {
    std::memset(&image.bytes[offset_of(table, field)], 0, sizeof(void*));
  };
  auto text = [&](const char* const& field) {
    if (field == nullptr) return;
    image.relocations.push_back({offset_of(table, &field), "string", field});
    clear(&field);
  };
  auto symbol = [&](const void* const& field, const std::string& what) {
    if (field == nullptr) return;
    Dl_info info{};
    if (dladdr(field, &info) == 0 || info.dli_sname == nullptr || info.dli_saddr != field) {
      throw std::runtime_error("op " + op + ": its " + what + " is no exported symbol of a loaded library");
    }
    image.relocations.push_back({offset_of(table, &field), "symbol", info.dli_sname});
    clear(&field);
  };
  text(table.op_name);
  text(table.dtypes);
  for (int i = 0; i < KREG_TABLE_MAX_ARGS; ++i) text(table.arg_names[i]);
  for (int i = 0; i < KREG_TABLE_DTYPE_SLOTS; ++i) symbol(table.launchers[i], "launcher");
  symbol(table.entry, "entry");
  return image;
}

}  // namespace kreg
