// Per-step metrics as JSON lines: one object per optimizer step.
//
// Written to FILE.partial while the run goes (flushed every line, so it can be followed),
// and renamed onto FILE when the run ends (finish()): a previous run's FILE is never clobbered
// by a run that dies half-way or stops on an error, whose lines stay in FILE.partial.
//
// A run resumed from the checkpoint of step s continues the record of the run it resumes:
// FILE.partial starts with that run's lines of steps 1..s, from FILE.partial where its lines
// reach step s (the last run that wrote it died: its lines are the newest), or else from FILE
// (a resume from an older checkpoint that died before step s leaves a .partial that stops
// short), or else from whichever reaches further, with the gap logged. Lines of steps after s
// belong to the abandoned rest of that run and are dropped, so that no step appears twice; so
// is a line cut short by a crash.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace ternion {

struct StepMetrics {
  std::int64_t step = 0;
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  double tokens_per_s = 0.0;
  double tflops_per_rank = 0.0;       // model FLOPs (layers/model_facts.h) per second per rank
  std::optional<double> mfu_percent;  // tflops_per_rank over logging.peak_tflops, where given
  double ms_per_step = 0.0;
  double activation_mb = 0.0;  // peak memory the step allocated beyond what it started with
  double peak_memory_mb = 0.0;      // the device's peak allocated memory during the step
  double reserved_memory_mb = 0.0;  // the device's caching allocator: in use plus cached
  std::optional<double> memory_estimate_mb;  // the first step's: the peak estimated at start
  // Where the step's time went, on the device's timeline (GPU events, or the host clock):
  // every micro-batch's forward and backward (the pipeline schedule), of which the forwards
  // alone (without a pipeline), then the gradients' reductions and norm, then the optimizer
  // with the compute copies' refresh (and ZeRO-1's all-gather).
  double forward_backward_ms = 0.0;
  std::optional<double> forward_ms;
  double grad_sync_ms = 0.0;
  double optimizer_ms = 0.0;
  double grad_reduce_wait_ms = 0.0;  // data parallelism: waiting for gradient reductions
  int buckets_reduced_early = 0;     // gradient buckets whose reduction started in backward
  bool skipped = false;  // non-finite gradients: the update was not applied
  std::optional<double> val_loss;
};

class MetricsWriter {
 public:
  // Empty path: writes nothing. `resumed_step` > 0: a run resumed after that step, which
  // keeps the earlier run's lines up to it (above).
  explicit MetricsWriter(std::string path, std::int64_t resumed_step = 0);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(const StepMetrics& m);
  void finish();  // flush, close, rename into place; the destructor only closes

 private:
  std::string path_;
  std::string partial_path_;
  std::FILE* file_ = nullptr;
};

std::string metrics_json(const StepMetrics& m);

}  // namespace ternion
