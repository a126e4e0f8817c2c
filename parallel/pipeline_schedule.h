// Pipeline-parallel schedules as data: a pure function gives each pipeline rank the ordered
// list of compute and point-to-point actions of one training step, which an executor runs
// with the communicator and parallel/pipeline_simulator.h runs on a clock to check them.
//
// Virtual stages. With v model chunks per rank (v = 1 unless interleaved) the blocks are cut
// into p * v consecutive pieces, and chunk c on pipeline rank s is virtual stage
//
//   u = c * p + s            (Megatron's interleaving: rank s holds pieces s, s + p, s + 2p...)
//
// Activations flow u -> u + 1 (rank s chunk c to rank s + 1 chunk c, and the last rank's
// chunk c to rank 0's chunk c + 1); gradients flow u + 1 -> u. Virtual stage 0 reads the
// tokens, the last one (p * v - 1) computes the loss.
//
// The list. Each compute action carries its communication with it:
//   RecvActivation(m, c)  immediately before Forward(m, c),  unless u == 0
//   SendActivation(m, c)  immediately after  Forward(m, c),  unless u is the last
//   RecvGradient(m, c)    immediately before Backward(m, c), unless u is the last (its
//                         backward starts from its own loss)
//   SendGradient(m, c)    immediately after  Backward(m, c), unless u == 0
// (the same for BackwardInput, the zero-bubble schedule's backward; its BackwardWeight
// communicates nothing).
// A send or receive names the (micro-batch, chunk) of the compute on this rank; the peer and
// its chunk follow from the virtual stage (pipeline_peer). Receives are posted as late as
// possible, so a rank never waits for data before it is about to use it.
//
// Semantics the executor implements (and the simulator models): a rank runs its list in order;
// a send never blocks (an isend whose buffer is kept until the step ends); a receive blocks
// until the peer has issued the matching send (same kind, micro-batch and virtual-stage
// pair). Since sends never block, a list can only deadlock through its compute order; every
// order below is deadlock-free (the tests simulate every configuration they try).
//
// Compute orders, for M micro-batches on p ranks, rank s:
//   GPipe        F0 .. F(M-1), then B0 .. B(M-1). The backwards go in forward order (not
//                reversed) so that the gradient pipeline fills in the same order as the
//                activation pipeline and every rank consumes its micro-batches first in,
//                first out, as 1F1B does. Holds M micro-batches of activations.
//   OneFOneB     PipeDream-Flush (Narayanan et al. 2021) as Megatron-LM's
//                forward_backward_pipelining_without_interleaving: a warm-up of
//                w = min(p - s - 1, M) forwards, then M - w steady steps of (forward w + i,
//                backward i), then the cool-down backwards M - w .. M - 1. Holds at most
//                min(p - s, M) micro-batches of activations.
//   Interleaved  Megatron-LM's forward_backward_pipelining_with_interleaving over the M * v
//                (micro-batch, chunk) pairs. Micro-batches go in groups of p: the k-th forward
//                runs chunk (k mod pv) / p of micro-batch (k / pv) * p + k mod p, so a group
//                passes through chunk 0, then chunk 1, ...; the k-th backward runs chunk
//                v - 1 - (k mod pv) / p of the same micro-batch. Warm-up:
//                  w = min((p - s - 1) * 2 + (v - 1) * p, M * v)
//                except that with M == p Megatron runs every forward first (w = M * v); then
//                M * v - w steady steps of (forward w + k, backward k); then the cool-down.
//                Requires M to be a multiple of p. v == 1 runs this same code path (warm-up
//                2 (p - s - 1), up to twice 1F1B's activations): OneFOneB is the schedule
//                for one chunk. With p == 1 only v == 1 is accepted: one rank has no other
//                stage to interleave its chunks with.
//   ZeroBubbleH1 Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), handcrafted
//                schedule 1. Each backward is split into B (BackwardInput: the input
//                gradient, which the previous stage waits for) and W (BackwardWeight: the
//                parameter gradients, which nothing waits for). Rank s runs 1F1B's warm-up
//                of w = min(p - s - 1, M) forwards; then s steps of (F, B) whose W waits;
//                then steps of (F, B, W) while forwards remain; then (B, W) for the
//                remaining backwards; then the s deferred W. The deferred W fill the
//                cool-down where 1F1B waits, and the B (about half a backward) go down the
//                pipeline faster. Every rank holds at most min(p, M) micro-batches from
//                their F to their W: 1F1B's first rank's bound, on every rank. With F, B and
//                W of equal cost the bubble is (p - 1)(F + B - W) against 1F1B's
//                (p - 1)(F + B + W): a third. Needs M >= p (fewer leave no room to defer W)
//                and v == 1.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ternion {

enum class PipelineSchedule { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };

struct PipelineAction {
  // Backward: the whole backward of a micro-batch; BackwardInput then BackwardWeight: its two
  // halves, apart (the zero-bubble schedule).
  enum class Kind {
    Forward,
    Backward,
    RecvActivation,
    SendActivation,
    RecvGradient,
    SendGradient,
    BackwardInput,
    BackwardWeight
  };
  Kind kind = Kind::Forward;
  int micro_batch = 0;  // 0-based
  int chunk = 0;        // model chunk on this rank: 0 unless interleaved, then 0..v-1

  friend bool operator==(const PipelineAction&, const PipelineAction&) = default;
};

// One action as it ran (seconds): a compute spans its cost, a receive its wait, a send is a
// point. The simulator's clock and the executor's timeline (for traces) alike.
struct PipelineSpan {
  double start = 0;
  double end = 0;
  PipelineAction action;
};

// The other end of a send or receive: a pipeline rank and the chunk there.
struct PipelinePeer {
  int stage = 0;
  int chunk = 0;
};

// ConfigError, naming the key, for: parallel.pipeline < 1, a micro-batch count < 1 (it is
// training.global_batch_size / (parallel.micro_batch_size x parallel.data)),
// parallel.virtual_stages < 1, more than one virtual stage without the interleaved schedule,
// interleaving on one stage with several chunks, interleaving with a micro-batch count
// that is not a multiple of parallel.pipeline:
//   "interleaving needs the micro-batch count (6) to be a multiple of parallel.pipeline (4)"
// and zb-h1 with fewer micro-batches than stages.
void validate_pipeline_schedule(PipelineSchedule kind, int stages, int micro_batches,
                                int virtual_stages);

// The ordered actions of pipeline rank `stage` (0-based) of `stages`, for `micro_batches`
// micro-batches and `virtual_stages` model chunks per rank (1 unless Interleaved). Validates
// the configuration first (ConfigError as above); a stage outside [0, stages) is a bug
// (InternalError).
std::vector<PipelineAction> pipeline_schedule(PipelineSchedule kind, int stages, int micro_batches,
                                              int virtual_stages, int stage);

// Virtual stage of `chunk` on pipeline rank `stage`: chunk * stages + stage.
int pipeline_virtual_stage(int stages, int stage, int chunk);

// Where a send goes to or a receive comes from, for that action on rank `stage`. InternalError
// for a compute action and for a peer past either end of the pipeline.
PipelinePeer pipeline_peer(const PipelineAction& action, int stages, int virtual_stages, int stage);

bool is_compute(PipelineAction::Kind kind);  // Forward or any backward
bool is_backward(PipelineAction::Kind kind);  // Backward or BackwardInput: takes the gradient
bool is_send(PipelineAction::Kind kind);
bool is_recv(PipelineAction::Kind kind);

// "gpipe", "1f1b", "interleaved", "zb-h1"
const char* pipeline_schedule_name(PipelineSchedule kind);
const char* pipeline_action_kind_name(PipelineAction::Kind kind);  // "Forward", ...
// "RecvActivation(m=3, chunk=1)"
std::string pipeline_action_str(const PipelineAction& action);
std::ostream& operator<<(std::ostream& out, const PipelineAction& action);

}  // namespace ternion
