// What every fuzz target shares: the rule it checks, and a file to hand path-taking parsers.
//
// The rule (the project's rule for bad input): whatever the bytes, a parser either accepts them
// or throws a user error (ConfigError, DataError, CheckpointError: Error::is_user_error) with
// its message. An internal error, another exception, a crash, a hang or an allocation out of
// proportion to the input is a finding. `accepts_or_refuses` aborts on the first two, so
// libFuzzer (and the corpus replay under ctest) reports them with the input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <typeinfo>

#include "framework/error.h"

namespace ternion::fuzz {

template <class Parse>
void accepts_or_refuses(Parse&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    if (e.is_user_error()) return;
    std::fprintf(stderr, "fuzz finding: internal error on bad input: %s\n", e.what());
    std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz finding: %s escaped the parser: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

// The input written to a file of this process's own (rewritten for every input).
inline std::string input_file(const std::uint8_t* data, std::size_t size, const char* suffix) {
  const std::string path = "/tmp/ternion-fuzz-" + std::to_string(::getpid()) + suffix;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

}  // namespace ternion::fuzz
