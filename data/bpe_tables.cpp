// The lookup tables encoding and decoding use, derived from a BpeTokenizer's vocabulary.
#include <algorithm>
#include <bit>
#include <cstring>

#include "data/bpe_state.h"
#include "data/byte_level.h"

namespace ternion {

MergeTable::MergeTable(std::size_t count) {
  // At most half full: probes stay short.
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, 2 * count));
  keys_.assign(capacity, kEmpty);
  rules_.assign(capacity, Rule{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
}

void MergeTable::set(std::int32_t left, std::int32_t right, Rule rule) {
  const std::uint64_t key = pack(left, right);
  std::size_t slot = hash(key);
  while (keys_[slot] != kEmpty && keys_[slot] != key) slot = (slot + 1) & mask_;
  keys_[slot] = key;
  rules_[slot] = rule;
}

void AddedTokenMatcher::add(std::string_view content, std::int32_t id) {
  std::int32_t node = 0;
  for (char c : content) {
    const auto byte = static_cast<std::uint8_t>(c);
    std::int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<std::int32_t>(nodes_.size());
      nodes_[static_cast<std::size_t>(node)].children.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  nodes_[static_cast<std::size_t>(node)].id = id;
  const auto first = static_cast<std::uint8_t>(content.front());
  if (!first_byte_[first]) {
    first_byte_[first] = true;
    ++first_byte_count_;
    only_first_byte_ = first;
  }
}

std::int32_t AddedTokenMatcher::child(std::int32_t node, std::uint8_t byte) const {
  for (const auto& [b, next] : nodes_[static_cast<std::size_t>(node)].children)
    if (b == byte) return next;
  return -1;
}

bool AddedTokenMatcher::find(std::string_view text, std::size_t from, std::size_t* begin,
                             std::size_t* end, std::int32_t* id) const {
  if (empty()) return false;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(text.data());
  for (std::size_t start = from; start < text.size(); ++start) {
    if (first_byte_count_ == 1) {  // the usual case, "<|...|>": memchr skips to candidates
      const void* hit = std::memchr(bytes + start, only_first_byte_, text.size() - start);
      if (hit == nullptr) return false;
      start = static_cast<std::size_t>(static_cast<const std::uint8_t*>(hit) - bytes);
    } else if (!first_byte_[bytes[start]]) {
      continue;
    }
    std::int32_t node = 0, longest = -1;
    std::size_t longest_end = 0;
    for (std::size_t i = start; i < text.size(); ++i) {
      node = child(node, bytes[i]);
      if (node < 0) break;
      if (nodes_[static_cast<std::size_t>(node)].id >= 0) {
        longest = nodes_[static_cast<std::size_t>(node)].id;
        longest_end = i + 1;
      }
    }
    if (longest >= 0) {
      *begin = start;
      *end = longest_end;
      *id = longest;
      return true;
    }
  }
  return false;
}

void BpeTokenizer::State::index() {
  merge_table = MergeTable(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank)
    merge_table.set(merges[rank].left, merges[rank].right,
                    {static_cast<std::int32_t>(rank), merges[rank].merged});

  std::size_t size = model_tokens.size();
  for (const BpeAddedToken& token : added_tokens)
    size = std::max(size, static_cast<std::size_t>(token.id) + 1);
  model_tokens.resize(size);
  in_model.resize(size, false);
  decoded.assign(size, std::string());
  known.assign(size, false);

  byte_ids.fill(-1);
  ids_by_bytes.clear();
  unk_id = -1;
  for (std::size_t id = 0; id < size; ++id) {
    if (!in_model[id]) continue;
    known[id] = true;
    const std::string& token = model_tokens[id];
    // The ByteLevel decoder maps a token of the alphabet to its bytes and leaves any other
    // token as it is written.
    if (std::optional<std::string> bytes = byte_level::to_bytes(token)) {
      decoded[id] = *bytes;
      if (bytes->size() == 1)
        byte_ids[static_cast<std::uint8_t>((*bytes)[0])] = static_cast<std::int32_t>(id);
      ids_by_bytes.emplace(std::move(*bytes), static_cast<std::int32_t>(id));
    } else {
      decoded[id] = token;
    }
    if (unk_token && token == *unk_token) unk_id = static_cast<std::int32_t>(id);
  }

  raw_matcher = AddedTokenMatcher();
  normalized_matcher = AddedTokenMatcher();
  for (const BpeAddedToken& token : added_tokens) {
    const auto id = static_cast<std::size_t>(token.id);
    known[id] = true;
    decoded[id] = token.content;
    (token.normalized ? normalized_matcher : raw_matcher).add(token.content, token.id);
  }
}

}  // namespace ternion
