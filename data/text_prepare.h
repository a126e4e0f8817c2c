// Text preparation: raw text -> tokens -> token files in output_dir, ready for data.train and
// data.val.
//
// The text becomes tokens through `options.tokenizer` (bytes by default; a byte-level BPE needs
// UTF-8 text). The LAST floor(tokens * val_fraction) tokens are the validation split and the
// rest the training split. Splitting at the end rather than sampling keeps validation text
// unseen in training: no window of the validation files overlaps the training files. Tokens of
// documents (`document_start`, the token each one starts with) split between two documents:
// the validation split starts with the document whose start is nearest that cut of those in
// the last half of the tokens, so neither split holds part of a document and validation is at
// most half (DataError where no document starts there: one document, or a last one that holds
// more than half of the tokens).
//
// Files: with shard_tokens 0, output_dir/train.bin and output_dir/val.bin; with shard_tokens N,
// each split in the fewest shards of at most N tokens, of sizes within one token of each
// other (so no shard is a short remainder), named train_000000.bin, train_000001.bin, ... and
// val_000000.bin, ... (data.train: output_dir/train_*.bin; at most 999999 shards, UsageError).
// llm.c's token-file layout (data/token_shard.h) with uint16 tokens where the tokenizer's
// vocabulary fits them, else uint32, the same width for every file. A BPE tokenizer is written
// beside them as output_dir/tokenizer.json (data.tokenizer).
//
// Every file is written under a new name first and only then replaces the old one; files of an
// earlier preparation that this one does not write (a val.bin with val_fraction 0, shards past
// the new count, a tokenizer.json when preparing bytes) are removed, so the directory never
// mixes two preparations. A failure before the renames leaves the old files as they were.
//
//   val_fraction in [0, 0.5], else UsageError; shard_tokens >= 0, threads >= 1.
//   val_fraction > 0 on text too short to give even one validation token: DataError.
//   output_dir is created, parents included; DataError if it cannot be.
//   Empty text, or an input file that is missing, unreadable or empty: DataError naming it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace ternion {

struct PrepareOptions {
  double val_fraction = 0.1;
  Tokenizer tokenizer = Tokenizer::bytes();
  std::int64_t shard_tokens = 0;  // 0: one file per split
  int threads = 1;                // for encoding
  std::int32_t document_start = -1;  // the token each document starts with, or -1 (plain text)
};

struct PrepareResult {
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;  // 0 when no validation file was written
  std::int64_t val_documents = 0;  // with options.document_start: the documents in val_tokens
  std::vector<std::string> train_files, val_files;
  double encode_seconds = 0;  // the tokenizer's wall time alone
};

// `source` names the text in messages.
PrepareResult prepare_text(std::string_view text, const std::string& output_dir,
                           const PrepareOptions& options, const std::string& source = "the text");
// Tokens already encoded (documents: data/jsonl_documents.h) split and written as above;
// `encode_seconds` is reported as the encoding's time.
PrepareResult prepare_tokens(std::span<const std::int32_t> tokens, const std::string& output_dir,
                             const PrepareOptions& options, const std::string& source,
                             double encode_seconds);
PrepareResult prepare_text_file(const std::string& input_path, const std::string& output_dir,
                                const PrepareOptions& options);
// Whether preparing into `output_dir` writes over or removes `path` (a text to prepare there
// must not be one of its token files).
bool is_replaced_by_preparation(const std::string& path, const std::string& output_dir);
// The whole file's bytes, decompressed where it is gzip or Zstandard (data/decompress.h);
// DataError naming it when it cannot be read or its compressed data is corrupt or cut short.
std::string read_text_file(const std::string& path);

}  // namespace ternion
