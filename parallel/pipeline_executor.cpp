#include "parallel/pipeline_executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

namespace ternion {

namespace {
constexpr int kActivation = 0, kGradient = 1;
using Clock = std::chrono::steady_clock;
using Key = std::pair<int, int>;  // (micro-batch, chunk)
using Kind = PipelineAction::Kind;
}  // namespace

PipelineExecutor::PipelineExecutor(Communicator& pipeline, int virtual_stages,
                                   DType activation_dtype, Device device)
    : pipeline_(pipeline),
      virtual_stages_(virtual_stages),
      activation_dtype_(activation_dtype),
      device_(device),
      stages_(pipeline.size()),
      stage_(pipeline.rank()) {
  TN_CHECK(virtual_stages_ >= 1, "a pipeline rank without model chunks");
}

// NCCL connects two ranks on their first point-to-point operation and needs both to ask for
// mirrored connections then: a group {send to 1, recv from 1} on one rank against {recv from
// 0} on the other fails (two ranks) or hangs (more), and that is how a schedule starts (stage
// 0 sends before it receives). PyTorch likewise asks the first batched send/recv of a group
// to involve every rank. So before its first message each stage swaps one element with its
// neighbours, around the ring (the interleaved schedule's last stage sends to the first)
// forward, then backward: every pair then has both directions connected. Every pipeline
// rank enters here at the same point of the run (the start of train or forward_only); the
// swaps complete before any data moves, so tag 0 cannot be confused with a data message.
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
  return (micro_batch * virtual_stages_ + receiving_chunk) * 2 + kind;
}

Tensor PipelineExecutor::receive(const PipelineAction& action, const Shape& shape) {
  const int kind = action.kind == Kind::RecvActivation ? kActivation : kGradient;
  Tensor buffer = Tensor::empty(shape, activation_dtype_, device_);
  pipeline_.recv(buffer, peer(action).stage, tag(kind, action.micro_batch, action.chunk));
  return buffer;
}

PipelineStepResult PipelineExecutor::train(const std::vector<PipelineAction>& actions,
                                           PipelineStage& stage) {
  TN_CHECK(stage.chunks() == virtual_stages_, "a stage of ", stage.chunks(), " chunks for ",
           virtual_stages_, " virtual stages per rank");
  connect_neighbours();
  PipelineStepResult result;
  std::map<Key, Tensor> received, outputs, grad_inputs;
  std::vector<std::pair<WorkHandle, Tensor>> sends;  // each kept alive until it has finished
  int live = 0;  // (micro-batch, chunk) pairs forwarded, their parameter gradients not done
  const auto step_start = Clock::now();
  result.step_start = std::chrono::duration<double>(step_start.time_since_epoch()).count();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - step_start).count(); };
  // The tensor a receive left for `key`, forgotten once taken (undefined where none came).
  auto take = [](std::map<Key, Tensor>& pending, const Key& key) {
    const auto it = pending.find(key);
    if (it == pending.end()) return Tensor();
    Tensor tensor = it->second;
    pending.erase(it);
    return tensor;
  };
  // Finished sends give their buffers back: held to the step's end, a stage would keep an
  // activation and a gradient of every micro-batch (most of a deep pipeline's memory at many
  // micro-batches). Asked right after a receive, which posts the sends NCCL defers together
  // with it: asking earlier would post a deferred send alone, without the receive it pairs
  // with (parallel/comm/cuda/nccl_communicator.h). wait() on a finished one raises its error.
  auto release_finished_sends = [&] {
    std::erase_if(sends, [](std::pair<WorkHandle, Tensor>& sent) {
      if (!sent.first->is_completed()) return false;
      sent.first->wait();
      return true;
    });
  };
  auto send = [&](std::map<Key, Tensor>& pending, const PipelineAction& a, int kind) {
    Tensor tensor = take(pending, {a.micro_batch, a.chunk}).contiguous();
    const PipelinePeer to = peer(a);
    sends.emplace_back(pipeline_.send_async(tensor, to.stage, tag(kind, a.micro_batch, to.chunk)),
                       tensor);
  };

  for (const PipelineAction& a : actions) {
    const Key key{a.micro_batch, a.chunk};
    const double start = seconds();
    switch (a.kind) {
      case Kind::RecvActivation:
      case Kind::RecvGradient:
        // The two kinds never wait for the same key at once: a chunk's input arrives before
        // its forward, its output's gradient after it.
        received[key] = receive(a, stage.boundary_shape(a.micro_batch));
        release_finished_sends();
        break;
      case Kind::Forward: {
        Tensor out = stage.forward(a.micro_batch, a.chunk, take(received, key));
        result.peak_live_contexts = std::max(result.peak_live_contexts, ++live);
        if (out.defined()) outputs[key] = out;
        break;
      }
      case Kind::SendActivation:
        send(outputs, a, kActivation);
        break;
      case Kind::Backward:
      case Kind::BackwardInput: {
        const Tensor grad = take(received, key);
        Tensor dinput = a.kind == Kind::Backward
                            ? stage.backward(a.micro_batch, a.chunk, grad)
                            : stage.backward_input(a.micro_batch, a.chunk, grad);
        if (a.kind == Kind::Backward) --live;
        if (dinput.defined()) grad_inputs[key] = dinput;
        break;
      }
      case Kind::BackwardWeight:
        stage.backward_weight(a.micro_batch, a.chunk);
        --live;  // its activations are gone with its parameter gradients
        break;
      case Kind::SendGradient:
        send(grad_inputs, a, kGradient);
        break;
    }
    result.spans.push_back({start, seconds(), a});
  }
  for (auto& [work, tensor] : sends) work->wait();
  TN_CHECK(live == 0, live, " micro-batches were forwarded but not backwarded");
  return result;
}

void PipelineExecutor::forward_only(int micro_batches, PipelineStage& stage) {
  connect_neighbours();
  for (int m = 0; m < micro_batches; ++m) {
    // Virtual stage by virtual stage; each rank runs its chunks' turns.
    for (int chunk = 0; chunk < virtual_stages_; ++chunk) {
      const bool first = pipeline_virtual_stage(stages_, stage_, chunk) == 0;
      const Tensor input =
          first ? Tensor() : receive({Kind::RecvActivation, m, chunk}, stage.boundary_shape(m));
      const Tensor out = stage.forward(m, chunk, input);
      if (!out.defined()) continue;
      const PipelinePeer to = peer({Kind::SendActivation, m, chunk});
      pipeline_.send(out.contiguous(), to.stage, tag(kActivation, m, to.chunk));
    }
  }
}

}  // namespace ternion
