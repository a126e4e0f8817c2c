#include "data/text_prepare.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <span>
#include <system_error>

#include "data/byte_tokenizer.h"
#include "data/token_shard.h"
#include "framework/error.h"

namespace ternion {

namespace fs = std::filesystem;

namespace {

// The whole file as bytes.
std::string read_text_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) TN_THROW(DataError, "text file '", path, "': cannot open: ", std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string reason = std::strerror(errno);
      ::close(fd);
      TN_THROW(DataError, "text file '", path, "': cannot read: ", reason);
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

void check_val_fraction(double val_fraction) {
  TN_CHECK_AS(UsageError, val_fraction >= 0.0 && val_fraction <= 0.5, "val_fraction ",
              val_fraction, " is outside [0, 0.5]");
}

// `source` names the text in messages: "text file 'x.txt'" or "the text".
PrepareResult split_and_write(std::string_view text, const std::string& source,
                              const std::string& output_dir, double val_fraction) {
  check_val_fraction(val_fraction);
  TN_CHECK_AS(DataError, !text.empty(), source, " is empty: nothing to prepare");
  const auto total = static_cast<std::int64_t>(text.size());
  const auto val_bytes = static_cast<std::int64_t>(static_cast<double>(total) * val_fraction);
  TN_CHECK_AS(DataError, val_fraction == 0.0 || val_bytes > 0, source, " has only ", total,
              " bytes, too few for a validation fraction of ", val_fraction,
              " (the split would get no bytes); use more text or a val_fraction of 0");

  std::error_code error;
  fs::create_directories(output_dir, error);
  if (error) TN_THROW(DataError, "cannot create output directory '", output_dir, "': ",
                      error.message());
  TN_CHECK_AS(DataError, fs::is_directory(output_dir), "output path '", output_dir,
              "' exists and is not a directory");

  const std::vector<std::uint16_t> tokens = encode_bytes(text);
  std::span<const std::uint16_t> all(tokens);
  const std::int64_t train_bytes = total - val_bytes;
  // The two files are a pair: both are written under new names first, and only then replace
  // the old pair, so a failure writing either leaves the old train.bin and val.bin together.
  const fs::path dir(output_dir);
  const std::string train_path = (dir / "train.bin").string();
  const std::string val_path = (dir / "val.bin").string();
  const std::string train_new = train_path + ".new", val_new = val_path + ".new";
  try {
    write_token_file(train_new, all.first(static_cast<std::size_t>(train_bytes)));
    if (val_bytes > 0)
      write_token_file(val_new, all.subspan(static_cast<std::size_t>(train_bytes)));
  } catch (const DataError&) {
    fs::remove(train_new, error);
    fs::remove(val_new, error);
    throw;
  }
  fs::rename(train_new, train_path, error);
  if (error) TN_THROW(DataError, "cannot replace '", train_path, "': ", error.message());
  if (val_bytes > 0) {
    fs::rename(val_new, val_path, error);
    if (error) TN_THROW(DataError, "cannot replace '", val_path, "': ", error.message());
  } else {
    fs::remove(val_path, error);
    if (error) TN_THROW(DataError, "cannot remove stale '", val_path, "': ", error.message());
  }
  return {train_bytes, val_bytes};
}

}  // namespace

PrepareResult prepare_text(std::string_view text, const std::string& output_dir,
                           double val_fraction) {
  return split_and_write(text, "the text", output_dir, val_fraction);
}

PrepareResult prepare_text_file(const std::string& input_path, const std::string& output_dir,
                                double val_fraction) {
  check_val_fraction(val_fraction);  // before reading a possibly large file
  const std::string text = read_text_file(input_path);
  return split_and_write(text, "text file '" + input_path + "'", output_dir, val_fraction);
}

}  // namespace ternion
