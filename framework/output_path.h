// Whether a program may write an output by replacing it: every output goes to a temporary
// name and is renamed into place, and a rename replaces whatever node the name held.
#pragma once

#include <string>
#include <vector>

namespace ternion {

// Why `path` may not be replaced: it exists and is not a regular file (a FIFO, a device node,
// a directory: the rename would put a file in its place), or it is one of `inputs`, the files
// the program reads (the same file under any name). Empty where it may. Creates nothing.
std::string why_not_replaceable(const std::string& path,
                                const std::vector<std::string>& inputs = {});

// Flushes standard output, where a program writes its result (a config, a plan, text): throws
// DataError where any of it could not be written (a full disk, a closed descriptor), so the
// program does not exit 0 having lost it.
void flush_standard_output();

}  // namespace ternion
