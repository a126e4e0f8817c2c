#include "parallel/comm/hang_report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "framework/error.h"
#include "framework/logging.h"
#include "parallel/comm/comm_watchdog.h"

namespace ternion {

namespace {

// A running rank's wait outlasts the timeout by at most one look of its watchdog before its
// record is written; a stopped rank, woken by the job's end, writes after the others' grace.
constexpr double kWatchdogSlackS =
    2.0 * std::chrono::duration<double>(kWatchdogLookInterval).count();
static_assert(kWatchdogGrace > 2 * kWatchdogLookInterval);

bool is_point_to_point(const FlightEntry& e) {
  return e.sequence == FlightSequence::point_to_point;
}

// A group as every rank names it: its name and its members.
std::string group_key(const FlightGroup& g) {
  std::string key = g.name + "|";
  for (int m : g.members) key += std::to_string(m) + ",";
  return key;
}

// Ascending ranks as text, a run of three or more as "first-last": a job of millions of ranks
// may be missing all but a few.
std::string rank_runs(const std::vector<std::pair<int, int>>& runs) {
  std::string text;
  for (const auto& [first, last] : runs) {
    text += (text.empty() ? "" : ", ") + std::to_string(first);
    if (last == first + 1) text += ", " + std::to_string(last);
    else if (last > first) text += "-" + std::to_string(last);
  }
  return text;
}

std::string rank_list(const std::set<int>& ranks) {
  std::vector<std::pair<int, int>> runs;
  for (int r : ranks) {
    if (!runs.empty() && runs.back().second + 1 == r) runs.back().second = r;
    else runs.emplace_back(r, r);
  }
  return rank_runs(runs);
}

// One rank's view: its record, its operations per group, and what it waits in. Only
// collectives are numbered alike on every member; a send or receive is matched by its peer.
struct RankView {
  const FlightRecord* record = nullptr;
  // Per group key: its newest collective's seq, and its oldest unfinished collective.
  std::map<std::string, std::uint64_t> last_collective;
  std::map<std::string, const FlightEntry*> unfinished_collective;
  std::map<std::string, std::set<std::uint64_t>> failed_collectives;  // per group key
  // Per group key and peer (world rank): its oldest unfinished send or receive with that peer.
  std::map<std::string, std::map<int, const FlightEntry*>> unfinished_with;
  const FlightEntry* waits_in = nullptr;  // its oldest unfinished operation
};

bool unfinished(const FlightEntry& e) {
  return e.state == FlightState::issued || e.state == FlightState::started;
}

std::string describe(const RankView& v, const FlightEntry& e) {
  const FlightGroup& g = v.record->groups[static_cast<std::size_t>(e.group)];
  std::ostringstream out;
  out << e.kind << " #" << e.seq << " on group '" << g.name << "'";
  for (std::size_t i = 0; i < e.peers.size(); ++i)
    out << (i == 0 ? " with rank " : ", ") << e.peers[i];
  out << " (" << flight_state_name(e.state) << ' '
      << static_cast<long long>(v.record->written_s - e.issued_s) << " s before the record)";
  return out.str();
}

}  // namespace

HangReport analyse_flight_records(const std::vector<FlightRecord>& records) {
  HangReport report;
  TN_CHECK_AS(CommError, !records.empty(), "no flight records to read");
  const int world = records.front().world_size;
  // Only the ranks that wrote a record have a view: the world may be millions of ranks.
  std::map<int, RankView> views;
  for (const FlightRecord& r : records) {
    // Records made by hand as well as read: every rank below indexes the world.
    check_flight_record(r, detail::concat("the record of rank ", r.rank));
    TN_CHECK_AS(CommError, r.world_size == world, "the records are of different jobs: rank ",
                r.rank, "'s says ", r.world_size, " ranks, rank ", records.front().rank, "'s ",
                world);
    RankView& v = views[r.rank];
    TN_CHECK_AS(CommError, v.record == nullptr, "two records of rank ", r.rank);
    v.record = &r;
    // The groups' counts hold the collectives whose entries the ring has dropped.
    for (const FlightGroup& g : r.groups)
      v.last_collective[group_key(g)] = std::max(v.last_collective[group_key(g)], g.collectives);
    for (const FlightEntry& e : r.entries) {
      const std::string key = group_key(r.groups[static_cast<std::size_t>(e.group)]);
      if (!is_point_to_point(e)) v.last_collective[key] = std::max(v.last_collective[key], e.seq);
      if (!is_point_to_point(e) && e.state == FlightState::failed)
        v.failed_collectives[key].insert(e.seq);
      if (!unfinished(e)) continue;
      if (!v.waits_in || e.id < v.waits_in->id) v.waits_in = &e;
      const auto keep_oldest = [&](const FlightEntry*& oldest) {
        if (!oldest || e.id < oldest->id) oldest = &e;
      };
      if (!is_point_to_point(e)) {
        keep_oldest(v.unfinished_collective[key]);
      } else {
        for (int peer : e.peers) keep_oldest(v.unfinished_with[key][peer]);
      }
    }
  }
  const auto view_of = [&](int rank) -> const RankView* {
    const auto found = views.find(rank);
    return found == views.end() ? nullptr : &found->second;
  };
  // The ranks without a record, as the runs between those with one.
  std::vector<std::pair<int, int>> missing;
  int next = 0;
  for (const auto& [rank, v] : views) {
    if (rank > next) missing.emplace_back(next, rank - 1);
    next = rank + 1;
  }
  if (next < world) missing.emplace_back(next, world - 1);
  const std::size_t missing_count = static_cast<std::size_t>(world) - views.size();
  report.lines.push_back(detail::concat(
      world, " ranks, ", records.size(), " flight records",
      missing.empty() ? std::string()
                      : " (none from rank" + std::string(missing_count > 1 ? "s " : " ") +
                            rank_runs(missing) + ")"));

  for (const auto& [r, v] : views) {
    // The first failure: the later operations of a group it broke fail with its error.
    const auto failed_entry =
        std::find_if(v.record->entries.begin(), v.record->entries.end(),
                     [](const FlightEntry& e) { return e.state == FlightState::failed; });
    const bool error_record = v.record->reason.rfind("error", 0) == 0;
    if (!error_record && failed_entry == v.record->entries.end()) continue;
    std::string line = detail::concat("failed: rank ", r);
    if (failed_entry != v.record->entries.end())
      line += ": " + describe(v, *failed_entry) + ": " + failed_entry->error;
    else
      line += ": " + v.record->reason;
    report.lines.push_back(line);
    report.failed.push_back(r);
  }

  std::map<int, std::set<int>> waited_by;  // rank -> the ranks that wait for it
  std::set<int> waits_for_someone;
  // Ranks that stopped progressing inside communication, and why the records say so.
  std::map<int, std::string> stalled;
  // Ranks whose operation has every peer in it too, and still did not complete.
  std::map<int, std::string> in_it_together;
  // Ranks stalled in a collective every other member has finished (a message lost to them).
  std::set<int> peers_finished;
  // Per rank waiting in a send or receive: how long each peer has waited in its match.
  std::map<int, std::vector<double>> partner_waits;
  for (const auto& [r, v] : views) {
    if (!v.waits_in) continue;
    const FlightEntry& e = *v.waits_in;
    const FlightGroup& g = v.record->groups[static_cast<std::size_t>(e.group)];
    const std::string key = group_key(g);
    std::vector<std::string> why;
    // The peers without a record make one reason, in the place of the first of them.
    std::set<int> silent;
    std::size_t silent_at = 0;
    bool all_passed = true;
    const std::vector<int>& others = is_point_to_point(e) ? e.peers : g.members;
    for (int m : others) {
      if (m == r) continue;
      const RankView* found = view_of(m);
      if (!found) {
        if (silent.empty()) {
          silent_at = why.size();
          why.emplace_back();
        }
        silent.insert(m);
        all_passed = false;
        waited_by[m].insert(r);
        waits_for_someone.insert(r);
        continue;
      }
      const RankView& peer = *found;
      std::string blame;
      const std::string peer_wait =
          peer.waits_in ? ", it waits in " + describe(peer, *peer.waits_in) : std::string();
      if (is_point_to_point(e)) {
        // Its send or receive with this rank is the match, whatever its number.
        const FlightEntry* match = nullptr;
        if (const auto group = peer.unfinished_with.find(key); group != peer.unfinished_with.end())
          if (const auto with = group->second.find(r); with != group->second.end())
            match = with->second;
        if (match)
          partner_waits[r].push_back(peer.record->written_s - match->issued_s);
        else
          blame = detail::concat("rank ", m, " has no send or receive with rank ", r,
                                 " unfinished on that group", peer_wait);
      } else {
        const auto seq = peer.last_collective.find(key);
        const std::uint64_t last = seq == peer.last_collective.end() ? 0 : seq->second;
        const auto failed = peer.failed_collectives.find(key);
        if (last < e.seq)
          blame = detail::concat("rank ", m, " has issued only ", last,
                                 " collectives on that group", peer_wait);
        else if (failed != peer.failed_collectives.end() && failed->second.count(e.seq))
          blame = detail::concat("rank ", m, " failed it");
        const auto mine = peer.unfinished_collective.find(key);
        if (last < e.seq ||
            (mine != peer.unfinished_collective.end() && mine->second->seq <= e.seq))
          all_passed = false;
      }
      if (blame.empty()) continue;
      all_passed = false;
      why.push_back(blame);
      waited_by[m].insert(r);
      waits_for_someone.insert(r);
    }
    if (!silent.empty())
      why[silent_at] = detail::concat("rank", silent.size() > 1 ? "s " : " ", rank_list(silent),
                                      " wrote no record");
    std::string line = detail::concat("rank ", r, " waits in ", describe(v, e));
    // A running process's watchdog writes its record within a second of the timeout: a wait
    // well past it in the record means the process was not running (stopped, then woken by
    // the job's end to write it late).
    const double waited = v.record->written_s - e.issued_s;
    if (waited > v.record->timeout_s + kWatchdogSlackS)
      stalled[r] = detail::concat("its wait of ", static_cast<long long>(waited),
                                  " s outlasted the timeout, ", v.record->timeout_s,
                                  " s, without its watchdog firing: the process was stopped or "
                                  "starved of CPU");
    if (!why.empty()) {
      line += ": " + why.front();
    } else if (all_passed && !is_point_to_point(e)) {
      line += ": every other member has finished it, this rank has not seen it end";
      if (stalled.emplace(r, "its peers have finished the operation it waits in: it stopped, "
                             "was starved of CPU, or lost its link to them (their last message "
                             "never arrived), inside it")
              .second)
        peers_finished.insert(r);
    } else {
      line += ": every peer is in it too";
      in_it_together[r] = detail::concat("it and every peer wait in ", e.kind, " #", e.seq,
                                         " on group '", g.name,
                                         "', which has not completed: the network between "
                                         "them (a link down) or the transport is stuck");
    }
    report.lines.push_back(line);
    for (std::size_t i = 1; i < why.size(); ++i) report.lines.push_back("  and " + why[i]);
  }
  // Ranks in one operation that has not completed: one that joined it long after the others
  // had timed out in it (its wait less than half of theirs, each on its own clock) was behind
  // them, stopped or starved of CPU before it, and woken later to write its record. A
  // collective is the same number on every member, whoever else has not joined it; a send or
  // receive, where every peer is in it too, is its peers' matches.
  std::map<std::string, std::vector<std::pair<int, double>>> waits_by_collective;
  std::map<int, double> longest_wait;  // per rank: the longest wait of its operation's ranks
  for (const auto& [r, v] : views) {
    if (!v.waits_in) continue;
    const FlightEntry& e = *v.waits_in;
    const double waited = v.record->written_s - e.issued_s;
    if (is_point_to_point(e)) {
      if (!in_it_together.count(r)) continue;
      longest_wait[r] = waited;
      for (double theirs : partner_waits[r]) longest_wait[r] = std::max(longest_wait[r], theirs);
      continue;
    }
    const std::string key = group_key(v.record->groups[static_cast<std::size_t>(e.group)]);
    waits_by_collective[key + "#" + std::to_string(e.seq)].emplace_back(r, waited);
  }
  for (const auto& [operation, waits] : waits_by_collective) {
    double longest = 0;
    for (const auto& [r, waited] : waits) longest = std::max(longest, waited);
    for (const auto& [r, waited] : waits) longest_wait[r] = longest;
  }
  std::set<int> joined_late;
  for (const auto& [r, longest] : longest_wait) {
    const RankView& v = *view_of(r);
    const double waited = v.record->written_s - v.waits_in->issued_s;
    if (longest >= v.record->timeout_s && waited < longest / 2) {
      stalled[r] = detail::concat("it joined the operation its peers wait in only ",
                                  static_cast<long long>(waited), " s before its record, where "
                                  "they had waited up to ", static_cast<long long>(longest),
                                  " s: it was behind them (stopped or starved of CPU)");
      joined_late.insert(r);
    }
  }
  // A member stopped just after its part of a collective, before its last message reached a
  // peer, has since joined the next one late: the peer still waiting in it waits for that one.
  for (const int r : peers_finished) {
    const RankView& v = *view_of(r);
    const FlightGroup& g = v.record->groups[static_cast<std::size_t>(v.waits_in->group)];
    for (const int m : g.members)
      if (joined_late.count(m)) {
        stalled.erase(r);
        waited_by[m].insert(r);
        waits_for_someone.insert(r);
      }
  }
  // The ranks named: those that stopped inside communication, and those waited for that wait
  // for nobody (no record, or no communication); in a cycle where each waits for another,
  // all of them.
  // A rank that failed is what the others wait for, whatever the waits look like meanwhile.
  std::set<int> behind(report.failed.begin(), report.failed.end());
  if (behind.empty())
    for (const auto& [rank, why] : stalled) behind.insert(rank);
  for (const auto& [rank, waiters] : waited_by)
    if (report.failed.empty() && !waits_for_someone.count(rank) &&
        (!view_of(rank) || !view_of(rank)->waits_in))
      behind.insert(rank);
  if (behind.empty())
    for (const auto& [rank, waiters] : waited_by) behind.insert(rank);
  if (behind.empty() && !in_it_together.empty()) {
    std::set<int> ranks;
    for (const auto& [rank, why] : in_it_together) ranks.insert(rank);
    report.lines.push_back(detail::concat(
        "no rank is behind: rank", ranks.size() > 1 ? "s " : " ", rank_list(ranks),
        " wait in operations every peer has joined, which have not completed: the network "
        "between them (a link down) or the transport is stuck"));
    return report;
  }
  if (behind.empty()) {
    report.lines.push_back("no rank waits for another: the records show no hang");
    return report;
  }
  const std::vector<int> ordered(behind.begin(), behind.end());
  for (std::size_t i = 0; i < ordered.size();) {
    const int rank = ordered[i];
    const RankView* v = view_of(rank);
    const std::set<int>& waiters = waited_by[rank];
    // A run of ranks without a record that the same ranks wait for is one line: in a large
    // job most ranks may have written none.
    std::size_t end = i + 1;
    while (!v && end < ordered.size() && ordered[end] == ordered[end - 1] + 1 &&
           !view_of(ordered[end]) && waited_by[ordered[end]] == waiters)
      ++end;
    std::string state;
    if (std::count(report.failed.begin(), report.failed.end(), rank))
      state = "it failed, above: the job ends on its error";
    else if (!v)
      state = std::string(end - i > 1 ? "they" : "it") +
              " wrote no record: stopped, killed, or stuck outside communication";
    else if (stalled.count(rank)) state = stalled[rank];
    else if (!v->waits_in)
      state = "it waits in no communication: stuck computing, or it took another branch";
    else if (in_it_together.count(rank)) state = in_it_together[rank];
    else state = "it waits in turn: a cycle";
    std::string line =
        end - i > 1 ? detail::concat("behind: ranks ", rank_runs({{rank, ordered[end - 1]}}))
                    : detail::concat("behind: rank ", rank);
    line += " (" + state + ")";
    if (!waiters.empty())
      line += detail::concat("; rank", waiters.size() > 1 ? "s " : " ", rank_list(waiters),
                             " wait", waiters.size() > 1 ? "" : "s", " for ",
                             end - i > 1 ? "them" : "it");
    report.lines.push_back(line);
    for (; i < end; ++i) report.behind.push_back(ordered[i]);
  }
  return report;
}

std::vector<FlightRecord> read_flight_records(const std::string& dir) {
  std::vector<FlightRecord> records;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = file.path().filename().string();
    if (name.rfind("rank_", 0) == 0 && file.path().extension() == ".json")
      files.push_back(file.path());
  }
  TN_CHECK_AS(CommError, !ec, "cannot read the directory '", dir, "': ", ec.message());
  TN_CHECK_AS(CommError, !files.empty(), "'", dir, "' holds no flight records (rank_R.json)");
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    TN_CHECK_AS(CommError, in.good() || in.eof(), "cannot read '", path.string(), "'");
    records.push_back(parse_flight_record(text.str(), path.string()));
  }
  return records;
}

}  // namespace ternion
