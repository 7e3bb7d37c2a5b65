// Sharding and shuffling of a dataset over replicas.
//
// Every epoch has one permutation of the dataset, seeded by (seed, epoch) and independent of
// the replica count. Step k of the epoch takes the global batch perm[k·G, (k+1)·G) with
// G = per-replica batch × replicas, and replica r reads its slice [r·B, (r+1)·B). So N
// replicas × batch B and 1 replica × batch N·B see the same samples in the same steps, no
// sample is seen twice in an epoch, and every replica runs the same number of steps. The
// remainder (size mod G samples) is dropped each epoch; a different one every epoch, since
// the permutation changes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace scalescope {

class Sampler {
 public:
  // Throws Error when the global batch is larger than the dataset (naming both) or any
  // argument is not positive.
  Sampler(int64_t dataset_size, int64_t per_replica_batch, int replicas, uint64_t seed,
          bool shuffle = true);

  int64_t dataset_size() const { return size_; }
  int64_t per_replica_batch() const { return batch_; }
  int replicas() const { return replicas_; }
  int64_t global_batch() const { return batch_ * replicas_; }
  int64_t steps_per_epoch() const { return size_ / global_batch(); }
  int64_t dropped_per_epoch() const { return size_ % global_batch(); }

  // The dataset order of `epoch` (the identity without shuffling).
  std::vector<int64_t> permutation(int64_t epoch) const;
  // Writes the per_replica_batch() sample indices that `replica` reads in step `step` of an
  // epoch whose permutation is `perm`. REQUIRES: 0 <= step < steps_per_epoch().
  void replica_indices(std::span<const int64_t> perm, int64_t step, int replica,
                       std::span<int64_t> out) const;

 private:
  int64_t size_;
  int64_t batch_;
  int replicas_;
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace scalescope
