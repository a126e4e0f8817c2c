// The built-in corpus: pseudo-English generated from a small grammar, so a fresh checkout can
// train without downloading anything.
//
// About 900 word forms in categories (determiners, adjectives, nouns with their plurals, verbs
// in base / past / third-person forms, prepositions, adverbs, names, time phrases) combine
// through a dozen sentence templates — statements, habits, reported speech, dialogue in quotes,
// questions — into sentences like "The old fisherman carried a heavy net to the harbour.",
// with capitalised first words, paragraphs of 3 to 8 sentences wrapped at 72 columns and
// separated by blank lines. The combinations are far too many for a small model to memorise,
// but every word recurs often, so a byte-level model learns to spell them within seconds; the
// quickstart checks that with `known_word_fraction` on the model's samples.
//
// The text is drawn from framework/philox.h with a fixed seed, so it is identical on every
// machine. Generation stops at the end of the first paragraph that reaches approx_bytes (so the
// text is at most one paragraph, under a kilobyte, longer than asked, and ends with a newline),
// which makes builtin_corpus_text(n) a prefix of builtin_corpus_text(m) for n <= m.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ternion {

std::string builtin_corpus_text(std::int64_t approx_bytes = 1 << 20);

// Every word the corpus can contain, lower-cased, sorted, without duplicates.
std::vector<std::string> builtin_corpus_words();

// The fraction of words in `text` found in `words` (0 when `text` has no words). A word is a
// maximal run of ASCII letters, digits and non-ASCII bytes, lower-cased; whitespace,
// punctuation and control bytes separate words.
double known_word_fraction(std::string_view text, const std::vector<std::string>& words);

}  // namespace ternion
