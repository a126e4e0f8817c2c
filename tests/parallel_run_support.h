// The small run the multi-rank equivalence tests train (tests/*_mpi/): 4 blocks of width 32,
// dropout on, clipping active, on the built-in corpus. Each test sets the layout and what it
// varies.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>

#include "data/builtin_corpus.h"
#include "data/text_prepare.h"
#include "training/train_config.h"

namespace ternion::test {

// A directory deleted when the process ends (by its owner), so that test runs leave nothing
// in /tmp.
struct RemovedAtExit {
  std::string path;
  bool owner = true;
  ~RemovedAtExit() {
    std::error_code ec;
    if (owner) std::filesystem::remove_all(path, ec);
  }
};

// train.bin / val.bin of a small built-in corpus in a directory of this process's own.
inline const std::string& corpus_dir(const std::string& tag) {
  static const RemovedAtExit dir{[&] {
    const std::string d = "/tmp/ternion-" + tag + "-" + std::to_string(::getpid());
    prepare_text(builtin_corpus_text(60000), d, {.val_fraction = 0.1});
    return d;
  }()};
  return dir.path;
}

inline TrainConfig small_parallel_run(const std::string& data_dir) {
  TrainConfig c;
  c.model.seq_len = 16;
  c.model.n_layer = 4;
  c.model.n_head = 4;
  c.model.d_model = 32;
  c.model.dropout = 0.1;
  c.parallel.micro_batch_size = 2;
  c.training.steps = 20;
  c.training.global_batch_size = 16;
  c.training.eval_batches = 2;
  c.optimizer.lr = 3e-3;
  c.optimizer.warmup_steps = 2;
  c.optimizer.grad_clip = 0.5;  // clipping active: the global norm must be right
  c.data.train = data_dir + "/train.bin";
  c.data.val = data_dir + "/val.bin";
  return c;
}

}  // namespace ternion::test
