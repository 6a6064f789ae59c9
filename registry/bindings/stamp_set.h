// Stamps held on the C++ side: the in-process "nothing changed?" check is one
// call, with no per-file conversion: one read() of the change watch while it
// is quiet, else a stat() per file (core/change_watch.h). Shared by the build
// and plan bindings (a plan hands its stamps over as one StampSet).
#pragma once

#include <vector>

#include "change_watch.h"
#include "file_stamp.h"

namespace kreg::python {

struct StampSet {
  std::vector<FileStamp> stamps;
  WatchState watch;  // reset whenever `stamps` is replaced
};

}  // namespace kreg::python
