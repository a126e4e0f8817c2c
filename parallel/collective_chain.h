// Operations made of several communications in sequence, each on its own communicator (a
// reduce-scatter inside a node, then an all-reduce across nodes, then an all-gather inside the
// node), kept asynchronous without a thread of their own.
//
// A chain is a list of stages; a stage starts one operation (and may prepare its buffers
// first) and may finish with local work once the operation is complete (a sum, a conversion).
// Stage k + 1 starts once stage k is complete. The chains are advanced by whoever asks about
// them: progress() (the gradient reducer calls it as each layer's backward ends), a chain's
// is_completed(), or its wait().
//
// Every rank must issue the operations on each communicator in the same order, and completion
// times differ between ranks. So a stage may start only once every earlier chain has started
// all its stages on the same communicator: each communicator sees (chain, stage) order on every
// rank, whatever completes when. A blocking wait drives the earliest chain with an operation
// in flight first, never a later one, so ranks blocked in different chains cannot wait for
// each other (every rank's earliest unfinished chain is the same one, and its next operation
// is either started everywhere or waits only for operations started everywhere).
//
// Single-threaded: the chains and their handles belong to the thread that submits them.
#pragma once

#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "parallel/comm/communicator.h"

namespace ternion {

struct ChainStage {
  const Communicator* comm = nullptr;       // where start() communicates
  std::function<WorkHandle()> start;        // issues the operation
  std::function<void()> finish;             // optional: local work once it is complete
};

class CollectiveChains {
 public:
  CollectiveChains() = default;
  CollectiveChains(const CollectiveChains&) = delete;
  CollectiveChains& operator=(const CollectiveChains&) = delete;

  // Starts what it can of `stages` now; the handle completes after the last stage's finish.
  WorkHandle submit(std::vector<ChainStage> stages);
  // Finishes the stages whose operations completed and starts the stages that may start,
  // without blocking.
  void progress();
  // Chains not yet complete.
  std::size_t pending() const { return chains_.size(); }

 private:
  struct Chain {
    std::vector<ChainStage> stages;
    std::size_t next = 0;    // the first stage not yet complete
    WorkHandle in_flight;    // stages[next]'s operation once started
    bool complete = false;
    std::exception_ptr error;
  };
  class ChainWork;
  // One pass over the chains in order; with `block`, first waits for the earliest operation
  // in flight.
  void advance(bool block);
  void wait_for(const Chain& chain);

  std::deque<std::shared_ptr<Chain>> chains_;  // not yet complete, in submission order
};

}  // namespace ternion
