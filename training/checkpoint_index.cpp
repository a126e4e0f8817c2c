#include "training/checkpoint_index.h"

#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "framework/error.h"
#include "framework/read_file.h"
#include "framework/strict_json.h"
#include "layers/model_family.h"

namespace ternion {

namespace {

// Bounds that no real checkpoint reaches, so that products and sums of checked values cannot
// overflow: 2^40 elements along a dimension, 2^50 in a tensor, at most 8 dimensions.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;
constexpr std::int64_t kMaxElements = std::int64_t{1} << 50;
constexpr std::size_t kMaxDims = 8;
constexpr std::int64_t kMaxStep = std::int64_t{1} << 62;
constexpr std::int64_t kMaxRanks = std::int64_t{1} << 24;

// Reads the fields of one JSON object of one file; `where` prefixes the field names in
// messages ("pieces[3]." for a piece).
class FieldReader {
 public:
  FieldReader(const std::string& file, const Json& object, std::string where)
      : file_(file), object_(object), where_(std::move(where)) {
    if (!object_.is_object())
      TN_THROW(CheckpointError, "checkpoint file '", file_, "': ",
               where_.empty() ? "the file" : "field '" + where_.substr(0, where_.size() - 1) + "'",
               " must be a JSON object, got ", describe_json(object_));
  }

  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    TN_THROW(CheckpointError, "checkpoint file '", file_, "': field '", where_, key, "' ", why);
  }

  bool has(const char* key) const { return object_.contains(key); }

  const Json& node(const char* key) const {
    const auto it = object_.find(key);
    if (it == object_.end()) refuse(key, "is missing");
    return *it;
  }

  std::string string(const char* key) const {
    const Json& value = node(key);
    if (!value.is_string() || value.get_ref<const std::string&>().empty())
      refuse(key, "must be a non-empty string, got " + describe_json(value));
    return value.get<std::string>();
  }

  std::int64_t integer(const char* key, std::int64_t min, std::int64_t max) const {
    return integer_of(node(key), key, min, max);
  }

  std::int64_t integer_of(const Json& value, const std::string& key, std::int64_t min,
                          std::int64_t max) const {
    const std::optional<std::int64_t> fits = json_int64(value);
    if (!fits) refuse(key, "must be an integer, got " + describe_json(value));
    const std::int64_t number = *fits;
    if (number < min || number > max) {
      // The bounds no real checkpoint reaches are left out of the message.
      const std::string range =
          max < kMaxExtent ? "from " + std::to_string(min) + " to " + std::to_string(max)
          : min == 0       ? "non-negative"
                           : "at least " + std::to_string(min);
      refuse(key, "must be " + range + ", got " + std::to_string(number));
    }
    return number;
  }

  // A list of 1 to kMaxDims extents, each at least 1, of at most kMaxElements in all.
  Shape shape(const char* key) const {
    const Json& value = node(key);
    if (!value.is_array() || value.empty() || value.size() > kMaxDims)
      refuse(key, "must be a list of 1 to " + std::to_string(kMaxDims) + " extents, got " +
                      describe_json(value));
    Shape shape;
    std::int64_t elements = 1;
    for (std::size_t d = 0; d < value.size(); ++d) {
      const std::int64_t extent =
          integer_of(value[d], std::string(key) + "[" + std::to_string(d) + "]", 1, kMaxExtent);
      if (elements > kMaxElements / extent)
        refuse(key, "has more than " + std::to_string(kMaxElements) + " elements");
      elements *= extent;
      shape.push_back(extent);
    }
    return shape;
  }

 private:
  const std::string& file_;
  const Json& object_;
  std::string where_;
};

Json parse_file(const std::string& path) {
  std::string why;
  const std::optional<std::string> text = read_whole_file(path, why);
  if (!text) TN_THROW(CheckpointError, "cannot read checkpoint file '", path, "': ", why);
  std::optional<Json> root = parse_strict_json(*text, &why);
  if (!root) TN_THROW(CheckpointError, "checkpoint file '", path, "' is not valid JSON: ", why);
  return std::move(*root);
}

CheckpointPiece read_piece(const std::string& path, const Json& node, std::size_t i) {
  const FieldReader f(path, node, "pieces[" + std::to_string(i) + "].");
  CheckpointPiece p;
  p.tensor = f.string("tensor");
  p.key = f.string("key");
  p.global_shape = f.shape("global_shape");
  p.local_shape = f.shape("local_shape");
  const auto dims = static_cast<std::int64_t>(p.global_shape.size());
  if (static_cast<std::int64_t>(p.local_shape.size()) != dims)
    f.refuse("local_shape", shape_str(p.local_shape) + " has another number of dimensions than " +
                                "global_shape " + shape_str(p.global_shape));
  p.shard_dim = f.integer("shard_dim", -1, dims - 1);
  p.shard_offset = f.integer("shard_offset", 0, kMaxExtent);
  // The shard must lie within the tensor: equal to it outside shard_dim, and along shard_dim
  // [shard_offset, shard_offset + local extent) within the global extent.
  for (std::int64_t d = 0; d < dims; ++d) {
    const std::int64_t local = p.local_shape[d], global = p.global_shape[d];
    if (d != p.shard_dim && local != global)
      f.refuse("local_shape", shape_str(p.local_shape) + " differs from global_shape " +
                                  shape_str(p.global_shape) + " in dimension " +
                                  std::to_string(d) + ", which is not shard_dim " +
                                  std::to_string(p.shard_dim));
    if (d == p.shard_dim && p.shard_offset + local > global)
      f.refuse("shard_offset", std::to_string(p.shard_offset) + " + local_shape[" +
                                   std::to_string(d) + "] = " + std::to_string(local) +
                                   " runs past global_shape[" + std::to_string(d) + "] = " +
                                   std::to_string(global));
  }
  if (p.shard_dim < 0 && p.shard_offset != 0)
    f.refuse("shard_offset", "must be 0 for an unsharded tensor (shard_dim -1), got " +
                                 std::to_string(p.shard_offset));
  const std::int64_t elements = shape_numel(p.local_shape);
  p.begin = f.integer("begin", 0, elements);
  p.end = f.integer("end", p.begin, elements);
  p.crc = static_cast<std::uint32_t>(
      f.integer("crc32", 0, std::numeric_limits<std::uint32_t>::max()));
  return p;
}

}  // namespace

std::vector<std::pair<std::string, std::int64_t>> checkpoint_model_sizes(const ModelConfig& m) {
  // Whether the LM head is the embedding decides whether there is an lm_head tensor at all.
  const std::int64_t tied = model_family(m.family).ties_embeddings(m) ? 1 : 0;
  return {{"vocab_size", m.vocab_size}, {"vocab_pad_multiple", m.vocab_pad_multiple},
          {"seq_len", m.seq_len},       {"n_layer", m.n_layer},
          {"n_head", m.n_head},         {"d_model", m.d_model},
          {"d_ff", m.ff_width()},       {"n_kv_head", m.kv_heads()},
          {"tie_embeddings", tied}};
}

std::string checkpoint_meta_json(const CheckpointMeta& meta) {
  OrderedJson root = {{"format", kCheckpointFormat},
               {"step", meta.step},
               {"updates", meta.updates},
               {"ranks", meta.ranks},
               {"optimizer", meta.optimizer},
               {"family", meta.family}};
  if (!meta.block.empty()) root["block"] = meta.block;
  OrderedJson& model = root["model"] = OrderedJson::object();
  for (const auto& [key, value] : meta.model) model[key] = value;
  // Written as JSON numbers with a double's round trip, so a resume compares them exactly.
  OrderedJson& settings = root["model_settings"] = OrderedJson::object();
  for (const auto& [key, value] : meta.settings) settings[key] = value;
  return json_text(root) + "\n";
}

// One piece a line, for a person reading the index.
std::string rank_index_json(int rank, const std::vector<CheckpointPiece>& pieces) {
  std::string out = json_text(OrderedJson{{"rank", rank}});
  out.pop_back();  // the object stays open for the pieces
  out += ",\"pieces\":[";
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const CheckpointPiece& p = pieces[i];
    const OrderedJson piece = {{"tensor", p.tensor},          {"key", p.key},
                        {"global_shape", p.global_shape}, {"local_shape", p.local_shape},
                        {"shard_dim", p.shard_dim},     {"shard_offset", p.shard_offset},
                        {"begin", p.begin},             {"end", p.end},
                        {"crc32", p.crc}};
    out += (i ? ",\n  " : "\n  ") + json_text(piece);
  }
  return out + "\n]}\n";
}

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  const Json root = parse_file(path);
  const FieldReader f(path, root, "");
  if (f.string("format") != kCheckpointFormat)
    f.refuse("format",
             "is not \"" + std::string(kCheckpointFormat) + "\": not a Ternion checkpoint");
  CheckpointMeta meta;
  meta.step = f.integer("step", 0, kMaxStep);
  meta.updates = f.has("updates") ? f.integer("updates", 0, meta.step) : meta.step;
  meta.ranks = static_cast<int>(f.integer("ranks", 1, kMaxRanks));
  if (f.has("optimizer")) meta.optimizer = f.string("optimizer");
  if (f.has("family")) meta.family = f.string("family");
  if (f.has("block")) meta.block = f.string("block");
  const FieldReader model(path, f.node("model"), "model.");
  // tie_embeddings is 0 or 1; the vocabulary's padding multiple divides.
  for (const auto& [key, value] : f.node("model").items())
    meta.model.emplace_back(
        key, model.integer_of(value, key, key == "vocab_pad_multiple" ? 1 : 0, kMaxExtent));
  if (f.has("model_settings")) {
    const FieldReader settings(path, f.node("model_settings"), "model_settings.");
    for (const auto& [key, value] : f.node("model_settings").items()) {
      if (!value.is_number()) settings.refuse(key, "must be a number, got " + describe_json(value));
      meta.settings.emplace_back(key, value.get<double>());
    }
  }
  return meta;
}

std::vector<CheckpointPiece> read_rank_index(const std::string& path, int rank) {
  const Json root = parse_file(path);
  const FieldReader f(path, root, "");
  // A file copied or renamed from another rank's would load that rank's pieces as this one's.
  const std::int64_t saved = f.integer("rank", 0, kMaxRanks - 1);
  if (saved != rank)
    f.refuse("rank",
             "is " + std::to_string(saved) + " in the index of rank " + std::to_string(rank));
  const Json& list = f.node("pieces");
  if (!list.is_array()) f.refuse("pieces", "must be a list, got " + describe_json(list));
  std::vector<CheckpointPiece> pieces;
  for (std::size_t i = 0; i < list.size(); ++i) pieces.push_back(read_piece(path, list[i], i));
  return pieces;
}

}  // namespace ternion
