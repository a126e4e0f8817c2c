#include "training/pipeline_executor.h"

#include <chrono>

namespace ternion {

namespace {
constexpr int kActivation = 0, kGradient = 1;
using Clock = std::chrono::steady_clock;
using Key = std::pair<int, int>;  // (micro-batch, chunk)
}  // namespace

PipelineExecutor::PipelineExecutor(std::vector<GptModel*> chunks, Communicator& pipeline,
                                   std::int64_t d_model, std::int64_t sequence_parts)
    : chunks_(std::move(chunks)),
      pipeline_(pipeline),
      d_model_(d_model),
      sequence_parts_(sequence_parts),
      stages_(pipeline.size()),
      stage_(pipeline.rank()) {
  TN_CHECK(!chunks_.empty(), "a pipeline rank without model chunks");
}

std::pair<int, int> PipelineExecutor::next_of(int chunk) const {
  return stage_ + 1 < stages_ ? std::pair{stage_ + 1, chunk} : std::pair{0, chunk + 1};
}

std::pair<int, int> PipelineExecutor::previous_of(int chunk) const {
  return stage_ > 0 ? std::pair{stage_ - 1, chunk} : std::pair{stages_ - 1, chunk - 1};
}

// NCCL connects two ranks on their first point-to-point operation and needs both to ask for
// mirrored connections then: a group {send to 1, recv from 1} on one rank against {recv from
// 0} on the other fails (two ranks) or hangs (more), and that is how a schedule starts (stage
// 0 sends before it receives). PyTorch likewise asks the first batched send/recv of a group
// to involve every rank. So before its first message each stage swaps one element with its
// neighbours, around the ring (the interleaved schedule's last stage sends to the first)
// forward, then backward: every pair then has both directions connected. Every pipeline
// rank enters here at the same point of the run (the start of train, evaluate or logits);
// the swaps complete before any data moves, so tag 0 cannot be confused with a data message.
void PipelineExecutor::connect_neighbours() {
  if (connected_) return;
  connected_ = true;
  if (stages_ == 1) return;
  const int next = (stage_ + 1) % stages_, previous = (stage_ + stages_ - 1) % stages_;
  for (const auto& [to, from] : {std::pair{next, previous}, std::pair{previous, next}}) {
    Tensor out = Tensor::zeros({1}, activation_dtype_, device_);
    Tensor in = Tensor::empty({1}, activation_dtype_, device_);
    pipeline_.exchange({{P2POp::Kind::Send, out, to, 0}, {P2POp::Kind::Recv, in, from, 0}});
  }
}

int PipelineExecutor::tag(int kind, int micro_batch, int receiving_chunk) const {
  // Unique per (kind, micro-batch, receiving chunk) between two ranks; below the 32767 every
  // MPI guarantees (TrainConfig refuses micro-batch x chunk counts that would pass it).
  return (micro_batch * static_cast<int>(chunks_.size()) + receiving_chunk) * 2 + kind;
}

Tensor PipelineExecutor::receive(int kind, int micro_batch, int chunk, int from_rank,
                                 const Tensor& tokens) {
  Tensor buffer = Tensor::empty({tokens.size(0), tokens.size(1) / sequence_parts_, d_model_},
                                activation_dtype_, device_);
  pipeline_.recv(buffer, from_rank, tag(kind, micro_batch, chunk));
  return buffer;
}

PipelineStepResult PipelineExecutor::train(const std::vector<PipelineAction>& actions,
                                           const std::vector<TokenBatch>& batches,
                                           const MicroBatchInfo& info, float loss_weight) {
  using Kind = PipelineAction::Kind;
  TN_CHECK(!info.loss_weight || *info.loss_weight == loss_weight,
           "pipeline train: the micro-batches' loss weight ", *info.loss_weight,
           " is not the backward's ", loss_weight);
  connect_neighbours();
  PipelineStepResult result;
  std::map<Key, std::unique_ptr<ActivationContext>> contexts;
  std::map<Key, Tensor> inputs, outputs, grad_outputs, grad_inputs;
  std::vector<std::pair<WorkHandle, Tensor>> sends;  // kept alive until the step ends
  std::vector<Tensor> losses;  // the head's per-token losses, read once the step is queued
  const auto step_start = Clock::now();
  result.step_start = std::chrono::duration<double>(step_start.time_since_epoch()).count();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - step_start).count(); };
  // Sends `pending[key]` (and forgets it) to chunk `to` of the peer, asynchronously.
  auto send = [&](std::map<Key, Tensor>& pending, const Key& key, int kind,
                  std::pair<int, int> to) {
    Tensor tensor = pending.at(key).contiguous();
    pending.erase(key);
    sends.emplace_back(pipeline_.send_async(tensor, to.first, tag(kind, key.first, to.second)),
                       tensor);
  };

  for (const PipelineAction& a : actions) {
    const Key key{a.micro_batch, a.chunk};
    const TokenBatch& batch = batches.at(static_cast<std::size_t>(a.micro_batch));
    GptModel& chunk = *chunks_.at(static_cast<std::size_t>(a.chunk));
    const double start = seconds();
    switch (a.kind) {
      case Kind::RecvActivation:
        inputs[key] = receive(kActivation, a.micro_batch, a.chunk, previous_of(a.chunk).first,
                              batch.inputs);
        break;
      case Kind::Forward: {
        MicroBatchInfo mb = info;
        mb.micro_batch = a.micro_batch;
        mb.sample_offset = info.sample_offset + a.micro_batch * batch.inputs.size(0);
        auto& ctx = contexts[key] = std::make_unique<ActivationContext>(mb);
        result.peak_live_contexts =
            std::max(result.peak_live_contexts, static_cast<int>(contexts.size()));
        const Tensor input = chunk.chunk().has_embedding ? batch.inputs : inputs.at(key);
        Tensor micro_losses;
        Tensor out = chunk.forward_chunk(input, batch.targets, *ctx, &micro_losses);
        if (micro_losses.defined()) losses.push_back(micro_losses);
        inputs.erase(key);
        if (out.defined()) outputs[key] = out;
        break;
      }
      case Kind::SendActivation:
        send(outputs, key, kActivation, next_of(a.chunk));
        break;
      case Kind::RecvGradient:
        grad_outputs[key] = receive(kGradient, a.micro_batch, a.chunk, next_of(a.chunk).first,
                                    batch.inputs);
        break;
      case Kind::Backward: {
        auto it = contexts.find(key);
        TN_CHECK(it != contexts.end(), "backward of micro-batch ", a.micro_batch, " chunk ",
                 a.chunk, " before its forward");
        const Tensor grad = chunk.chunk().has_head ? Tensor() : grad_outputs.at(key);
        Tensor dinput = chunk.backward_chunk(grad, loss_weight, *it->second);
        TN_CHECK(it->second->empty(), "activations left over after backward");
        contexts.erase(it);
        grad_outputs.erase(key);
        if (dinput.defined()) grad_inputs[key] = dinput;
        break;
      }
      case Kind::SendGradient:
        send(grad_inputs, key, kGradient, previous_of(a.chunk));
        break;
    }
    result.spans.push_back({start, seconds(), a});
  }
  for (auto& [work, tensor] : sends) work->wait();
  TN_CHECK(contexts.empty(), contexts.size(), " micro-batches were forwarded but not backwarded");
  for (const Tensor& micro_losses : losses) result.loss_sum += summed_loss(micro_losses);
  return result;
}

double PipelineExecutor::evaluate(const std::vector<TokenBatch>& batches) {
  connect_neighbours();
  double loss_sum = 0.0;
  for (std::size_t m = 0; m < batches.size(); ++m) {
    // Virtual stage by virtual stage; each rank runs its chunks' turns.
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      const int chunk = static_cast<int>(c);
      MicroBatchInfo info;
      info.training = false;
      ActivationContext ctx(info);
      GptModel& model = *chunks_[c];
      const Tensor input = model.chunk().has_embedding
                               ? batches[m].inputs
                               : receive(kActivation, static_cast<int>(m), chunk,
                                         previous_of(chunk).first, batches[m].inputs);
      Tensor losses;
      Tensor out = model.forward_chunk(input, batches[m].targets, ctx, &losses);
      if (losses.defined()) loss_sum += summed_loss(losses);
      if (out.defined()) {
        const auto [to_rank, to_chunk] = next_of(chunk);
        pipeline_.send(out.contiguous(), to_rank, tag(kActivation, static_cast<int>(m), to_chunk));
      }
    }
  }
  return loss_sum;
}

Tensor PipelineExecutor::logits(const Tensor& tokens) {
  connect_neighbours();
  Tensor result;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const int chunk = static_cast<int>(c);
    MicroBatchInfo info;
    info.training = false;
    ActivationContext ctx(info);
    GptModel& model = *chunks_[c];
    const Tensor input = model.chunk().has_embedding
                             ? tokens
                             : receive(kActivation, 0, chunk, previous_of(chunk).first, tokens);
    Tensor out = model.forward_chunk_logits(input, ctx);
    if (model.chunk().has_head) {
      result = out;
    } else {
      const auto [to_rank, to_chunk] = next_of(chunk);
      pipeline_.send(out.contiguous(), to_rank, tag(kActivation, 0, to_chunk));
    }
  }
  return result;
}

}  // namespace ternion
