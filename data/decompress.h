// Compressed text: corpora ship as gzip (.gz: Dolma, many Hugging Face datasets) or Zstandard
// (.zst: the Pile, SlimPajama). `decompress` tells them by their first bytes (gzip's magic;
// a Zstandard frame's or a skippable frame's, as pzstd's files begin), not by a file's name,
// and reads a file of several streams (pigz's members, zstd's frames) whole, with windows up
// to zstd's largest (--long=31); anything else is returned as it is.
//
// DataError naming `source`: a stream that is corrupt or cut short, or bytes after the last
// gzip member that do not begin another (gzip warns and drops them; we refuse them, since
// dropping data silently is how a half-copied corpus goes unnoticed).
#pragma once

#include <string>

namespace ternion {

std::string decompress(std::string bytes, const std::string& source);

}  // namespace ternion
