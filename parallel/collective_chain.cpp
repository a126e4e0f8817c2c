#include "parallel/collective_chain.h"

#include <algorithm>

#include "framework/error.h"

namespace ternion {

class CollectiveChains::ChainWork final : public Work {
 public:
  ChainWork(CollectiveChains& owner, std::shared_ptr<Chain> chain)
      : owner_(owner), chain_(std::move(chain)) {}
  bool is_completed() override {
    if (!chain_->complete) owner_.progress();
    return chain_->complete;
  }
  void wait() override {
    owner_.wait_for(*chain_);
    if (chain_->error) std::rethrow_exception(chain_->error);
  }

 private:
  CollectiveChains& owner_;
  std::shared_ptr<Chain> chain_;
};

WorkHandle CollectiveChains::submit(std::vector<ChainStage> stages) {
  for (const ChainStage& stage : stages)
    TN_CHECK(stage.comm != nullptr && stage.start, "a chain stage without its operation");
  auto chain = std::make_shared<Chain>();
  chain->stages = std::move(stages);
  chains_.push_back(chain);
  progress();
  return std::make_shared<ChainWork>(*this, chain);
}

void CollectiveChains::progress() { advance(/*block=*/false); }

void CollectiveChains::advance(bool block) {
  // Communicators on which an earlier chain has a stage not yet started.
  std::vector<const Communicator*> held;
  bool may_block = block;
  for (const std::shared_ptr<Chain>& chain : chains_) {
    try {
      while (!chain->complete) {
        if (chain->in_flight) {
          if (may_block) {
            may_block = false;  // the earliest operation in flight, and no other
          } else if (!chain->in_flight->is_completed()) {
            break;
          }
          chain->in_flight->wait();  // rethrows its failure
          chain->in_flight = nullptr;
          if (const auto& finish = chain->stages[chain->next].finish) finish();
          ++chain->next;
        } else if (chain->next == chain->stages.size()) {
          chain->complete = true;
        } else if (std::find(held.begin(), held.end(), chain->stages[chain->next].comm) ==
                   held.end()) {
          chain->in_flight = chain->stages[chain->next].start();
        } else {
          break;
        }
      }
    } catch (...) {
      chain->error = std::current_exception();
      chain->in_flight = nullptr;
      chain->next = chain->stages.size();
      chain->complete = true;
    }
    for (std::size_t k = chain->next + (chain->in_flight ? 1 : 0); k < chain->stages.size(); ++k)
      held.push_back(chain->stages[k].comm);
  }
  std::erase_if(chains_, [](const std::shared_ptr<Chain>& c) { return c->complete; });
}

void CollectiveChains::wait_for(const Chain& chain) {
  while (!chain.complete) {
    const std::size_t before = chains_.size();
    const bool any_in_flight = std::any_of(chains_.begin(), chains_.end(),
                                           [](const auto& c) { return c->in_flight != nullptr; });
    advance(/*block=*/true);
    // Each pass completes an operation or starts one; anything else would loop for ever.
    TN_CHECK(any_in_flight || chains_.size() != before || chain.complete ||
                 std::any_of(chains_.begin(), chains_.end(),
                             [](const auto& c) { return c->in_flight != nullptr; }),
             "a chain of collectives that can neither start nor complete");
  }
}

}  // namespace ternion
