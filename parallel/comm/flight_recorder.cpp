#include "parallel/comm/flight_recorder.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "framework/error.h"
#include "framework/strict_json.h"

namespace ternion {

namespace {
using json = nlohmann::json;
constexpr const char* kFormat = "ternion-flight-record";
// 2: collectives and sends/receives numbered apart, each operation naming its sequence;
// 3: each group's counts of both.
constexpr int kVersion = 3;
}  // namespace

const char* flight_state_name(FlightState state) {
  switch (state) {
    case FlightState::issued: return "issued";
    case FlightState::started: return "started";
    case FlightState::completed: return "completed";
    case FlightState::failed: return "failed";
  }
  return "?";
}

const char* flight_sequence_name(FlightSequence sequence) {
  switch (sequence) {
    case FlightSequence::collective: return "collective";
    case FlightSequence::point_to_point: return "point_to_point";
  }
  return "?";
}

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

FlightRecorder& FlightRecorder::instance() {
  static FlightRecorder* recorder = new FlightRecorder();  // leaked: used until exit
  return *recorder;
}

int FlightRecorder::register_group(std::string name, std::vector<int> members) {
  std::lock_guard lock(mutex_);
  groups_.push_back({std::move(name), std::move(members)});
  return static_cast<int>(groups_.size() - 1);
}

std::uint64_t FlightRecorder::issued(int group, FlightSequence sequence, std::string kind,
                                     std::int64_t bytes, std::vector<int> peers) {
  const double now = unix_time_now();
  std::lock_guard lock(mutex_);
  TN_CHECK(group >= 0 && group < static_cast<int>(groups_.size()), "flight group ", group);
  const std::uint64_t id = next_id_++;
  FlightEntry& e = ring_[id % kCapacity];
  e.id = id;
  e.group = group;
  e.sequence = sequence;
  FlightGroup& g = groups_[static_cast<std::size_t>(group)];
  e.seq = ++(sequence == FlightSequence::collective ? g.collectives : g.point_to_point);
  e.kind = std::move(kind);
  e.bytes = bytes;
  e.peers = std::move(peers);
  e.state = FlightState::issued;
  e.issued_s = now;
  e.started_s = e.ended_s = -1;
  e.error.clear();
  return id;
}

FlightEntry* FlightRecorder::find(std::uint64_t id) {
  FlightEntry& e = ring_[id % kCapacity];
  return e.id == id ? &e : nullptr;
}

void FlightRecorder::started(std::uint64_t id) {
  const double now = unix_time_now();
  std::lock_guard lock(mutex_);
  if (FlightEntry* e = find(id)) {
    e->state = FlightState::started;
    e->started_s = now;
  }
}

void FlightRecorder::ended(std::uint64_t id, const std::string& error) {
  const double now = unix_time_now();
  std::lock_guard lock(mutex_);
  if (FlightEntry* e = find(id)) {
    e->state = error.empty() ? FlightState::completed : FlightState::failed;
    e->ended_s = now;
    e->error = error;
  }
}

FlightEntry FlightRecorder::oldest_unfinished() const {
  std::lock_guard lock(mutex_);
  const std::uint64_t first = next_id_ > kCapacity ? next_id_ - kCapacity : 1;
  for (std::uint64_t id = first; id < next_id_; ++id) {
    const FlightEntry& e = ring_[id % kCapacity];
    if (e.id == id && (e.state == FlightState::issued || e.state == FlightState::started)) return e;
  }
  return FlightEntry{};
}

FlightGroup FlightRecorder::group(int index) const {
  std::lock_guard lock(mutex_);
  return groups_.at(static_cast<std::size_t>(index));
}

FlightRecord FlightRecorder::snapshot(int rank, int world_size, std::string reason,
                                      double timeout_s) const {
  FlightRecord record;
  record.rank = rank;
  record.world_size = world_size;
  record.reason = std::move(reason);
  record.written_s = unix_time_now();
  record.timeout_s = timeout_s;
  std::lock_guard lock(mutex_);
  record.groups = groups_;
  const std::uint64_t first = next_id_ > kCapacity ? next_id_ - kCapacity : 1;
  for (std::uint64_t id = first; id < next_id_; ++id)
    if (ring_[id % kCapacity].id == id) record.entries.push_back(ring_[id % kCapacity]);
  return record;
}

std::string flight_record_json(const FlightRecord& r) {
  json groups = json::array();
  for (const FlightGroup& g : r.groups)
    groups.push_back({{"name", g.name},
                      {"members", g.members},
                      {"collectives", g.collectives},
                      {"point_to_point", g.point_to_point}});
  json entries = json::array();
  for (const FlightEntry& e : r.entries) {
    json entry = {{"id", e.id},
                  {"group", e.group},
                  {"sequence", flight_sequence_name(e.sequence)},
                  {"seq", e.seq},
                  {"kind", e.kind},
                  {"bytes", e.bytes},
                  {"peers", e.peers},
                  {"state", flight_state_name(e.state)},
                  {"issued_s", e.issued_s},
                  {"started_s", e.started_s},
                  {"ended_s", e.ended_s}};
    if (!e.error.empty()) entry["error"] = e.error;
    entries.push_back(std::move(entry));
  }
  const json doc = {{"format", kFormat},     {"version", kVersion},
                    {"rank", r.rank},        {"world_size", r.world_size},
                    {"reason", r.reason},    {"written_s", r.written_s},
                    {"timeout_s", r.timeout_s}, {"groups", groups},
                    {"operations", entries}};
  return doc.dump(1) + "\n";
}

namespace {
// An integer that fits an int64, or a CommError naming the field (a float such as 1e74 would
// be undefined behaviour to convert).
std::int64_t integer(const json& value, const std::string& path, const char* field) {
  const std::optional<std::int64_t> wide = json_int64(value);
  TN_CHECK_AS(CommError, wide.has_value(), "'", path, "': ", field, " ", describe_json(value),
              " is not an integer of 64 bits");
  return *wide;
}

// As `integer`, not negative.
std::uint64_t count(const json& value, const std::string& path, const char* field) {
  const std::int64_t n = integer(value, path, field);
  TN_CHECK_AS(CommError, n >= 0, "'", path, "': ", field, " ", n, " is negative");
  return static_cast<std::uint64_t>(n);
}

// An integer read wide and refused past int, where get<int>() would wrap it into range.
int int_field(const json& value, const std::string& path, const char* field) {
  const std::int64_t wide = integer(value, path, field);
  TN_CHECK_AS(CommError, wide >= std::numeric_limits<int>::min() &&
                             wide <= std::numeric_limits<int>::max(),
              "'", path, "': ", field, " ", wide, " is out of range");
  return static_cast<int>(wide);
}

std::vector<int> int_list(const json& value, const std::string& path, const char* field) {
  TN_CHECK_AS(CommError, value.is_array(), "'", path, "': the ", field, "s are ",
              describe_json(value), ", not a list");
  std::vector<int> list;
  for (const json& item : value) list.push_back(int_field(item, path, field));
  return list;
}

// `object`'s field `key`, or a CommError naming the field and what holds it (`where`).
const json& field(const json& object, const char* key, const std::string& path,
                  const std::string& where) {
  TN_CHECK_AS(CommError, object.is_object(), "'", path, "': ", where, " ",
              describe_json(object), " is not an object");
  const auto found = object.find(key);
  TN_CHECK_AS(CommError, found != object.end(), "'", path, "': ", where, " has no field '", key,
              "'");
  return *found;
}

std::string text_field(const json& object, const char* key, const std::string& path,
                       const std::string& where) {
  const json& value = field(object, key, path, where);
  TN_CHECK_AS(CommError, value.is_string(), "'", path, "': ", where, "'s ", key, " ",
              describe_json(value), " is not text");
  return value.get<std::string>();
}

double seconds_field(const json& object, const char* key, const std::string& path,
                     const std::string& where) {
  const json& value = field(object, key, path, where);
  TN_CHECK_AS(CommError, value.is_number(), "'", path, "': ", where, "'s ", key, " ",
              describe_json(value), " is not a number");
  return value.get<double>();
}

const json& list_field(const json& object, const char* key, const std::string& path) {
  const json& value = field(object, key, path, "the record");
  TN_CHECK_AS(CommError, value.is_array(), "'", path, "': ", key, " is ", describe_json(value),
              ", not a list");
  return value;
}
}  // namespace

void check_flight_record(const FlightRecord& r, const std::string& where) {
  // Times are seconds since 1970 (or -1, not yet): a report subtracts and prints them.
  auto check_time = [&](double t, const std::string& what) {
    TN_CHECK_AS(CommError, std::isfinite(t) && std::abs(t) <= kMaxFlightSeconds, where, ": ",
                what, " ", t, " is not a time in seconds");
  };
  check_time(r.written_s, "written_s");
  check_time(r.timeout_s, "timeout_s");
  for (const FlightEntry& e : r.entries) {
    const std::string op = "operation " + std::to_string(e.id) + "'s ";
    check_time(e.issued_s, op + "issued_s");
    check_time(e.started_s, op + "started_s");
    check_time(e.ended_s, op + "ended_s");
  }
  TN_CHECK_AS(CommError, r.world_size >= 1 && r.world_size <= kMaxFlightRanks, where,
              ": world_size ", r.world_size, " is not from 1 to ", kMaxFlightRanks, " ranks");
  TN_CHECK_AS(CommError, r.rank >= 0 && r.rank < r.world_size, where, ": rank ", r.rank, " of ",
              r.world_size);
  for (const FlightGroup& g : r.groups) {
    TN_CHECK_AS(CommError, !g.members.empty(), where, ": group '", g.name, "' has no members");
    for (int m : g.members)
      TN_CHECK_AS(CommError, m >= 0 && m < r.world_size, where, ": group '", g.name,
                  "' names rank ", m, " of ", r.world_size);
    std::vector<int> sorted = g.members;
    std::sort(sorted.begin(), sorted.end());
    const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
    TN_CHECK_AS(CommError, twice == sorted.end(), where, ": group '", g.name, "' names rank ",
                twice == sorted.end() ? 0 : *twice, " twice");
  }
  for (const FlightEntry& e : r.entries) {
    TN_CHECK_AS(CommError, e.group >= 0 && e.group < static_cast<int>(r.groups.size()), where,
                ": operation ", e.id, " names group ", e.group, " of ", r.groups.size());
    for (int p : e.peers)
      TN_CHECK_AS(CommError, p >= 0 && p < r.world_size, where, ": operation ", e.id,
                  " names peer rank ", p, " of ", r.world_size);
  }
}

FlightRecord parse_flight_record(const std::string& text, const std::string& path) {
  try {
    std::string why;
    const std::optional<Json> parsed = parse_strict_json(text, &why);
    TN_CHECK_AS(CommError, parsed.has_value(), "'", path, "' is not a readable flight record: ",
                why);
    const Json& doc = *parsed;
    const bool ours = doc.is_object() && doc.contains("format") && doc.contains("version") &&
                      doc["format"] == kFormat;
    TN_CHECK_AS(CommError, ours,
                "'", path, "' is not a ternion flight record (format ", kFormat, " version ",
                kVersion, ")");
    // Another version numbers its operations otherwise: compared with ours they would name
    // the wrong rank.
    const std::optional<std::int64_t> version = json_int64(doc["version"]);
    TN_CHECK_AS(CommError, version == kVersion, "'", path, "' is a flight record of version ",
                version ? std::to_string(*version) : describe_json(doc["version"]),
                ", this build reads version ", kVersion,
                ": read it with the ternion-hang-report of the build that wrote it");
    const std::string record = "the record";
    FlightRecord r;
    r.rank = int_field(field(doc, "rank", path, record), path, "rank");
    r.world_size = int_field(field(doc, "world_size", path, record), path, "world_size");
    r.reason = text_field(doc, "reason", path, record);
    r.written_s = seconds_field(doc, "written_s", path, record);
    r.timeout_s = seconds_field(doc, "timeout_s", path, record);
    for (const json& g : list_field(doc, "groups", path)) {
      const std::string group = "group " + std::to_string(r.groups.size());
      r.groups.push_back({text_field(g, "name", path, group),
                          int_list(field(g, "members", path, group), path, "member"),
                          count(field(g, "collectives", path, group), path, "collectives"),
                          count(field(g, "point_to_point", path, group), path, "point_to_point")});
    }
    for (const json& o : list_field(doc, "operations", path)) {
      const std::string op = "operation " + std::to_string(r.entries.size() + 1) + " of the list";
      FlightEntry e;
      e.id = count(field(o, "id", path, op), path, "id");
      e.group = int_field(field(o, "group", path, op), path, "group");
      const std::string sequence = text_field(o, "sequence", path, op);
      bool known_sequence = false;
      for (FlightSequence s : {FlightSequence::collective, FlightSequence::point_to_point})
        if (sequence == flight_sequence_name(s)) e.sequence = s, known_sequence = true;
      TN_CHECK_AS(CommError, known_sequence, "'", path, "': operation ", e.id, " has sequence '",
                  sequence, "'");
      e.seq = count(field(o, "seq", path, op), path, "seq");
      e.kind = text_field(o, "kind", path, op);
      e.bytes = static_cast<std::int64_t>(count(field(o, "bytes", path, op), path, "bytes"));
      e.peers = int_list(field(o, "peers", path, op), path, "peer");
      const std::string state = text_field(o, "state", path, op);
      bool known = false;
      for (FlightState s : {FlightState::issued, FlightState::started, FlightState::completed,
                            FlightState::failed})
        if (state == flight_state_name(s)) e.state = s, known = true;
      TN_CHECK_AS(CommError, known, "'", path, "': operation ", e.id, " has state '", state, "'");
      e.issued_s = seconds_field(o, "issued_s", path, op);
      e.started_s = seconds_field(o, "started_s", path, op);
      e.ended_s = seconds_field(o, "ended_s", path, op);
      if (o.contains("error")) e.error = text_field(o, "error", path, op);
      r.entries.push_back(std::move(e));
    }
    check_flight_record(r, "'" + path + "'");
    return r;
  } catch (const json::exception& e) {
    TN_THROW(CommError, "'", path, "' is not a readable flight record: ", e.what());
  }
}

std::string write_flight_record(const std::string& dir, const FlightRecord& record) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/rank_" + std::to_string(record.rank) + ".json";
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << flight_record_json(record);
    TN_CHECK_AS(CommError, out.good(), "writing the flight record '", partial, "' failed");
  }
  std::filesystem::rename(partial, path);
  return path;
}

}  // namespace ternion
