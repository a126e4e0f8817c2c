// The whole of a file, for the readers of configs, checkpoints, tokenizers and model files: a
// directory or an unreadable file is named as such, where a stream would read as empty and
// leave the parser to report "unexpected end of input".
#pragma once

#include <optional>
#include <string>

namespace ternion {

// The bytes of file `path`, or nothing with `why` set ("is a directory", or the system's
// reason it cannot be opened or read). Callers throw their own error, naming what the file is.
std::optional<std::string> read_whole_file(const std::string& path, std::string& why);

}  // namespace ternion
