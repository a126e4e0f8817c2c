#include "parallel/powersgd_reduction.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "framework/error.h"
#include "framework/philox.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"

namespace ternion {

namespace {

// out (n x r) = the columns of p (n x r) made orthonormal by modified Gram-Schmidt, on the
// host in double (r is small). A column that is (nearly) a combination of the earlier ones,
// as a low-rank gradient gives, becomes zero rather than amplified rounding: P P^T stays a
// projection.
void orthonormalize(Tensor& out, const Tensor& p) {
  const std::int64_t n = p.size(0), r = p.size(1);
  const std::vector<float> in = p.to_vector();
  std::vector<double> q(in.begin(), in.end());
  const auto at = [r](std::int64_t i, std::int64_t j) {
    return static_cast<std::size_t>(i * r + j);
  };
  const auto column_norm = [&](std::int64_t j) {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += q[at(i, j)] * q[at(i, j)];
    return std::sqrt(s);
  };
  for (std::int64_t j = 0; j < r; ++j) {
    const double before = column_norm(j);
    for (std::int64_t k = 0; k < j; ++k) {
      double dot = 0;
      for (std::int64_t i = 0; i < n; ++i) dot += q[at(i, k)] * q[at(i, j)];
      for (std::int64_t i = 0; i < n; ++i) q[at(i, j)] -= dot * q[at(i, k)];
    }
    const double norm = column_norm(j);
    const double scale = norm > 1e-5 * before && norm > 1e-30 ? 1.0 / norm : 0.0;
    for (std::int64_t i = 0; i < n; ++i) q[at(i, j)] *= scale;
  }
  const std::vector<float> result(q.begin(), q.end());
  out.copy_from(Tensor::from_vector(result, {n, r}).to(p.device()));
}

}  // namespace

PowerSgdReduction::PowerSgdReduction(Communicator& data, int rank, std::uint64_t seed,
                                     std::int64_t start_step, double min_compression_rate)
    : comm_(data.split(0, data.rank(), data.name() + "-powersgd")),
      rank_(rank),
      seed_(seed),
      start_step_(start_step),
      min_compression_rate_(min_compression_rate) {
  TN_CHECK(rank >= 1, "PowerSGD rank ", rank);
  TN_CHECK(comm_ != nullptr, "PowerSGD: the split of ", data.name(), " left rank ", data.rank(),
           " out");
}

void PowerSgdReduction::plan(const std::vector<std::vector<BucketMember>>& buckets) {
  buckets_.assign(buckets.size(), Bucket{});
  wire_elements_ = bucket_elements_ = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    Bucket& bucket = buckets_[b];
    for (const BucketMember& m : buckets[b]) {
      std::int64_t numel = 1;
      for (std::int64_t d : m.shape) numel *= d;
      bucket_elements_ += numel;
      const std::int64_t rows = m.shape.size() == 2 ? m.shape[0] : 0;
      const std::int64_t cols = m.shape.size() == 2 ? m.shape[1] : 0;
      const std::int64_t thin = (rows + cols) * rank_;
      if (m.shape.size() == 2 && rows >= rank_ && cols >= rank_ &&
          static_cast<double>(numel) >= min_compression_rate_ * static_cast<double>(thin)) {
        bucket.matrices.push_back({m.name, m.offset, rows, cols, Tensor(), Tensor(), Tensor()});
        bucket.p_elements += rows * rank_;
        wire_elements_ += thin;
      } else {
        bucket.whole.emplace_back(m.offset, numel);
        bucket.whole_elements += numel;
        wire_elements_ += numel;
      }
    }
  }
}

void PowerSgdReduction::make_state(Bucket& bucket, Device device) const {
  const std::int64_t r = rank_;
  std::int64_t q_elements = 0;
  for (const Matrix& m : bucket.matrices) q_elements += m.cols * r;
  std::vector<float> q(static_cast<std::size_t>(q_elements));
  std::int64_t at = 0;
  for (const Matrix& m : bucket.matrices) {
    const RngStream stream{seed_, mix_stream(hash_name("powersgd"), hash_name(m.name))};
    for (std::int64_t i = 0; i < m.cols * r; ++i)
      q[static_cast<std::size_t>(at + i)] = philox_normal(stream, static_cast<std::uint64_t>(i));
    at += m.cols * r;
  }
  bucket.qs = Tensor::from_vector(q, {q_elements}).to(device);
  bucket.next_qs = Tensor::empty({q_elements}, DType::F32, device);
  at = 0;
  for (Matrix& m : bucket.matrices) {
    m.residual = Tensor::zeros({m.rows, m.cols}, DType::F32, device);
    m.q = bucket.qs.slice(0, at, m.cols * r).view({m.cols, r});
    m.next_q = bucket.next_qs.slice(0, at, m.cols * r).view({m.cols, r});
    at += m.cols * r;
  }
}

WorkHandle PowerSgdReduction::all_reduce(std::size_t b, Tensor& whole_bucket) {
  TN_CHECK(b < buckets_.size(), "PowerSGD: bucket ", b, " of ", buckets_.size(), " planned");
  Bucket& bucket = buckets_[b];
  const Device device = whole_bucket.device();
  const std::int64_t r = rank_;
  if (bucket.reductions++ < start_step_) {
    Tensor all = whole_bucket.view({-1});
    return chains_.submit({{comm_.get(), [comm = comm_.get(), all]() mutable {
                              return comm->all_reduce_async(all, ReduceOp::Sum);
                            }, {}}});
  }
  if (!bucket.qs.defined()) make_state(bucket, device);
  Tensor whole = whole_bucket.view({-1});
  Bucket* k = &bucket;  // buckets_ is not resized after plan()
  const float inverse_ranks = 1.0f / static_cast<float>(comm_->size());
  // The first all-reduce: every P, then the elements sent whole. `ortho` holds the P's made
  // orthonormal, for the second stage and the update. M = G + E is made in the bucket, so that
  // E and Q stay as they were until the sums are known to be finite.
  Tensor first = Tensor::empty({k->p_elements + k->whole_elements}, DType::F32, device);
  Tensor ortho = Tensor::empty({std::max<std::int64_t>(k->p_elements, 1)}, DType::F32, device);
  const auto p_of = [k, r](const Tensor& buffer, std::size_t i) {
    std::int64_t at = 0;
    for (std::size_t j = 0; j < i; ++j) at += k->matrices[j].rows * r;
    return buffer.slice(0, at, k->matrices[i].rows * r).view({k->matrices[i].rows, r});
  };
  const auto gradient = [k, whole](std::size_t i) {
    const Matrix& m = k->matrices[i];
    return whole.slice(0, m.offset, m.rows * m.cols).view({m.rows, m.cols});
  };
  Communicator* comm = comm_.get();
  std::vector<ChainStage> stages;
  stages.push_back(
      {comm,
       [comm, k, first, whole, gradient, p_of]() mutable {
         for (std::size_t i = 0; i < k->matrices.size(); ++i) {
           Matrix& m = k->matrices[i];
           Tensor g = gradient(i);
           accumulate(g, m.residual);  // M = G + E
           Tensor p = p_of(first, i);
           matmul(p, g, m.q, false, false);
         }
         std::int64_t at = k->p_elements;
         for (const auto& [offset, numel] : k->whole) {
           first.slice(0, at, numel).copy_from(whole.slice(0, offset, numel));
           at += numel;
         }
         return comm->all_reduce_async(first, ReduceOp::Sum);
       },
       [k, first, whole, ortho, p_of]() mutable {
         for (std::size_t i = 0; i < k->matrices.size(); ++i) {
           Tensor out = p_of(ortho, i);
           orthonormalize(out, p_of(first, i));
         }
         std::int64_t at = k->p_elements;
         for (const auto& [offset, numel] : k->whole) {
           whole.slice(0, offset, numel).copy_from(first.slice(0, at, numel));
           at += numel;
         }
       }});
  if (k->matrices.empty()) return chains_.submit(std::move(stages));
  // The second: every next Q = M^T P; then E = M - P Q^T / D and G = P Q^T. Where a rank's M
  // was not finite (a loss spike: the trainer skips the step), the sums show it on every rank
  // alike: E and Q stay as they were, so the next step compresses as if this one had not
  // happened, and G is NaN, so that the step is skipped whatever P Q^T gives.
  stages.push_back(
      {comm,
       [comm, k, ortho, gradient, p_of]() mutable {
         for (std::size_t i = 0; i < k->matrices.size(); ++i)
           matmul(k->matrices[i].next_q, gradient(i), p_of(ortho, i), true, false);
         return comm->all_reduce_async(k->next_qs, ReduceOp::Sum);
       },
       [k, first, ortho, gradient, p_of, inverse_ranks]() mutable {
         const bool finite = all_finite(first.slice(0, 0, k->p_elements)) &&
                             all_finite(k->next_qs);
         for (std::size_t i = 0; i < k->matrices.size(); ++i) {
           Matrix& m = k->matrices[i];
           Tensor g = gradient(i);
           if (!finite) {
             g.fill(std::numeric_limits<float>::quiet_NaN());
             continue;
           }
           const Tensor p = p_of(ortho, i);
           m.residual.copy_from(g);
           matmul(m.residual, p, m.next_q, false, true, -inverse_ranks, 1.0f);
           matmul(g, p, m.next_q, false, true);
           std::swap(m.q, m.next_q);
         }
         if (finite) std::swap(k->qs, k->next_qs);
       }});
  return chains_.submit(std::move(stages));
}

WorkHandle PowerSgdReduction::reduce_scatter(std::size_t, Tensor&, const Tensor&) {
  TN_THROW(ConfigError, "parallel.grad_compression: powersgd reduces whole buckets only; it does "
                        "not run with parallel.zero_stage 1 or 2");
}

WorkHandle PowerSgdReduction::all_gather(Tensor& whole, const Tensor& shard) {
  return comm_->all_gather_async(whole, shard);
}

std::vector<Tensor> PowerSgdReduction::residuals() const {
  std::vector<Tensor> out;
  for (const Bucket& b : buckets_)
    for (const Matrix& m : b.matrices)
      if (m.residual.defined()) out.push_back(m.residual);
  return out;
}

std::vector<std::pair<std::string, Tensor>> PowerSgdReduction::state(Device device) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (Bucket& b : buckets_) {
    if (!b.qs.defined()) make_state(b, device);
    for (const Matrix& m : b.matrices) {
      out.emplace_back("residual/" + m.name, m.residual);
      out.emplace_back("q/" + m.name, m.q);
    }
  }
  return out;
}

void PowerSgdReduction::resume_after(std::int64_t steps) {
  for (Bucket& b : buckets_) b.reductions = steps;
}

std::string PowerSgdReduction::describe() const {
  std::ostringstream text;
  text << "PowerSGD of rank " << rank_ << " over " << comm_->name();
  if (start_step_ > 0) text << " from step " << start_step_ + 1;
  text << ", " << wire_elements_ << " of " << bucket_elements_ << " elements on the wire ("
       << (wire_elements_ > 0
               ? static_cast<double>(bucket_elements_) / static_cast<double>(wire_elements_)
               : 0.0)
       << "x fewer)";
  return text.str();
}

}  // namespace ternion
