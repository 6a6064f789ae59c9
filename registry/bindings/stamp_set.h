// Stamps held on the C++ side: the in-process "nothing changed?" check is one
// call and a few stat()s, with no per-file conversion. Shared by the build
// and plan bindings (a plan hands its stamps over as one StampSet).
#pragma once

#include <vector>

#include "file_stamp.h"

namespace kreg::python {

struct StampSet {
  std::vector<FileStamp> stamps;
};

}  // namespace kreg::python
