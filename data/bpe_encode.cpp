// Encoding: added tokens split out, the rest cut by the pre-tokenizer's regex, each piece
// merged by rank (tokenizers' BPE::merge_word), pieces seen before taken from a cache.
//
// With several threads the text is cut at byte offsets into one chunk per thread; each thread
// splits and merges its chunk from its cut on. A cut may fall inside what the regex would
// have matched as one piece, so a thread's first pieces can differ from the true ones. The
// true split is known from where the previous chunk's true pieces end (the end of a match, or
// of a segment): from any such place the regex finds the same pieces whoever runs it, so where
// a thread also passed that place, its pieces from there on are the true ones and those before
// are dropped. A thread that never passed it (rare: a single piece longer than the lookout) is
// redone from there. The ids are therefore those of one thread, for any thread count.
#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>

#include "data/bpe_state.h"
#include "data/byte_level.h"
#include "framework/error.h"

namespace ternion {

namespace {

// Pieces longer than this are merged each time (long runs of spaces, say): caching them would
// only fill the cache.
constexpr std::size_t kMaxCachedPiece = 256;
constexpr std::size_t kMaxCacheEntries = std::size_t{1} << 20;
// A thread gets a chunk only if it is worth starting one.
constexpr std::size_t kMinChunkBytes = std::size_t{64} << 10;
// How many places a thread remembers where the true split may be found to resume.
constexpr std::size_t kMaxResumePlaces = 256;

std::uint64_t hash_bytes(std::string_view bytes) {
  std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ bytes.size();
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = (h ^ word) * 0xFF51AFD7ED558CCDULL;
    h ^= h >> 32;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  h = (h ^ tail) * 0xC4CEB9FE1A85EC53ULL;
  return h ^ (h >> 29);
}

// Piece bytes -> ids for one call on one thread. Keys point into the text being encoded.
class PieceCache {
 public:
  PieceCache() : slots_(1024), mask_(1023) {}

  // The ids of `piece`, or false.
  bool find(std::string_view piece, std::uint64_t hash, std::vector<std::int32_t>* out) const {
    for (std::size_t s = hash & mask_;; s = (s + 1) & mask_) {
      const Slot& slot = slots_[s];
      if (slot.data == nullptr) return false;
      if (slot.hash == hash && slot.length == piece.size() &&
          std::memcmp(slot.data, piece.data(), piece.size()) == 0) {
        out->insert(out->end(), ids_.begin() + static_cast<std::ptrdiff_t>(slot.offset),
                    ids_.begin() + static_cast<std::ptrdiff_t>(slot.offset + slot.count));
        return true;
      }
    }
  }

  void insert(std::string_view piece, std::uint64_t hash, const std::int32_t* ids,
              std::size_t count) {
    if (used_ >= kMaxCacheEntries) return;
    if (2 * (used_ + 1) > slots_.size()) grow();
    place({piece.data(), static_cast<std::uint32_t>(piece.size()),
           static_cast<std::uint32_t>(count), ids_.size(), hash});
    ids_.insert(ids_.end(), ids, ids + count);
    ++used_;
  }

 private:
  struct Slot {
    const char* data = nullptr;
    std::uint32_t length = 0, count = 0;
    std::size_t offset = 0;
    std::uint64_t hash = 0;
  };
  void place(const Slot& slot) {
    std::size_t s = slot.hash & mask_;
    while (slots_[s].data != nullptr) s = (s + 1) & mask_;
    slots_[s] = slot;
  }
  void grow() {
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& slot : old)
      if (slot.data != nullptr) place(slot);
  }
  std::vector<Slot> slots_;
  std::size_t mask_;
  std::size_t used_ = 0;
  std::vector<std::int32_t> ids_;
};

// A stretch of the text: a run the pre-tokenizer splits, or one added token.
struct Segment {
  std::size_t begin, end;
  std::int32_t added_id;  // -1: text to split
};

// Added tokens out of the text, as tokenizers' AddedVocabulary does: first those matched in the
// raw text, then, in what lies between, those matched in the normalized text (without a
// normalizer, the same text).
std::vector<Segment> split_added_tokens(const BpeTokenizer::State& s, std::string_view text) {
  std::vector<Segment> raw;
  std::size_t pos = 0, begin = 0, end = 0;
  std::int32_t id = -1;
  while (s.raw_matcher.find(text, pos, &begin, &end, &id)) {
    if (begin > pos) raw.push_back({pos, begin, -1});
    raw.push_back({begin, end, id});
    pos = end;
  }
  if (pos < text.size()) raw.push_back({pos, text.size(), -1});
  if (s.normalized_matcher.empty()) return raw;
  std::vector<Segment> segments;
  for (const Segment& gap : raw) {
    if (gap.added_id >= 0) {
      segments.push_back(gap);
      continue;
    }
    const std::string_view part = text.substr(0, gap.end);
    pos = gap.begin;
    while (s.normalized_matcher.find(part, pos, &begin, &end, &id)) {
      if (begin > pos) segments.push_back({pos, begin, -1});
      segments.push_back({begin, end, id});
      pos = end;
    }
    if (pos < gap.end) segments.push_back({pos, gap.end, -1});
  }
  return segments;
}

// One thread's means of turning pieces into ids.
class PieceEncoder {
 public:
  explicit PieceEncoder(const BpeTokenizer::State& state) : s_(state), matcher_(*state.regex) {}

  BpeRegex::Matcher& matcher() { return matcher_; }

  void encode(std::string_view piece, std::vector<std::int32_t>* out) {
    const bool cacheable = piece.size() <= kMaxCachedPiece;
    const std::uint64_t hash = cacheable ? hash_bytes(piece) : 0;
    if (cacheable && cache_.find(piece, hash, out)) return;
    const std::size_t first = out->size();
    merge(piece, out);
    if (cacheable) cache_.insert(piece, hash, out->data() + first, out->size() - first);
  }

 private:
  struct Symbol {
    std::int32_t id, prev, next, length;  // length 0: merged into the symbol before it
  };
  struct Candidate {
    std::int32_t rank, pos, merged;
  };

  void add_symbol(std::int32_t id, std::int32_t length) {
    const auto n = static_cast<std::int32_t>(symbols_.size());
    if (n > 0) symbols_.back().next = n;
    symbols_.push_back({id, n - 1, -1, length});
  }

  void push(std::int32_t pos) {
    const Symbol& left = symbols_[static_cast<std::size_t>(pos)];
    const MergeTable::Rule* rule =
        s_.merge_table.find(left.id, symbols_[static_cast<std::size_t>(left.next)].id);
    if (rule == nullptr) return;
    heap_.push_back({rule->rank, pos, rule->merged});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  static bool later(const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }

  // tokenizers' BPE::merge_word: the bytes as symbols (unknown ones dropped, or unk, fused if
  // asked), then repeatedly the pair of lowest rank, leftmost first, merged.
  void merge(std::string_view piece, std::vector<std::int32_t>* out) {
    if (s_.ignore_merges) {
      const auto whole = s_.ids_by_bytes.find(std::string(piece));
      if (whole != s_.ids_by_bytes.end()) {
        out->push_back(whole->second);
        return;
      }
    }
    symbols_.clear();
    std::int32_t unk_length = 0;  // bytes of a pending unk symbol
    for (char c : piece) {
      const std::int32_t id = s_.byte_ids[static_cast<std::uint8_t>(c)];
      if (id >= 0) {
        if (unk_length > 0) add_symbol(s_.unk_id, unk_length);
        unk_length = 0;
        add_symbol(id, 1);
      } else if (s_.unk_id >= 0) {
        if (unk_length > 0 && !s_.fuse_unk) {
          add_symbol(s_.unk_id, unk_length);
          unk_length = 0;
        }
        ++unk_length;
      }
    }
    if (unk_length > 0) add_symbol(s_.unk_id, unk_length);

    heap_.clear();
    for (std::size_t i = 0; i + 1 < symbols_.size(); ++i) push(static_cast<std::int32_t>(i));
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      const Candidate top = heap_.back();
      heap_.pop_back();
      Symbol& left = symbols_[static_cast<std::size_t>(top.pos)];
      if (left.length == 0 || left.next < 0) continue;
      Symbol& right = symbols_[static_cast<std::size_t>(left.next)];
      // A stale candidate: the pair at `pos` changed since it was queued.
      const MergeTable::Rule* rule = s_.merge_table.find(left.id, right.id);
      if (rule == nullptr || rule->merged != top.merged) continue;
      left.id = top.merged;
      left.length += right.length;
      left.next = right.next;
      right.length = 0;
      if (left.next >= 0) symbols_[static_cast<std::size_t>(left.next)].prev = top.pos;
      if (left.prev >= 0) push(left.prev);
      if (left.next >= 0) push(top.pos);
    }
    for (const Symbol& symbol : symbols_)
      if (symbol.length > 0) out->push_back(symbol.id);
  }

  const BpeTokenizer::State& s_;
  BpeRegex::Matcher matcher_;
  PieceCache cache_;
  std::vector<Symbol> symbols_;
  std::vector<Candidate> heap_;
};

// The ids of the text from `start` on, up to the first place at or after `stop` where the
// true split resumes (the end of a match or of a segment).
struct Scan {
  std::vector<std::int32_t> ids;
  // Places where the true split may resume, with the count of ids before each: the start and
  // the ends of matches and segments after it (the first kMaxResumePlaces of them).
  std::vector<std::pair<std::size_t, std::size_t>> resume;
  std::size_t end = 0;
};

Scan scan(std::string_view text, const std::vector<Segment>& segments, PieceEncoder& encoder,
          std::size_t start, std::size_t stop) {
  Scan result;
  result.end = start;
  result.resume.emplace_back(start, 0);
  if (start >= stop) return result;
  const auto resumable = [&](std::size_t place) {
    if (result.resume.size() < kMaxResumePlaces)
      result.resume.emplace_back(place, result.ids.size());
    result.end = place;
    return place >= stop;
  };
  // The segment holding `start`: the last one beginning at or before it.
  auto segment = std::upper_bound(segments.begin(), segments.end(), start,
                                  [](std::size_t pos, const Segment& g) { return pos < g.begin; });
  if (segment != segments.begin()) --segment;
  for (; segment != segments.end(); ++segment) {
    if (segment->end <= start) continue;
    if (segment->added_id >= 0) {
      // Begun inside an added token (a thread's cut): its ids come from the thread before.
      if (segment->begin >= start) result.ids.push_back(segment->added_id);
      if (resumable(segment->end)) return result;
      continue;
    }
    const std::string_view subject = text.substr(segment->begin, segment->end - segment->begin);
    IsolatedSplit split(encoder.matcher(), subject,
                        std::max(start, segment->begin) - segment->begin);
    IsolatedSplit::Piece piece;
    while (split.next(&piece)) {
      encoder.encode(subject.substr(piece.begin, piece.end - piece.begin), &result.ids);
      if (piece.match_end && resumable(segment->begin + piece.end)) return result;
    }
    if (resumable(segment->end)) return result;
  }
  return result;
}

std::vector<std::int32_t> encode_segments(const BpeTokenizer::State& s, std::string_view text,
                                          const std::vector<Segment>& segments, int threads) {
  const std::int64_t bad = first_invalid_utf8(text);
  TN_CHECK_AS(DataError, bad < 0, "tokenizer '", s.source,
              "': the text is not UTF-8 at byte offset ", bad,
              " (a byte-level BPE encodes UTF-8 text)");

  // Splitting from an arbitrary cut is safe only for a pattern that cannot match empty (the
  // iterator's rule for empty matches depends on the match before).
  std::size_t chunks = std::max(1, threads);
  chunks = std::min(chunks, std::max<std::size_t>(1, text.size() / kMinChunkBytes));
  if (s.regex->can_match_empty()) chunks = 1;
  std::vector<std::size_t> cuts(chunks + 1, text.size());
  cuts[0] = 0;
  for (std::size_t k = 1; k < chunks; ++k) {
    std::size_t cut = std::max(cuts[k - 1], text.size() * k / chunks);
    while (cut < text.size() && (static_cast<std::uint8_t>(text[cut]) & 0xC0) == 0x80) ++cut;
    cuts[k] = cut;
  }

  std::vector<std::unique_ptr<PieceEncoder>> encoders;
  for (std::size_t k = 0; k < chunks; ++k) encoders.push_back(std::make_unique<PieceEncoder>(s));
  std::vector<Scan> scans(chunks);
  std::vector<std::exception_ptr> errors(chunks);
  const auto run = [&](std::size_t k) {
    try {
      scans[k] = scan(text, segments, *encoders[k], cuts[k], cuts[k + 1]);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  std::vector<std::jthread> workers;  // joined on the way out, should a start fail
  for (std::size_t k = 1; k < chunks; ++k) workers.emplace_back(run, k);
  run(0);
  for (std::jthread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);

  std::vector<std::int32_t> ids = std::move(scans[0].ids);
  std::size_t end = scans[0].end;
  for (std::size_t k = 1; k < chunks; ++k) {
    Scan& chunk = scans[k];
    const auto resume = std::find_if(chunk.resume.begin(), chunk.resume.end(),
                                     [&](const auto& place) { return place.first == end; });
    if (resume == chunk.resume.end()) {
      chunk = scan(text, segments, *encoders[0], end, cuts[k + 1]);
      ids.insert(ids.end(), chunk.ids.begin(), chunk.ids.end());
    } else {
      ids.insert(ids.end(), chunk.ids.begin() + static_cast<std::ptrdiff_t>(resume->second),
                 chunk.ids.end());
    }
    end = chunk.end;
  }
  return ids;
}

}  // namespace

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text, int threads) const {
  return encode_segments(*state_, text, split_added_tokens(*state_, text), threads);
}

std::vector<std::int32_t> BpeTokenizer::encode_with_special_tokens(std::string_view text) const {
  const SpecialTokenTemplate& around = state_->special_token_template;
  std::vector<std::int32_t> ids = around.before;
  const std::vector<std::int32_t> inside = encode(text);
  ids.insert(ids.end(), inside.begin(), inside.end());
  ids.insert(ids.end(), around.after.begin(), around.after.end());
  return ids;
}

std::vector<std::int32_t> BpeTokenizer::encode_placed(std::string_view text,
                                                      std::span<const PlacedToken> placed,
                                                      int threads) const {
  std::vector<Segment> segments;
  std::size_t pos = 0;
  for (const PlacedToken& token : placed) {
    TN_CHECK(token.begin >= pos && token.end > token.begin && token.end <= text.size(),
             "encode_placed: token places out of order");
    if (token.begin > pos) segments.push_back({pos, token.begin, -1});
    segments.push_back({token.begin, token.end, token.id});
    pos = token.end;
  }
  if (pos < text.size()) segments.push_back({pos, text.size(), -1});
  return encode_segments(*state_, text, segments, threads);
}

}  // namespace ternion
