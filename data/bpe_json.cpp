// tokenizer.json in and out: every field the header accepts is checked here, with a message
// naming the file and the field; everything else is refused.
#include <algorithm>
#include <initializer_list>
#include <map>
#include <optional>
#include <unordered_map>

#include "data/bpe_state.h"
#include "data/byte_level.h"
#include "framework/error.h"

namespace ternion {

namespace {

// An id table indexed by id may hold a few gaps, not a range far larger than the vocabulary.
constexpr std::int64_t kMaxId = (std::int64_t{1} << 31) - 2;
constexpr std::int64_t kGapAllowance = 1024;

class FieldReader {
 public:
  explicit FieldReader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    TN_THROW(DataError, "tokenizer '", source_, "': ", field, ": ", why);
  }

  // The value of `key`, or nullptr where it is absent or null.
  static const Json* given(const Json& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }

  void need_object(const Json& value, const std::string& field) const {
    if (!value.is_object()) fail(field, "expected an object, got " + describe_json(value));
  }

  // Refuses keys other than `known`: one this reader does not know might change the encoding.
  void only_keys(const Json& object, std::initializer_list<const char*> known,
                 const std::string& field) const {
    for (const auto& item : object.items()) {
      const bool is_known = std::any_of(known.begin(), known.end(),
                                        [&](const char* key) { return item.key() == key; });
      if (!is_known) fail(join(field, item.key()), "unknown key (this reader does not handle it)");
    }
  }

  bool boolean(const Json& object, const char* key, const std::string& field, bool fallback) const {
    const Json* value = given(object, key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean())
      fail(join(field, key), "expected true or false, got " + describe_json(*value));
    return value->get<bool>();
  }

  std::string text(const Json& value, const std::string& field) const {
    if (!value.is_string()) fail(field, "expected a string, got " + describe_json(value));
    return value.get<std::string>();
  }

  std::int32_t id(const Json& value, const std::string& field) const {
    const std::optional<std::int64_t> id = json_int64(value);
    if (!id || *id < 0 || *id > kMaxId)
      fail(field,
           "expected an id from 0 to " + std::to_string(kMaxId) + ", got " + describe_json(value));
    return static_cast<std::int32_t>(*id);
  }

  std::string type_of(const Json& object, const std::string& field) const {
    need_object(object, field);
    const Json* type = given(object, "type");
    if (type == nullptr) fail(join(field, "type"), "missing");
    return text(*type, join(field, "type"));
  }

  static std::string join(const std::string& field, const std::string& key) {
    return field.empty() ? key : field + "." + key;
  }
  static std::string at(const std::string& field, std::size_t index) {
    return field + "[" + std::to_string(index) + "]";
  }

 private:
  const std::string& source_;
};

std::string in_quotes(const std::string& text) { return "'" + text + "'"; }

// ByteLevel as a pre-tokenizer: no prefix space; use_regex as the caller needs it.
void read_byte_level(const FieldReader& in, const Json& object, const std::string& field,
                     bool use_regex) {
  in.only_keys(object, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, field);
  if (in.boolean(object, "add_prefix_space", field, true))
    in.fail(FieldReader::join(field, "add_prefix_space"),
            "must be false (a prefix space is not supported)");
  in.boolean(object, "trim_offsets", field, true);  // offsets only
  if (in.boolean(object, "use_regex", field, true) != use_regex)
    in.fail(FieldReader::join(field, "use_regex"),
            use_regex ? "must be true: alone, ByteLevel splits by GPT-2's pattern"
                      : "must be false: after a Split, ByteLevel only maps bytes");
}

// The pre-tokenizer's pattern: GPT-2's (ByteLevel), or the Split's of Sequence[Split, ByteLevel].
std::string read_pre_tokenizer(const FieldReader& in, const Json& root) {
  const std::string field = "pre_tokenizer";
  const Json* pre = FieldReader::given(root, "pre_tokenizer");
  if (pre == nullptr)
    in.fail(field, "missing: a byte-level BPE needs ByteLevel or Sequence[Split, ByteLevel]");
  const std::string type = in.type_of(*pre, field);
  if (type == "ByteLevel") {
    read_byte_level(in, *pre, field, true);
    return kGpt2Pattern;
  }
  if (type != "Sequence")
    in.fail(field + ".type", in_quotes(type) +
                                 " is not supported (ByteLevel, or Sequence of Split "
                                 "and ByteLevel)");
  in.only_keys(*pre, {"type", "pretokenizers"}, field);
  const Json* steps = FieldReader::given(*pre, "pretokenizers");
  const std::string steps_field = field + ".pretokenizers";
  if (steps == nullptr || !steps->is_array() || steps->size() != 2)
    in.fail(steps_field, "expected two steps, Split then ByteLevel");
  const Json& split = (*steps)[0];
  const std::string split_field = FieldReader::at(steps_field, 0);
  if (in.type_of(split, split_field) != "Split")
    in.fail(split_field + ".type", "expected Split, got " + describe_json(split["type"]));
  in.only_keys(split, {"type", "pattern", "behavior", "invert"}, split_field);
  const Json* behavior = FieldReader::given(split, "behavior");
  if (behavior == nullptr || *behavior != "Isolated")
    in.fail(split_field + ".behavior",
            "only Isolated is supported, got " + (behavior ? describe_json(*behavior) : "nothing"));
  if (in.boolean(split, "invert", split_field, false))
    in.fail(split_field + ".invert", "must be false");
  const Json* pattern = FieldReader::given(split, "pattern");
  if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1 ||
      !pattern->contains("Regex"))
    in.fail(split_field + ".pattern", "expected {\"Regex\": PATTERN}");
  const std::string regex = in.text((*pattern)["Regex"], split_field + ".pattern.Regex");
  const Json& byte_level = (*steps)[1];
  const std::string byte_field = FieldReader::at(steps_field, 1);
  if (in.type_of(byte_level, byte_field) != "ByteLevel")
    in.fail(byte_field + ".type", "expected ByteLevel, got " + describe_json(byte_level["type"]));
  read_byte_level(in, byte_level, byte_field, false);
  return regex;
}

// One item of a template, as tokenizers requires each: {"SpecialToken": {"id": NAME,
// "type_id": N}} or {"Sequence": {"id": "A" or "B", "type_id": N}}; its id, and whether it is a
// text's place.
std::pair<std::string, bool> read_template_item(const FieldReader& in, const Json& item,
                                                const std::string& field) {
  const bool is_text = item.is_object() && item.size() == 1 && item.contains("Sequence");
  if (!is_text && !(item.is_object() && item.size() == 1 && item.contains("SpecialToken")))
    in.fail(field,
            "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}, got " + describe_json(item));
  const std::string kind = is_text ? "Sequence" : "SpecialToken";
  const std::string piece_field = FieldReader::join(field, kind);
  const Json& piece = item[kind];
  in.need_object(piece, piece_field);
  in.only_keys(piece, {"id", "type_id"}, piece_field);
  const Json* id = FieldReader::given(piece, "id");
  if (id == nullptr) in.fail(piece_field + ".id", "missing");
  const Json* type_id = FieldReader::given(piece, "type_id");
  const std::optional<std::int64_t> type = type_id ? json_int64(*type_id) : std::nullopt;
  if (!type || *type < 0 || *type > std::int64_t{UINT32_MAX})
    in.fail(piece_field + ".type_id", "expected a whole number from 0, got " +
                                          (type_id ? describe_json(*type_id) : "nothing"));
  return {in.text(*id, piece_field + ".id"), is_text};
}

// TemplateProcessing, every field checked as tokenizers checks it: "special_tokens" (name:
// {id, ids, tokens}), and the templates "single" (one text, "A") and
// "pair" (texts "A" and "B", read by tokenizers for two texts, never here). `out`: what
// add_special_tokens puts around one text, each SpecialToken item's ids before or after "A".
void read_template(const FieldReader& in, const Json& processor, const std::string& field,
                   SpecialTokenTemplate* out) {
  in.only_keys(processor, {"type", "single", "pair", "special_tokens"}, field);
  const Json* specials = FieldReader::given(processor, "special_tokens");
  const std::string specials_field = field + ".special_tokens";
  if (specials == nullptr || !specials->is_object())
    in.fail(specials_field, "expected an object of name: {id, ids, tokens}");
  std::map<std::string, std::vector<std::int32_t>> ids_of;
  for (const auto& entry : specials->items()) {
    const std::string entry_field = specials_field + "." + entry.key();
    in.need_object(entry.value(), entry_field);
    in.only_keys(entry.value(), {"id", "ids", "tokens"}, entry_field);
    const Json* id = FieldReader::given(entry.value(), "id");
    if (id == nullptr) in.fail(entry_field + ".id", "missing");
    in.text(*id, entry_field + ".id");
    const Json* ids = FieldReader::given(entry.value(), "ids");
    const Json* tokens = FieldReader::given(entry.value(), "tokens");
    if (ids == nullptr || !ids->is_array()) in.fail(entry_field + ".ids", "expected a list of ids");
    if (tokens == nullptr || !tokens->is_array())
      in.fail(entry_field + ".tokens", "expected a list of token texts");
    for (std::size_t j = 0; j < tokens->size(); ++j)
      in.text((*tokens)[j], FieldReader::at(entry_field + ".tokens", j));
    std::vector<std::int32_t>& list = ids_of[entry.key()];
    for (std::size_t j = 0; j < ids->size(); ++j)  // the ids apply, whatever the texts say
      list.push_back(in.id((*ids)[j], FieldReader::at(entry_field + ".ids", j)));
  }
  for (const char* name : {"single", "pair"}) {
    const Json* items = FieldReader::given(processor, name);
    const std::string list_field = field + "." + name;
    if (items == nullptr || !items->is_array()) in.fail(list_field, "expected a list");
    const bool single = std::string(name) == "single";
    int texts = 0;
    for (std::size_t i = 0; i < items->size(); ++i) {
      const std::string item_field = FieldReader::at(list_field, i);
      const auto [id, is_text] = read_template_item(in, (*items)[i], item_field);
      if (is_text) {
        if (id != "A" && (single || id != "B"))
          in.fail(item_field + ".Sequence.id",
                  std::string("expected ") + (single ? "\"A\" (one text)" : "\"A\" or \"B\"") +
                      ", got " + in_quotes(id));
        if (single && texts > 0)
          in.fail(item_field, "a second Sequence: the text would be in twice");
        ++texts;
        continue;
      }
      const auto entry = ids_of.find(id);
      if (entry == ids_of.end())
        in.fail(item_field + ".SpecialToken.id", in_quotes(id) + " is not in " + specials_field);
      if (single)
        for (std::int32_t token : entry->second)
          (texts > 0 ? out->after : out->before).push_back(token);
    }
    if (single && texts == 0)
      in.fail(list_field, "has no {\"Sequence\": {\"id\": \"A\"}} for the text");
  }
}

// Post-processors apply only with add_special_tokens (encode_with_special_tokens): those that
// can come with a byte-level BPE are accepted, and written back as they were. ByteLevel's
// changes only offsets; one TemplateProcessing gives the tokens around a text.
void read_post_processor(const FieldReader& in, const Json& processor, const std::string& field,
                         SpecialTokenTemplate* out, bool* seen_template) {
  const std::string type = in.type_of(processor, field);
  if (type == "ByteLevel") return;
  if (type == "TemplateProcessing") {
    if (*seen_template) in.fail(field, "a second TemplateProcessing (one is supported)");
    *seen_template = true;
    read_template(in, processor, field, out);
    return;
  }
  if (type == "Sequence") {
    const Json* steps = FieldReader::given(processor, "processors");
    if (steps == nullptr || !steps->is_array()) in.fail(field + ".processors", "expected a list");
    for (std::size_t i = 0; i < steps->size(); ++i)
      read_post_processor(in, (*steps)[i], FieldReader::at(field + ".processors", i), out,
                          seen_template);
    return;
  }
  in.fail(field + ".type", in_quotes(type) +
                               " is not supported (ByteLevel, TemplateProcessing or a "
                               "Sequence of them)");
}

// A parsed object's keys come sorted; written back, "type" leads as in tokenizers' files (the
// rest of a ByteLevel's keys are in its order already).
OrderedJson ordered(const Json& value) {
  if (value.is_array()) {
    OrderedJson list = OrderedJson::array();
    for (const Json& item : value) list.push_back(ordered(item));
    return list;
  }
  if (!value.is_object()) return OrderedJson::parse(value.dump());
  OrderedJson object = OrderedJson::object();
  if (value.contains("type")) object["type"] = ordered(value["type"]);
  for (const auto& item : value.items())
    if (item.key() != "type") object[item.key()] = ordered(item.value());
  return object;
}

// The model's vocabulary: ids by token text, and the count of ids.
void read_vocab(const FieldReader& in, const Json& vocab,
                std::unordered_map<std::string, std::int32_t>* ids,
                std::map<std::int32_t, std::string>* tokens) {
  if (!vocab.is_object()) in.fail("model.vocab", "expected an object of token: id");
  ids->reserve(vocab.size());
  for (const auto& item : vocab.items()) {
    const std::int32_t id = in.id(item.value(), "model.vocab." + item.key());
    const auto [it, fresh] = tokens->emplace(id, item.key());
    if (!fresh)
      in.fail("model.vocab", in_quotes(it->second) + " and " + in_quotes(item.key()) +
                                 " both have id " + std::to_string(id));
    ids->emplace(item.key(), id);
  }
}

void read_merges(const FieldReader& in, const Json& merges,
                 const std::unordered_map<std::string, std::int32_t>& ids,
                 std::vector<BpeTokenizer::State::Merge>* out) {
  if (!merges.is_array()) in.fail("model.merges", "expected a list");
  // A pair listed twice takes its last rank, as in tokenizers.
  std::unordered_map<std::uint64_t, std::size_t> last_rank;
  std::vector<BpeTokenizer::State::Merge> listed;
  listed.reserve(merges.size());
  std::optional<bool> as_strings;
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const Json& merge = merges[i];
    const std::string field = FieldReader::at("model.merges", i);
    std::string left, right;
    if (merge.is_string()) {
      const std::string line = merge.get<std::string>();
      if (line.rfind("#version", 0) == 0) continue;
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        in.fail(field, "expected \"LEFT RIGHT\" (one space), got " + in_quotes(line));
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      in.fail(field, "expected \"LEFT RIGHT\" or [LEFT, RIGHT], got " + describe_json(merge));
    }
    if (as_strings && *as_strings != merge.is_string())
      in.fail(field, "mixes the two forms of merges (strings and pairs)");
    as_strings = merge.is_string();
    const auto id_of = [&](const std::string& token, const char* what) {
      const auto it = ids.find(token);
      if (it == ids.end())
        in.fail(field, in_quotes(token) + " (" + what + ") is not in the vocabulary");
      return it->second;
    };
    const std::int32_t a = id_of(left, "its left part");
    const std::int32_t b = id_of(right, "its right part");
    const std::int32_t merged = id_of(left + right, "what it makes");
    last_rank[(std::uint64_t{static_cast<std::uint32_t>(a)} << 32) |
              static_cast<std::uint32_t>(b)] = listed.size();
    listed.push_back({a, b, merged});
  }
  for (std::size_t rank = 0; rank < listed.size(); ++rank) {
    const auto& m = listed[rank];
    const std::uint64_t key = (std::uint64_t{static_cast<std::uint32_t>(m.left)} << 32) |
                              static_cast<std::uint32_t>(m.right);
    if (last_rank[key] == rank) out->push_back(m);
  }
}

// The kind of tokenizer is checked first: a WordPiece, Unigram or SentencePiece-style file
// (Llama 2's BPE with byte fallback) is refused for what it is, not for whichever of its other
// parts (a normalizer, say) this reader does not take.
void check_model_kind(const FieldReader& in, const Json& root) {
  const Json* model = FieldReader::given(root, "model");
  if (model == nullptr) in.fail("model", "missing");
  const std::string type = in.type_of(*model, "model");
  if (type != "BPE")
    in.fail("model.type", in_quotes(type) + " is not supported (this reader takes byte-level BPE)");
  if (in.boolean(*model, "byte_fallback", "model", false))
    in.fail("model.byte_fallback",
            "must be false: a BPE with byte fallback (SentencePiece's, as Llama 2's) is not "
            "byte-level, and this reader takes byte-level BPE");
}

void read_model(const FieldReader& in, const Json& root, BpeTokenizer::State* state,
                std::unordered_map<std::string, std::int32_t>* ids,
                std::map<std::int32_t, std::string>* tokens) {
  const Json* model = FieldReader::given(root, "model");  // check_model_kind read it
  in.only_keys(*model,
               {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"},
               "model");
  if (const Json* dropout = FieldReader::given(*model, "dropout");
      dropout != nullptr && !(dropout->is_number() && dropout->get<double>() == 0.0))
    in.fail("model.dropout",
            "must be null (dropout makes encoding random), got " + describe_json(*dropout));
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* value = FieldReader::given(*model, affix);
    if (value != nullptr && *value != "")
      in.fail(std::string("model.") + affix,
              "must be null (byte-level BPE has none), got " + describe_json(*value));
  }
  state->fuse_unk = in.boolean(*model, "fuse_unk", "model", false);
  state->ignore_merges = in.boolean(*model, "ignore_merges", "model", false);

  const Json* vocab = FieldReader::given(*model, "vocab");
  const Json* merges = FieldReader::given(*model, "merges");
  if (vocab == nullptr) in.fail("model.vocab", "missing");
  if (merges == nullptr) in.fail("model.merges", "missing");
  read_vocab(in, *vocab, ids, tokens);
  read_merges(in, *merges, *ids, &state->merges);
  if (const Json* unk = FieldReader::given(*model, "unk_token")) {
    state->unk_token = in.text(*unk, "model.unk_token");
    if (!ids->contains(*state->unk_token))
      in.fail("model.unk_token", in_quotes(*state->unk_token) + " is not in the vocabulary");
  }
}

// Added tokens, with the ids tokenizers gives them: a token of the model's vocabulary keeps its
// id, the others are numbered from the vocabulary's size on, in order. A file that says
// otherwise would encode differently here and there, so it is refused.
void read_added_tokens(const FieldReader& in, const Json& root,
                       const std::unordered_map<std::string, std::int32_t>& model_ids,
                       const std::map<std::int32_t, std::string>& model_tokens,
                       std::vector<BpeAddedToken>* out) {
  const Json* list = FieldReader::given(root, "added_tokens");
  if (list == nullptr) return;
  if (!list->is_array()) in.fail("added_tokens", "expected a list");
  auto next_id = static_cast<std::int64_t>(model_ids.size());
  std::unordered_map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const Json& token = (*list)[i];
    const std::string field = FieldReader::at("added_tokens", i);
    in.need_object(token, field);
    in.only_keys(token,
                 {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"},
                 field);
    const Json* content = FieldReader::given(token, "content");
    const Json* id = FieldReader::given(token, "id");
    if (content == nullptr) in.fail(field + ".content", "missing");
    if (id == nullptr) in.fail(field + ".id", "missing");
    BpeAddedToken added;
    added.content = in.text(*content, field + ".content");
    added.id = in.id(*id, field + ".id");
    if (added.content.empty()) in.fail(field + ".content", "is empty");
    // tokenizers requires every flag (a file without one does not load there).
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized", "special"})
      if (FieldReader::given(token, flag) == nullptr) in.fail(field + "." + flag, "missing");
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      if (in.boolean(token, flag, field, false))
        in.fail(field + "." + flag, "must be false (" + in_quotes(added.content) + ")");
    added.normalized = in.boolean(token, "normalized", field, true);
    added.special = in.boolean(token, "special", field, false);
    if (const auto [it, fresh] = seen.emplace(added.content, i); !fresh)
      in.fail(field + ".content", in_quotes(added.content) + " is also added_tokens[" +
                                      std::to_string(it->second) + "]");
    const auto in_model = model_ids.find(added.content);
    // A model token written as these characters stands for other bytes ("é" for the byte E9):
    // its id, which the added token shares, would decode as one of two texts.
    if (const std::optional<std::string> bytes = byte_level::to_bytes(added.content);
        in_model != model_ids.end() && bytes && *bytes != added.content)
      in.fail(field + ".content", in_quotes(added.content) +
                                      " is also the model's token for other bytes: its id would "
                                      "stand for two texts");
    const std::int64_t expected = in_model != model_ids.end() ? in_model->second : next_id++;
    if (added.id != expected)
      in.fail(field + ".id", std::to_string(added.id) + " for " + in_quotes(added.content) +
                                 ", but tokenizers gives it " + std::to_string(expected) +
                                 " (a vocabulary token keeps its id; others follow the vocabulary "
                                 "in order)");
    if (in_model == model_ids.end())
      if (const auto clash = model_tokens.find(added.id); clash != model_tokens.end())
        in.fail(field + ".id", std::to_string(added.id) + " is also the id of model token " +
                                   in_quotes(clash->second));
    out->push_back(std::move(added));
  }
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(std::string_view json_text, const std::string& source) {
  TN_CHECK_AS(DataError, json_text.rfind("\xEF\xBB\xBF", 0) != 0, "tokenizer '", source,
              "': starts with a byte order mark, which is not JSON (tokenizers refuses it too)");
  std::string why;
  const std::optional<Json> parsed = parse_strict_json(std::string(json_text), &why);
  TN_CHECK_AS(DataError, parsed.has_value(), "tokenizer '", source, "': not valid JSON: ", why);
  const Json& root = *parsed;
  const FieldReader in(source);
  in.need_object(root, "the file");
  in.only_keys(root,
               {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                "post_processor", "decoder", "model"},
               "");
  if (const Json* version = FieldReader::given(root, "version");
      version != nullptr && *version != "1.0")
    in.fail("version", "expected \"1.0\", got " + describe_json(*version));
  check_model_kind(in, root);
  for (const char* key : {"truncation", "padding", "normalizer"})
    if (const Json* value = FieldReader::given(root, key))
      in.fail(key, "must be null (this reader encodes without one), got " + describe_json(*value));

  auto state = std::make_unique<State>();
  state->source = source;
  const std::string pattern = read_pre_tokenizer(in, root);
  state->regex.emplace(pattern, "tokenizer '" + source + "': pre-tokenizer pattern");
  state->pre_tokenizer_json = ordered(root["pre_tokenizer"]);
  if (const Json* processor = FieldReader::given(root, "post_processor")) {
    bool seen_template = false;
    read_post_processor(in, *processor, "post_processor", &state->special_token_template,
                        &seen_template);
    state->post_processor_json = ordered(*processor);
  }
  const Json* decoder = FieldReader::given(root, "decoder");
  if (decoder == nullptr)
    in.fail("decoder", "missing: a byte-level BPE needs the ByteLevel decoder");
  if (const std::string type = in.type_of(*decoder, "decoder"); type != "ByteLevel")
    in.fail("decoder.type", in_quotes(type) + " is not supported (this reader decodes ByteLevel)");
  state->decoder_json = ordered(*decoder);

  std::unordered_map<std::string, std::int32_t> model_ids;
  std::map<std::int32_t, std::string> model_tokens;
  read_model(in, root, state.get(), &model_ids, &model_tokens);
  read_added_tokens(in, root, model_ids, model_tokens, &state->added_tokens);

  std::int64_t largest = model_tokens.empty() ? -1 : model_tokens.rbegin()->first;
  for (const BpeAddedToken& token : state->added_tokens)
    largest = std::max<std::int64_t>(largest, token.id);
  const auto count = static_cast<std::int64_t>(model_tokens.size() + state->added_tokens.size());
  if (largest >= 2 * count + kGapAllowance)
    in.fail("model.vocab", "ids reach " + std::to_string(largest) + " for " +
                               std::to_string(count) +
                               " tokens (this reader takes ids with few gaps)");
  state->model_tokens.assign(static_cast<std::size_t>(largest + 1), std::string());
  state->in_model.assign(static_cast<std::size_t>(largest + 1), false);
  for (auto& [id, token] : model_tokens) {
    state->model_tokens[static_cast<std::size_t>(id)] = token;
    state->in_model[static_cast<std::size_t>(id)] = true;
  }
  state->index();
  const SpecialTokenTemplate& added = state->special_token_template;
  for (const auto* ids : {&added.before, &added.after})
    for (const std::int32_t id : *ids)
      if (static_cast<std::size_t>(id) >= state->known.size() || !state->known[id])
        in.fail("post_processor",
                "the template adds id " + std::to_string(id) + ", which no token of the file has");
  return BpeTokenizer(std::move(state));
}

OrderedJson gpt2_pre_tokenizer_json() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", true}};
}

OrderedJson gpt2_post_processor_json() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", true},
          {"trim_offsets", false},
          {"use_regex", true}};
}

OrderedJson llama3_pre_tokenizer_json() {
  const OrderedJson split = {{"type", "Split"},
                             {"pattern", {{"Regex", kLlama3Pattern}}},
                             {"behavior", "Isolated"},
                             {"invert", false}};
  const OrderedJson byte_level = {{"type", "ByteLevel"},
                                  {"add_prefix_space", false},
                                  {"trim_offsets", true},
                                  {"use_regex", false}};
  return {{"type", "Sequence"}, {"pretokenizers", OrderedJson::array({split, byte_level})}};
}

OrderedJson llama3_post_processor_json(std::int32_t begin) {
  const std::string name = "<|begin_of_text|>";
  const OrderedJson special = {{"SpecialToken", {{"id", name}, {"type_id", 0}}}};
  const auto text = [](const char* id, int type_id) {
    return OrderedJson{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
  };
  const OrderedJson template_json = {
      {"type", "TemplateProcessing"},
      {"single", OrderedJson::array({special, text("A", 0)})},
      {"pair", OrderedJson::array({special, text("A", 0), special, text("B", 1)})},
      {"special_tokens",
       {{name,
         {{"id", name},
          {"ids", OrderedJson::array({begin})},
          {"tokens", OrderedJson::array({name})}}}}}};
  return {{"type", "Sequence"},
          {"processors", OrderedJson::array({gpt2_post_processor_json(), template_json})}};
}

OrderedJson gpt2_decoder_json() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", true},
          {"trim_offsets", true},
          {"use_regex", true}};
}

std::string BpeTokenizer::to_json() const {
  const State& s = *state_;
  OrderedJson added = OrderedJson::array();
  for (const BpeAddedToken& token : s.added_tokens)
    added.push_back({{"id", token.id},
                     {"content", token.content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", token.normalized},
                     {"special", token.special}});
  // Appended in id order without a search per key (an ordered object's insert is linear).
  OrderedJson vocab = OrderedJson::object();
  auto& items =
      static_cast<OrderedJson::object_t::Container&>(vocab.get_ref<OrderedJson::object_t&>());
  items.reserve(s.model_tokens.size());
  for (std::size_t id = 0; id < s.model_tokens.size(); ++id)
    if (s.in_model[id]) items.emplace_back(s.model_tokens[id], static_cast<std::int32_t>(id));
  OrderedJson merges = OrderedJson::array();
  for (const State::Merge& merge : s.merges)
    merges.push_back({s.model_tokens[static_cast<std::size_t>(merge.left)],
                      s.model_tokens[static_cast<std::size_t>(merge.right)]});
  OrderedJson model = {
      {"type", "BPE"},
      {"dropout", nullptr},
      {"unk_token", s.unk_token ? OrderedJson(*s.unk_token) : OrderedJson(nullptr)},
      {"continuing_subword_prefix", nullptr},
      {"end_of_word_suffix", nullptr},
      {"fuse_unk", s.fuse_unk},
      {"byte_fallback", false},
      {"ignore_merges", s.ignore_merges}};
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);
  OrderedJson root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  root["added_tokens"] = std::move(added);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = s.pre_tokenizer_json;
  root["post_processor"] = s.post_processor_json;
  root["decoder"] = s.decoder_json;
  root["model"] = std::move(model);
  return ternion::json_text(root, 2) + "\n";
}

}  // namespace ternion
