#include "pipelines/sampler.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/random.h"

namespace scalescope {

Sampler::Sampler(int64_t dataset_size, int64_t per_replica_batch, int replicas, uint64_t seed,
                 bool shuffle)
    : size_(dataset_size),
      batch_(per_replica_batch),
      replicas_(replicas),
      seed_(seed),
      shuffle_(shuffle) {
  SS_CHECK(dataset_size > 0, "the dataset must hold at least one sample, not {}", dataset_size);
  SS_CHECK(per_replica_batch > 0, "the per-replica batch {} must be positive", per_replica_batch);
  SS_CHECK(replicas > 0, "the replica count {} must be positive", replicas);
  // batch × replicas <= size, phrased with a division so that an absurd batch cannot overflow.
  if (per_replica_batch > dataset_size / replicas) {
    const std::string global = per_replica_batch <= std::numeric_limits<int64_t>::max() / replicas
                                   ? std::to_string(per_replica_batch * replicas)
                                   : std::string("beyond 2^63");
    throw_usage_error(fmt::format(
        "global batch {} ({} per replica x {} replica{}) is larger than the dataset's {} samples",
        global, per_replica_batch, replicas, replicas == 1 ? "" : "s", dataset_size));
  }
}

std::vector<int64_t> Sampler::permutation(int64_t epoch) const {
  SS_CHECK(epoch >= 0, "epoch {} must not be negative", epoch);
  std::vector<int64_t> perm(static_cast<size_t>(size_));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (!shuffle_) return perm;
  // Fisher-Yates from the back. The generator depends on (seed, epoch) only, so every
  // replica, and every replica count, computes the same order.
  Rng rng(seed_, static_cast<uint64_t>(epoch));
  for (int64_t i = size_ - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

void Sampler::replica_indices(std::span<const int64_t> perm, int64_t step, int replica,
                              std::span<int64_t> out) const {
  // Cheap checks (once per batch) that turn a caller's mistake into a message rather than an
  // out-of-bounds read.
  SS_CHECK(static_cast<int64_t>(perm.size()) == size_,
           "a permutation of {} indices does not fit a dataset of {} samples", perm.size(), size_);
  SS_CHECK(step >= 0 && step < steps_per_epoch(), "step {} is outside the epoch's steps [0, {})",
           step, steps_per_epoch());
  SS_CHECK(replica >= 0 && replica < replicas_, "replica {} is outside [0, {})", replica,
           replicas_);
  SS_CHECK(static_cast<int64_t>(out.size()) == batch_,
           "the output holds {} indices, not the per-replica batch {}", out.size(), batch_);
  const int64_t begin = step * global_batch() + static_cast<int64_t>(replica) * batch_;
  std::copy_n(perm.begin() + begin, batch_, out.begin());
}

}  // namespace scalescope
