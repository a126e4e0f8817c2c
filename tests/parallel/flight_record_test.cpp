// The flight recorder and the hang report on records made by hand: what a rank keeps, the
// JSON it writes and reads back, and which rank the report names in each kind of hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "framework/error.h"
#include "framework/strict_json.h"
#include "parallel/comm/flight_recorder.h"
#include "parallel/comm/hang_report.h"

namespace ternion {
namespace {

constexpr FlightSequence kCollective = FlightSequence::collective;
constexpr FlightSequence kPointToPoint = FlightSequence::point_to_point;

TEST(FlightRecorder, NumbersEachGroupsOperationsAndKeepsTheNewest) {
  FlightRecorder& recorder = FlightRecorder::instance();
  const int a = recorder.register_group("tp[0,1]", {0, 1});
  const int b = recorder.register_group("dp[0,2]", {0, 2});
  const std::uint64_t first = recorder.issued(a, kCollective, "all_reduce", 64, {});
  const std::uint64_t second = recorder.issued(b, kPointToPoint, "send", 32, {2});
  const std::uint64_t third = recorder.issued(a, kCollective, "all_gather", 16, {});
  recorder.started(first);
  recorder.ended(first);
  recorder.started(second);
  recorder.ended(third, "peer gone");
  const FlightEntry oldest = recorder.oldest_unfinished();
  EXPECT_EQ(oldest.id, second);
  EXPECT_EQ(oldest.state, FlightState::started);
  const FlightRecord record = recorder.snapshot(0, 3, "test", 5.0);
  ASSERT_GE(record.entries.size(), 3u);
  const FlightEntry& e1 = record.entries[record.entries.size() - 3];
  const FlightEntry& e3 = record.entries.back();
  EXPECT_EQ(e1.seq + 1, e3.seq);  // group a's first and second
  EXPECT_EQ(e1.state, FlightState::completed);
  EXPECT_EQ(e3.state, FlightState::failed);
  EXPECT_EQ(e3.error, "peer gone");
  EXPECT_EQ(record.entries[record.entries.size() - 2].peers, std::vector<int>{2});

  // Past its capacity the ring keeps the newest operations.
  for (std::size_t i = 0; i < FlightRecorder::kCapacity + 10; ++i)
    recorder.ended(recorder.issued(b, kCollective, "barrier", 0, {}));
  const FlightRecord full = recorder.snapshot(0, 3, "test", 5.0);
  EXPECT_EQ(full.entries.size(), FlightRecorder::kCapacity);
  EXPECT_EQ(full.entries.back().kind, "barrier");
  EXPECT_EQ(recorder.oldest_unfinished().id, 0u);  // the started send was dropped with the ring
  // The groups' counts outlive their entries: group a's two are gone from the ring.
  for (const FlightEntry& e : full.entries) EXPECT_NE(e.group, a);
  EXPECT_EQ(full.groups[static_cast<std::size_t>(a)].collectives, 2u);
  EXPECT_EQ(full.groups[static_cast<std::size_t>(b)].collectives, FlightRecorder::kCapacity + 10);
  EXPECT_EQ(full.groups[static_cast<std::size_t>(b)].point_to_point, 1u);
}

// A middle pipeline stage sends and receives twice as often as the ends: numbered with its
// collectives, the same all-reduce would be a different number on each.
TEST(FlightRecorder, NumbersCollectivesApartFromSendsAndReceives) {
  FlightRecorder& recorder = FlightRecorder::instance();
  const int pp = recorder.register_group("pp[0,1]", {0, 1});
  for (const auto& [sequence, kind] :
       std::vector<std::pair<FlightSequence, const char*>>{{kPointToPoint, "recv"},
                                                           {kPointToPoint, "send"},
                                                           {kCollective, "all_reduce"},
                                                           {kPointToPoint, "exchange"},
                                                           {kCollective, "barrier"}})
    recorder.ended(recorder.issued(pp, sequence, kind, 8, {}));
  const FlightRecord record = recorder.snapshot(0, 2, "test", 5.0);
  std::vector<std::pair<FlightSequence, std::uint64_t>> numbers;
  for (const FlightEntry& e : record.entries)
    if (e.group == pp) numbers.emplace_back(e.sequence, e.seq);
  EXPECT_EQ(numbers, (std::vector<std::pair<FlightSequence, std::uint64_t>>{
                         {kPointToPoint, 1}, {kPointToPoint, 2}, {kCollective, 1},
                         {kPointToPoint, 3}, {kCollective, 2}}));
}

TEST(FlightRecorder, RecordsReadBackFromTheirJson) {
  FlightRecord r;
  r.rank = 1;
  r.world_size = 2;
  r.reason = "timeout: all_reduce #3 on group 'world'";
  r.written_s = 1000.5;
  r.timeout_s = 5;
  r.groups = {{"world", {0, 1}, 3, 5}};
  FlightEntry e;
  e.id = 7;
  e.group = 0;
  e.seq = 3;
  e.kind = "all_reduce";
  e.bytes = 128;
  e.state = FlightState::started;
  e.issued_s = 990.25;
  e.started_s = 990.5;
  FlightEntry send = e;
  send.id = 8;
  send.sequence = FlightSequence::point_to_point;
  send.seq = 5;
  send.kind = "send";
  send.peers = {0};
  r.entries = {e, send};
  const FlightRecord back = parse_flight_record(flight_record_json(r), "rank_1.json");
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.reason, r.reason);
  EXPECT_EQ(back.groups[0].members, (std::vector<int>{0, 1}));
  EXPECT_EQ(back.groups[0].collectives, 3u);
  EXPECT_EQ(back.groups[0].point_to_point, 5u);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[0].sequence, FlightSequence::collective);
  EXPECT_EQ(back.entries[0].seq, 3u);
  EXPECT_EQ(back.entries[1].sequence, FlightSequence::point_to_point);
  EXPECT_EQ(back.entries[1].seq, 5u);
  EXPECT_EQ(back.entries[0].state, FlightState::started);
  EXPECT_DOUBLE_EQ(back.entries[0].issued_s, 990.25);
  EXPECT_THROW(parse_flight_record("{\"format\": \"other\"}", "x.json"), CommError);
  EXPECT_THROW(parse_flight_record("not json", "x.json"), CommError);
  // Version 1 numbered every operation on a group with one counter: compared with this
  // version's numbers it would name the wrong rank, so it is refused, naming the file.
  std::string old = flight_record_json(r);
  ASSERT_NE(old.find("\"version\": 3"), std::string::npos) << old;
  old.replace(old.find("\"version\": 3"), 12, "\"version\": 1");
  try {
    parse_flight_record(old, "fl/rank_1.json");
    ADD_FAILURE() << "a record of version 1 was read";
  } catch (const CommError& e) {
    EXPECT_EQ(std::string(e.what()),
              "'fl/rank_1.json' is a flight record of version 1, this build reads version 3: read "
              "it with the ternion-hang-report of the build that wrote it");
  }
  std::string unknown = flight_record_json(r);
  unknown.replace(unknown.find("\"collective\""), 12, "\"ring\"");
  EXPECT_THROW(parse_flight_record(unknown, "x.json"), CommError);
  // Read as strict JSON, as every file of ours is: a key given twice is refused, not resolved.
  std::string twice = flight_record_json(r);
  twice.insert(twice.rfind('}'), ", \"rank\": 0");
  try {
    parse_flight_record(twice, "x.json");
    ADD_FAILURE() << "a record with 'rank' twice was read";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("'x.json' is not a readable flight record"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
  }
}

// The message of the CommError `read` throws, or "" where it throws none.
template <class Read>
std::string refusal(Read read) {
  try {
    read();
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

// A field missing or of the wrong kind is named with what holds it, not as the JSON library's
// own message.
TEST(FlightRecorder, NamesAMissingOrMistypedField) {
  FlightRecord r;
  r.groups = {{"world", {0}}};
  FlightEntry e;
  e.id = 1;
  e.group = 0;
  e.seq = 1;
  e.kind = "barrier";
  r.entries = {e};
  const Json good = Json::parse(flight_record_json(r));
  auto refused = [&](const std::function<void(Json&)>& edit) {
    Json doc = good;
    edit(doc);
    return refusal([&] { parse_flight_record(doc.dump(), "x.json"); });
  };
  EXPECT_EQ(refused([](Json& d) { d["operations"][0].erase("kind"); }),
            "'x.json': operation 1 of the list has no field 'kind'");
  EXPECT_EQ(refused([](Json& d) { d["operations"] = Json::object(); }),
            "'x.json': operations is an object, not a list");
  EXPECT_EQ(refused([](Json& d) { d["groups"][0]["name"] = 7; }),
            "'x.json': group 0's name '7' is not text");
  EXPECT_EQ(refused([](Json& d) { d["written_s"] = "soon"; }),
            "'x.json': the record's written_s 'soon' is not a number");
}

// A record no job writes is refused, naming the file and the field: its ranks index the
// world in the report.
TEST(FlightRecorder, RefusesRecordsThatNameRanksOutsideTheWorld) {
  FlightRecord r;
  r.rank = 0;
  r.world_size = 2;
  r.groups = {{"world", {0, 1}}};
  FlightEntry e;
  e.id = 4;
  e.group = 0;
  e.kind = "send";
  e.peers = {1};
  r.entries = {e};
  auto refused = [&](FlightRecord bad) {
    return refusal([&] { parse_flight_record(flight_record_json(bad), "fl/rank_0.json"); });
  };
  EXPECT_EQ(refused(r), "");
  FlightRecord bad = r;
  bad.groups[0].members = {0, 9};
  EXPECT_EQ(refused(bad), "'fl/rank_0.json': group 'world' names rank 9 of 2");
  bad.groups[0].members = {0, -1};
  EXPECT_EQ(refused(bad), "'fl/rank_0.json': group 'world' names rank -1 of 2");
  bad.groups[0].members = {0, 0};
  EXPECT_EQ(refused(bad), "'fl/rank_0.json': group 'world' names rank 0 twice");
  bad.groups[0].members = {};
  EXPECT_EQ(refused(bad), "'fl/rank_0.json': group 'world' has no members");
  bad = r;
  bad.entries[0].peers = {2};
  EXPECT_EQ(refused(bad), "'fl/rank_0.json': operation 4 names peer rank 2 of 2");
  bad = r;
  bad.world_size = 300000000;
  EXPECT_EQ(refused(bad), "'fl/rank_0.json': world_size 300000000 is not from 1 to 16777216 ranks");
  // A time the report could not subtract and print (a cast of 1e100 s is undefined).
  bad = r;
  bad.written_s = 1.7e100;
  EXPECT_EQ(refused(bad), "'fl/rank_0.json': written_s 1.7e+100 is not a time in seconds");
  bad = r;
  bad.entries[0].ended_s = std::nan("");  // JSON has no NaN: a record made by hand
  EXPECT_EQ(refusal([&] { check_flight_record(bad, "'fl/rank_0.json'"); }),
            "'fl/rank_0.json': operation 4's ended_s nan is not a time in seconds");
  // Past int: read wide, not wrapped into range (2^32 + 2 would read as 2).
  std::string text = flight_record_json(r);
  const std::string field = "\"world_size\": 2";
  ASSERT_NE(text.find(field), std::string::npos) << text;
  text.replace(text.find(field), field.size(), "\"world_size\": 4294967298");
  EXPECT_EQ(refusal([&] { parse_flight_record(text, "fl/rank_0.json"); }),
            "'fl/rank_0.json': world_size 4294967298 is out of range");
  // A number no integer holds (converting it would be undefined behaviour): refused.
  text.replace(text.find("4294967298"), 10, "1e74");
  EXPECT_EQ(refusal([&] { parse_flight_record(text, "fl/rank_0.json"); }),
            "'fl/rank_0.json': world_size '1e+74' is not an integer of 64 bits");
  // Records made by hand are checked too, before the report indexes the world with them.
  bad = r;
  bad.groups[0].members = {0, 9};
  FlightRecord other = r;
  other.rank = 1;
  EXPECT_EQ(refusal([&] { analyse_flight_records({bad, other}); }),
            "the record of rank 0: group 'world' names rank 9 of 2");
}

// A record of `rank` of `world` whose last operations on group `name` are the given ones.
struct Op {
  std::uint64_t seq;
  const char* kind;
  FlightState state;
  std::vector<int> peers = {};
  int group = 0;
};
FlightRecord record_of(int rank, int world, std::vector<FlightGroup> groups, std::vector<Op> ops,
                       double waited_s = 5.0) {
  FlightRecord r;
  r.rank = rank;
  r.world_size = world;
  r.reason = "timeout";
  r.timeout_s = 5;
  r.written_s = 2000;
  r.groups = std::move(groups);
  std::uint64_t id = 1;
  for (const Op& op : ops) {
    FlightEntry e;
    e.id = id++;
    e.group = op.group;
    e.seq = op.seq;
    e.kind = op.kind;
    const std::string kind = op.kind;
    if (kind == "send" || kind == "recv" || kind == "exchange")
      e.sequence = FlightSequence::point_to_point;
    e.peers = op.peers;
    e.state = op.state;
    e.issued_s = r.written_s - waited_s;
    r.entries.push_back(e);
  }
  return r;
}

using S = FlightState;

TEST(HangReport, NamesTheMemberThatHasNotReachedTheCollective) {
  const std::vector<FlightGroup> world = {{"world", {0, 1, 2}}};
  const HangReport report = analyse_flight_records({
      record_of(0, 3, world, {{4, "all_reduce", S::completed}, {5, "all_reduce", S::started}}),
      record_of(1, 3, world, {{4, "all_reduce", S::completed}, {5, "all_reduce", S::started}}),
      record_of(2, 3, world, {{4, "all_reduce", S::completed}}),
  });
  EXPECT_EQ(report.behind, std::vector<int>{2});
  EXPECT_NE(report.lines.back().find("waits in no communication"), std::string::npos)
      << report.lines.back();
}

TEST(HangReport, NamesTheRankWithoutARecord) {
  const std::vector<FlightGroup> world = {{"world", {0, 1, 2, 3}}};
  std::vector<FlightRecord> records;
  for (int r = 0; r < 3; ++r)
    records.push_back(record_of(r, 4, world, {{9, "barrier", S::started}}));
  const HangReport report = analyse_flight_records(records);
  EXPECT_EQ(report.behind, std::vector<int>{3});
  EXPECT_NE(report.lines.front().find("none from rank 3"), std::string::npos);
}

TEST(HangReport, NamesRunsOfRanksWithoutARecordAsRanges) {
  const std::vector<FlightGroup> world = {{"world", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}};
  const HangReport report = analyse_flight_records({
      record_of(0, 10, world, {{9, "barrier", S::started}}),
      record_of(4, 10, world, {{9, "barrier", S::started}}),
      record_of(7, 10, world, {{9, "barrier", S::started}}),
  });
  EXPECT_EQ(report.lines.front(), "10 ranks, 3 flight records (none from ranks 1-3, 5, 6, 8, 9)");
  EXPECT_EQ(report.behind, (std::vector<int>{1, 2, 3, 5, 6, 8, 9}));
  EXPECT_EQ(report.lines[1].rfind("rank 0 waits in barrier #9", 0), 0u) << report.lines[1];
  EXPECT_NE(report.lines[1].find(": ranks 1-3, 5, 6, 8, 9 wrote no record"), std::string::npos)
      << report.lines[1];
  // One line for each run the same ranks wait for.
  const std::string waiting = "; ranks 0, 4, 7 wait for them";
  EXPECT_EQ(report.lines[report.lines.size() - 3],
            "behind: ranks 1-3 (they wrote no record: stopped, killed, or stuck outside "
            "communication)" + waiting);
  EXPECT_EQ(report.lines.back(),
            "behind: ranks 8, 9 (they wrote no record: stopped, killed, or stuck outside "
            "communication)" + waiting);
}

TEST(HangReport, ReadsTheRecordsOfTheLargestWorldAtTheirOwnSize) {
  // 2^24 ranks, two records: the report's memory and lines follow the records, not the world.
  const std::vector<FlightGroup> pair = {{"dp[0,1]", {0, 1}}};
  const HangReport report = analyse_flight_records({
      record_of(0, kMaxFlightRanks, pair, {{3, "all_reduce", S::completed}}),
      record_of(1, kMaxFlightRanks, pair, {{3, "all_reduce", S::completed}}),
  });
  ASSERT_LT(report.lines.front().size(), 100u);  // not the ranks one by one (150 MB)
  EXPECT_EQ(report.lines.front(), "16777216 ranks, 2 flight records (none from ranks 2-16777215)");
  EXPECT_TRUE(report.behind.empty());
}

TEST(HangReport, NamesAStoppedRankFromItsLateRecord) {
  // Both are in the same collective; one wrote its record long after the timeout, which a
  // running watchdog never does.
  const std::vector<FlightGroup> world = {{"world", {0, 1}}};
  const HangReport report = analyse_flight_records({
      record_of(0, 2, world, {{5, "all_reduce", S::started}}, 5.5),
      record_of(1, 2, world, {{5, "all_reduce", S::started}}, 9.0),
  });
  EXPECT_EQ(report.behind, std::vector<int>{1});
}

TEST(HangReport, FollowsAPointToPointWaitToTheRankBehindIt) {
  // Rank 0 waits for a message from rank 1 on the pipeline group; rank 1 waits in an
  // all-reduce with rank 2, which has not reached it.
  const std::vector<FlightGroup> groups = {{"pp[0,1]", {0, 1}}, {"tp[1,2]", {1, 2}}};
  const HangReport report = analyse_flight_records({
      record_of(0, 3, groups, {{3, "recv", S::started, {1}, 0}}),
      record_of(1, 3, groups,
                {{2, "send", S::completed, {0}, 0}, {7, "all_reduce", S::started, {}, 1}}),
      record_of(2, 3, groups, {{6, "all_reduce", S::completed, {}, 1}}),
  });
  EXPECT_EQ(report.behind, std::vector<int>{2});
}

// Rank 1 of a pipeline group, whose `ops` failed with its send's error (its record written by
// the error), and rank 0 waiting for the message.
HangReport report_of_a_failed_send(const std::vector<Op>& ops) {
  const std::vector<FlightGroup> pipeline = {{"pp[0,1]", {0, 1}}};
  FlightRecord failed = record_of(1, 2, pipeline, ops);
  failed.reason = "error: the send failed";
  for (FlightEntry& e : failed.entries) e.error = "send on group 'pp[0,1]': failed";
  return analyse_flight_records({record_of(0, 2, pipeline, {{3, "recv", S::started, {1}}}),
                                 failed});
}

TEST(HangReport, NamesTheRankWhoseOperationFailed) {
  const HangReport report = report_of_a_failed_send({{3, "send", S::failed, {0}}});
  EXPECT_EQ(report.failed, std::vector<int>{1});
  ASSERT_GE(report.lines.size(), 2u);
  EXPECT_EQ(report.lines[1].rfind("failed: rank 1: send #3 on group 'pp[0,1]'", 0), 0u)
      << report.lines[1];
  EXPECT_NE(report.lines[1].find(": send on group 'pp[0,1]': failed"), std::string::npos);
  EXPECT_EQ(report.behind, std::vector<int>{1});
  EXPECT_EQ(report.lines.back().rfind("behind: rank 1 (it failed", 0), 0u) << report.lines.back();
}

// The send broke its group: the later receive failed with the send's error, never started.
// The report names the send, the cause.
TEST(HangReport, NamesTheFirstFailureOfABrokenGroup) {
  const HangReport report =
      report_of_a_failed_send({{3, "send", S::failed, {0}}, {4, "recv", S::failed, {0}}});
  EXPECT_EQ(report.failed, std::vector<int>{1});
  ASSERT_GE(report.lines.size(), 2u);
  EXPECT_EQ(report.lines[1].rfind("failed: rank 1: send #3 on group 'pp[0,1]'", 0), 0u)
      << report.lines[1];
}

// A peer that failed the collective has not finished it: its line says so.
TEST(HangReport, SaysAPeerFailedTheCollectiveItWaitsIn) {
  const std::vector<FlightGroup> data = {{"dp[0,1]", {0, 1}}};
  FlightRecord failed = record_of(1, 2, data, {{48, "all_reduce", S::failed}});
  failed.reason = "error: all_reduce failed";
  failed.entries[0].error = "all_reduce on group 'dp[0,1]': failed";
  const HangReport report =
      analyse_flight_records({record_of(0, 2, data, {{48, "all_reduce", S::started}}), failed});
  EXPECT_EQ(report.behind, std::vector<int>{1});
  const std::string waits = "rank 0 waits in all_reduce #48 on group 'dp[0,1]'";
  const auto line = std::find_if(report.lines.begin(), report.lines.end(),
                                 [&](const std::string& l) { return l.rfind(waits, 0) == 0; });
  ASSERT_NE(line, report.lines.end());
  EXPECT_NE(line->find(": rank 1 failed it"), std::string::npos) << *line;
}

TEST(HangReport, NamesARankThatFailedOutsideCommunication) {
  const std::vector<FlightGroup> world = {{"world", {0, 1}}};
  FlightRecord failed = record_of(1, 2, world, {{4, "all_reduce", S::completed}});
  failed.reason = "error: out of memory";
  const HangReport report = analyse_flight_records({
      record_of(0, 2, world, {{5, "all_reduce", S::started}}), failed});
  EXPECT_EQ(report.failed, std::vector<int>{1});
  EXPECT_EQ(report.lines[1], "failed: rank 1: error: out of memory");
  EXPECT_EQ(report.behind, std::vector<int>{1});
}

// A link down between two nodes: both members of a cross-node group wait in the same
// all-reduce, and each one's node-local partner waits for it.
TEST(HangReport, SaysWhenEveryMemberWaitsInTheSameOperation) {
  const std::vector<FlightGroup> groups = {{"dp[1,3]", {1, 3}}, {"mp[0,1]", {0, 1}},
                                           {"mp[2,3]", {2, 3}}};
  const HangReport report = analyse_flight_records({
      record_of(0, 4, groups, {{6, "all_reduce", S::started, {}, 1}}),
      record_of(1, 4, groups,
                {{5, "all_reduce", S::completed, {}, 1}, {18, "all_reduce", S::started, {}, 0}}),
      record_of(2, 4, groups, {{6, "all_reduce", S::started, {}, 2}}),
      record_of(3, 4, groups,
                {{5, "all_reduce", S::completed, {}, 2}, {18, "all_reduce", S::started, {}, 0}}),
  });
  EXPECT_EQ(report.behind, (std::vector<int>{1, 3}));
  EXPECT_NE(report.lines.back().find("the network between them (a link down)"), std::string::npos)
      << report.lines.back();
}

// Every rank ends up in the same collective, but one joined it only after the others had
// timed out in it (stopped just before it, and woken by the job's end): that one was behind.
TEST(HangReport, NamesTheRankThatJoinedTheCollectiveLast) {
  const std::vector<FlightGroup> world = {{"world", {0, 1, 2}}};
  const HangReport report = analyse_flight_records({
      record_of(0, 3, world, {{37, "all_reduce", S::started}}, 5.0),
      record_of(1, 3, world, {{37, "all_reduce", S::started}}, 0.2),
      record_of(2, 3, world, {{37, "all_reduce", S::started}}, 5.1),
  });
  EXPECT_EQ(report.behind, std::vector<int>{1});
  EXPECT_NE(report.lines.back().find("joined the operation its peers wait in only 0 s"),
            std::string::npos) << report.lines.back();
}

// A rank stopped just after its part of all_reduce #36, before its last message reached rank
// 2: rank 2 still waits in #36, and the stopped rank, woken by the job's end, joined #37 long
// after the others. The stopped rank is behind; rank 2 waits for it.
TEST(HangReport, NamesTheRankStoppedBeforeItsLastMessageArrived) {
  const std::vector<FlightGroup> world = {{"world", {0, 1, 2, 3}}};
  const std::vector<Op> next = {{36, "all_reduce", S::completed}, {37, "all_reduce", S::started}};
  const HangReport report = analyse_flight_records({
      record_of(0, 4, world, next, 5.0),
      record_of(1, 4, world, next, 0.1),
      record_of(2, 4, world, {{35, "all_reduce", S::completed}, {36, "all_reduce", S::started}},
                5.0),
      record_of(3, 4, world, next, 5.1),
  });
  EXPECT_EQ(report.behind, std::vector<int>{1});
  EXPECT_NE(report.lines.back().find("behind: rank 1 (it joined the operation its peers wait in "
                                     "only 0 s"),
            std::string::npos)
      << report.lines.back();
  EXPECT_NE(report.lines.back().find("; rank 2 waits for it"), std::string::npos)
      << report.lines.back();
}

// A busy group's operations push a rarely used group's out of a rank's ring: the group's
// count still says the rank has finished the collective its peer waits in.
TEST(HangReport, CountsTheCollectivesTheRingHasDropped) {
  std::vector<FlightGroup> groups = {{"dp[0,1]", {0, 1}}, {"tp[0,2]", {0, 2}}};
  std::vector<FlightGroup> dropped = groups;
  dropped[0].collectives = 51;  // its entries are gone from rank 0's ring
  const HangReport report = analyse_flight_records({
      record_of(0, 3, dropped, {{9000, "all_reduce", S::completed, {}, 1}}),
      record_of(1, 3, groups, {{51, "all_reduce", S::started}}),
      record_of(2, 3, groups, {{9000, "all_reduce", S::completed, {}, 1}}),
  });
  EXPECT_EQ(report.lines[1].rfind("rank 1 waits in all_reduce #51", 0), 0u) << report.lines[1];
  EXPECT_NE(report.lines[1].find(": every other member has finished it"), std::string::npos)
      << report.lines[1];
  EXPECT_EQ(report.behind, std::vector<int>{1});
}

TEST(HangReport, SaysWhenEveryRankWaitsWithAllItsPeers) {
  const std::vector<FlightGroup> groups = {{"dp[0,1]", {0, 1}}};
  const HangReport report = analyse_flight_records({
      record_of(0, 2, groups, {{17, "all_reduce", S::started}}),
      record_of(1, 2, groups, {{17, "all_reduce", S::started}}),
  });
  EXPECT_TRUE(report.behind.empty());
  EXPECT_EQ(report.lines.back().rfind("no rank is behind: ranks 0, 1 wait in operations", 0), 0u)
      << report.lines.back();
}

// What pipeline stage `stage` of 4 records on its group over `micro_batches` forward and
// backward passes, then in the all-reduce that every stage waits in: issued through the
// recorder, as a rank's communicator would.
FlightRecord pipeline_stage_record(int stage, int micro_batches) {
  constexpr int kStages = 4;
  FlightRecorder& recorder = FlightRecorder::instance();
  const int pp = recorder.register_group("pp[0,1,2,3]", {0, 1, 2, 3});
  const auto p2p = [&](const char* kind, int peer) {
    recorder.ended(recorder.issued(pp, kPointToPoint, kind, 64, {peer}));
  };
  for (int m = 0; m < micro_batches; ++m) {
    if (stage > 0) p2p("recv", stage - 1);
    if (stage < kStages - 1) p2p("send", stage + 1);
  }
  for (int m = 0; m < micro_batches; ++m) {
    if (stage < kStages - 1) p2p("recv", stage + 1);
    if (stage > 0) p2p("send", stage - 1);
  }
  recorder.ended(recorder.issued(pp, kCollective, "all_reduce", 4, {}));
  recorder.started(recorder.issued(pp, kCollective, "all_reduce", 4, {}));
  // This rank's record of that group alone, written as its watchdog would at the timeout.
  FlightRecord record = recorder.snapshot(stage, kStages, "timeout", 5.0);
  record.groups = {recorder.group(pp)};
  std::vector<FlightEntry> mine;
  for (FlightEntry& e : record.entries)
    if (e.group == pp) mine.push_back(e), mine.back().group = 0;
  record.entries = mine;
  record.written_s = record.entries.back().issued_s + 5.0;
  return record;
}

// Every stage waits in the same all-reduce, after the middle stages did twice the sends and
// receives of the ends: no rank is behind, the network is.
TEST(HangReport, ComparesOnlyCollectivesAcrossAPipelineGroup) {
  std::vector<FlightRecord> records;
  for (int stage = 0; stage < 4; ++stage) records.push_back(pipeline_stage_record(stage, 4));
  const HangReport report = analyse_flight_records(records);
  EXPECT_TRUE(report.behind.empty()) << report.lines.back();
  for (int stage = 0; stage < 4; ++stage)
    EXPECT_EQ(report.lines[1 + static_cast<std::size_t>(stage)],
              "rank " + std::to_string(stage) + " waits in all_reduce #2 on group 'pp[0,1,2,3]' "
              "(started 5 s before the record): every peer is in it too");
  EXPECT_EQ(report.lines.back().rfind("no rank is behind: ranks 0-3 wait in operations", 0), 0u)
      << report.lines.back();
}

// The rank that has not reached the collective is named, though it issued more sends and
// receives on the group than the others' collective number.
TEST(HangReport, NamesTheRankBehindOnCollectivesWhateverItsSendsAndReceives) {
  const std::vector<FlightGroup> pp = {{"pp[0,1,2,3]", {0, 1, 2, 3}}};
  const auto passes = [](std::uint64_t sends_and_receives) {
    std::vector<Op> ops;
    for (std::uint64_t n = 1; n <= sends_and_receives; ++n)
      ops.push_back({n, n % 2 ? "recv" : "send", S::completed, {1}});
    ops.push_back({1, "all_reduce", S::completed});
    return ops;
  };
  const auto waiting = [&](std::uint64_t sends_and_receives) {
    std::vector<Op> ops = passes(sends_and_receives);
    ops.push_back({2, "all_reduce", S::started});
    return ops;
  };
  const HangReport report = analyse_flight_records({
      record_of(0, 4, pp, waiting(8)),
      record_of(1, 4, pp, waiting(16)),
      record_of(2, 4, pp, passes(16)),
      record_of(3, 4, pp, waiting(8)),
  });
  EXPECT_EQ(report.behind, std::vector<int>{2});
  EXPECT_NE(report.lines[1].find(": rank 2 has issued only 1 collectives on that group"),
            std::string::npos) << report.lines[1];
  EXPECT_EQ(report.lines.back().rfind("behind: rank 2 (it waits in no communication", 0), 0u)
      << report.lines.back();
}

// A send or receive is matched by its peer, not by its number: the peer's send to this rank
// answers this rank's receive, while the peer's collective on the same group does not.
TEST(HangReport, MatchesASendOrReceiveByItsPeer) {
  const std::vector<FlightGroup> pp = {{"pp[0,1]", {0, 1}}};
  const HangReport together = analyse_flight_records({
      record_of(0, 2, pp, {{9, "recv", S::started, {1}}}),
      record_of(1, 2, pp, {{4, "send", S::started, {0}}}),
  });
  EXPECT_TRUE(together.behind.empty()) << together.lines.back();
  EXPECT_NE(together.lines[1].find("every peer is in it too"), std::string::npos)
      << together.lines[1];
  // One joined the exchange only after the other had timed out in it: it was behind.
  const HangReport late = analyse_flight_records({
      record_of(0, 2, pp, {{9, "recv", S::started, {1}}}, 0.2),
      record_of(1, 2, pp, {{4, "send", S::started, {0}}}, 5.0),
  });
  EXPECT_EQ(late.behind, std::vector<int>{0});
  // Rank 1 waits in a collective rank 0 has not reached, rank 0 for rank 1's message: a cycle.
  const HangReport crossed = analyse_flight_records({
      record_of(0, 2, pp, {{3, "all_reduce", S::completed}, {9, "recv", S::started, {1}}}),
      record_of(1, 2, pp, {{3, "all_reduce", S::completed}, {4, "all_reduce", S::started}}),
  });
  EXPECT_EQ(crossed.behind, (std::vector<int>{0, 1}));
  EXPECT_NE(crossed.lines[1].find(": rank 1 has no send or receive with rank 0 unfinished on "
                                  "that group, it waits in all_reduce #4"),
            std::string::npos) << crossed.lines[1];
}

TEST(HangReport, SaysSoWhenNothingWaits) {
  const std::vector<FlightGroup> world = {{"world", {0, 1}}};
  const HangReport report = analyse_flight_records({
      record_of(0, 2, world, {{5, "all_reduce", S::completed}}),
      record_of(1, 2, world, {{5, "all_reduce", S::completed}}),
  });
  EXPECT_TRUE(report.behind.empty());
  EXPECT_TRUE(report.failed.empty());
  EXPECT_NE(report.lines.back().find("no hang"), std::string::npos);
}

TEST(HangReport, RefusesRecordsOfDifferentJobs) {
  const std::vector<FlightGroup> world = {{"world", {0, 1}}};
  EXPECT_THROW(analyse_flight_records({record_of(0, 2, world, {}), record_of(1, 3, world, {})}),
               CommError);
  EXPECT_THROW(read_flight_records("/nonexistent/flight"), CommError);
}

}  // namespace
}  // namespace ternion
