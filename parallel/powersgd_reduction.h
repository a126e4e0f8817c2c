// PowerSGD (Vogels et al., "PowerSGD: Practical Low-Rank Gradient Compression for Distributed
// Optimization", NeurIPS 2019), as PyTorch's DDP communication hook applies it to a bucket:
// each matrix gradient worth compressing is sent as two thin matrices of rank r, with error
// feedback; everything else in the bucket is all-reduced whole.
//
// For a gradient G (n x m) of this rank, its residual E (what earlier steps did not send) and
// its Q (m x r, random at first, then last step's: one power iteration per step):
//   M = G + E;  P = M Q;  all-reduce P;  P = orthonormal columns of P;
//   Q = M^T P;  all-reduce Q;  G = P Q^T  (the sum over ranks of M, projected on P's columns);
//   E = M - P Q^T / D   (the residuals of the D ranks together hold what the sum lost).
// A bucket whose sums are not finite (a rank's gradient spiked: the trainer skips the step)
// keeps its E and Q and hands back NaN, so the next step goes on as if this one had not come.
// A step skipped for another bucket's spike still moves this bucket's E and Q on: undoing that
// would take a second copy of every residual.
// The first `start_step` reductions of each bucket are plain all-reduces (PyTorch's
// start_powerSGD_iter: compressing the large, fast-changing gradients of the first steps
// costs more in learning than it saves).
// A matrix is compressed where that sends at most half its elements ((n + m) r <= n m / 2,
// PyTorch's min_compression_rate of 2); vectors, and matrices too thin to gain, travel whole
// in the first all-reduce. The bytes on the wire per step: (n + m) r per compressed matrix.
//
// Orthonormalisation is modified Gram-Schmidt on the host (P is n x r, r small): a column that
// depends on the earlier ones (a gradient of rank below r) becomes zero, not amplified noise. Sums,
// not averages: the reducer sums gradients (gradient_reducer.h).
//
// Flat over the data group, all-reduce only: ZeRO's reduce-scatter is refused (the config
// refuses ZeRO with PowerSGD), as is a bf16 wire.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/bucket_reduction.h"

namespace ternion {

class PowerSgdReduction final : public BucketReduction {
 public:
  // `min_compression_rate`: compress a matrix where n m >= rate (n + m) r (tests pass 0).
  PowerSgdReduction(Communicator& data, int rank, std::uint64_t seed, std::int64_t start_step = 0,
                    double min_compression_rate = 2.0);
  void plan(const std::vector<std::vector<BucketMember>>& buckets) override;
  int size() const override { return comm_->size(); }
  int shard_index() const override { return comm_->rank(); }
  WorkHandle all_reduce(std::size_t bucket, Tensor& whole) override;
  WorkHandle reduce_scatter(std::size_t bucket, Tensor& shard, const Tensor& whole) override;
  WorkHandle all_gather(Tensor& whole, const Tensor& shard) override;
  void progress() override { chains_.progress(); }
  std::string describe() const override;

  // Elements all-reduced per step against the buckets' elements (the compression's gain).
  std::int64_t wire_elements() const { return wire_elements_; }
  std::int64_t bucket_elements() const { return bucket_elements_; }
  // This rank's residuals, one per compressed matrix (what it has not sent yet).
  std::vector<Tensor> residuals() const;
  // "residual/NAME" and "q/NAME" of every compressed matrix: this rank's own, and valid only
  // in the layout and PowerSGD rank that made them.
  std::vector<std::pair<std::string, Tensor>> state(Device device) override;
  void resume_after(std::int64_t steps) override;

 private:
  struct Matrix {
    std::string name;
    std::int64_t offset = 0, rows = 0, cols = 0;
    Tensor residual;  // E (rows x cols)
    Tensor q;         // cols x r, a view of its bucket's qs
    Tensor next_q;    // the next step's Q while a reduction runs: a view of its bucket's next_qs
  };
  struct Bucket {
    std::vector<Matrix> matrices;
    std::vector<std::pair<std::int64_t, std::int64_t>> whole;  // (offset, numel) sent uncompressed
    std::int64_t p_elements = 0, whole_elements = 0;
    Tensor qs;       // every matrix's Q back to back
    Tensor next_qs;  // the next Qs: what the second all-reduce sums; swapped with qs after it
    std::int64_t reductions = 0;  // all_reduce calls so far: one a step
  };
  // First use: residuals zero, Q random and the same on every rank.
  void make_state(Bucket& bucket, Device device) const;

  // A communicator of its own (a split of the data group, collective at construction): its
  // second all-reduce starts when the first completes, which differs between ranks, so it
  // must not share a communicator with what the trainer sends over the data group meanwhile.
  std::unique_ptr<Communicator> comm_;
  int rank_;
  std::uint64_t seed_;
  std::int64_t start_step_;
  double min_compression_rate_;
  std::vector<Bucket> buckets_;
  std::int64_t wire_elements_ = 0, bucket_elements_ = 0;
  CollectiveChains chains_;
};

}  // namespace ternion
