// Text preparation: raw text -> byte tokens -> output_dir/train.bin and output_dir/val.bin.
//
// The text is byte-tokenized (data/byte_tokenizer.h). The LAST floor(bytes * val_fraction)
// bytes become val.bin and the rest train.bin, both in llm.c's uint16 token-file layout
// (version 1, data/token_shard.h), which every llm.c reader takes. Splitting at the end rather
// than sampling keeps validation text unseen in training: no window of val.bin overlaps
// train.bin.
//
//   val_fraction in [0, 0.5], else UsageError.
//   val_fraction == 0: no val.bin is written (a stale one from an earlier run is removed, so
//     the directory never pairs train.bin with validation data from another text), and
//     val_tokens is 0.
//   val_fraction > 0 on text too short to give even one validation byte: DataError.
//   output_dir is created, parents included; DataError if it cannot be.
//   Empty text, or an input file that is missing, unreadable or empty: DataError naming it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ternion {

struct PrepareResult {
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;  // 0 when no val.bin was written
};

PrepareResult prepare_text(std::string_view text, const std::string& output_dir,
                           double val_fraction);
PrepareResult prepare_text_file(const std::string& input_path, const std::string& output_dir,
                                double val_fraction);

}  // namespace ternion
