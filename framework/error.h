// Errors and the one family of check macros.
//
// Every failure the user can cause (config, data, checkpoint, command line) throws a typed
// exception derived from ternion::Error; the programs' `main` turns it into one line and a
// non-zero exit. Internal invariants use TN_CHECK, which throws InternalError.
//
//   TN_CHECK(cond, "n_head ", n, " does not divide ", d);        // InternalError
//   TN_CHECK_AS(ConfigError, cond, "model.n_head: ...");            // a chosen type
//   TN_THROW(DataError, "file ", path, ": bad magic ", magic);      // unconditional
//
// Messages are built from any streamable arguments. TN_CHECK adds file:line and the failed
// condition; user-facing errors (TN_THROW / TN_CHECK_AS on a user error type) carry only the
// message, because the user cares about their file, not ours.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ternion {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  // Whether the message is addressed to the user (bad input) rather than a bug report.
  virtual bool is_user_error() const { return true; }
};

#define TN_DEFINE_ERROR(Name)                                        \
  class Name : public Error {                                        \
   public:                                                           \
    explicit Name(const std::string& message) : Error(message) {}    \
  }

TN_DEFINE_ERROR(ConfigError);      // bad YAML, unknown keys, impossible values
TN_DEFINE_ERROR(DataError);        // missing or malformed token files
TN_DEFINE_ERROR(UsageError);       // bad command line
TN_DEFINE_ERROR(CheckpointError);  // missing, corrupt or incompatible checkpoints
TN_DEFINE_ERROR(CommError);        // communicator failures
TN_DEFINE_ERROR(CudaError);        // CUDA, cuBLAS, cuDNN, NCCL failures
TN_DEFINE_ERROR(TrainingError);    // a run that cannot go on (it diverged)
TN_DEFINE_ERROR(MemoryError);      // an allocation the machine cannot satisfy
#undef TN_DEFINE_ERROR

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error(message) {}
  bool is_user_error() const override { return false; }
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace ternion

#define TN_THROW(ErrorType, ...) throw ::ternion::ErrorType(::ternion::detail::concat(__VA_ARGS__))

#define TN_CHECK_AS(ErrorType, cond, ...)          \
  do {                                             \
    if (!(cond)) TN_THROW(ErrorType, __VA_ARGS__); \
  } while (0)

#define TN_CHECK(cond, ...)                                                                 \
  do {                                                                                      \
    if (!(cond))                                                                            \
      TN_THROW(InternalError, __FILE__, ":", __LINE__, ": check failed: " #cond ": ",       \
               ##__VA_ARGS__);                                                              \
  } while (0)
