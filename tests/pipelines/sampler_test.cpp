#include "pipelines/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;

std::vector<int64_t> indices_of(const Sampler& sampler, const std::vector<int64_t>& perm,
                                int64_t step, int replica) {
  std::vector<int64_t> out(static_cast<size_t>(sampler.per_replica_batch()));
  sampler.replica_indices(perm, step, replica, out);
  return out;
}

TEST(Sampler, StepsAndRemainder) {
  const Sampler sampler(103, 4, 3, 7);
  EXPECT_EQ(sampler.global_batch(), 12);
  EXPECT_EQ(sampler.steps_per_epoch(), 8);
  EXPECT_EQ(sampler.dropped_per_epoch(), 7);
  EXPECT_EQ(sampler.dataset_size(), 103);
  EXPECT_EQ(sampler.per_replica_batch(), 4);
  EXPECT_EQ(sampler.replicas(), 3);
}

TEST(Sampler, PermutationIsAPermutation) {
  const Sampler sampler(1000, 10, 2, 3);
  std::vector<int64_t> perm = sampler.permutation(5);
  ASSERT_EQ(perm.size(), 1000u);
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_NE(perm, identity);
  std::sort(perm.begin(), perm.end());
  EXPECT_EQ(perm, identity);
}

TEST(Sampler, WithoutShuffleIsTheIdentity) {
  const Sampler sampler(20, 3, 2, 9, /*shuffle=*/false);
  std::vector<int64_t> identity(20);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_EQ(sampler.permutation(0), identity);
  EXPECT_EQ(sampler.permutation(3), identity);
  const std::vector<int64_t> perm = sampler.permutation(0);
  EXPECT_EQ(indices_of(sampler, perm, 1, 1), (std::vector<int64_t>{9, 10, 11}));
}

TEST(Sampler, ShardsAreDisjointAndCoverOneEpoch) {
  const Sampler sampler(103, 4, 3, 11);
  for (int64_t epoch : {0, 1, 7}) {
    const std::vector<int64_t> perm = sampler.permutation(epoch);
    std::vector<int64_t> seen;
    for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
      for (int r = 0; r < sampler.replicas(); ++r) {
        const std::vector<int64_t> part = indices_of(sampler, perm, step, r);
        seen.insert(seen.end(), part.begin(), part.end());
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()),
              sampler.steps_per_epoch() * sampler.global_batch());
    const std::set<int64_t> unique(seen.begin(), seen.end());
    EXPECT_EQ(unique.size(), seen.size()) << "a sample was seen twice in epoch " << epoch;
    EXPECT_GE(*unique.begin(), 0);
    EXPECT_LT(*unique.rbegin(), 103);
  }
}

TEST(Sampler, ReplicasTogetherReadTheSingleReplicaBatch) {
  // 4 replicas x batch 5 and 1 replica x batch 20 see the same samples, in the same order
  // when the replicas' slices are concatenated by rank, at every step of every epoch.
  const Sampler many(97, 5, 4, 21);
  const Sampler one(97, 20, 1, 21);
  ASSERT_EQ(many.steps_per_epoch(), one.steps_per_epoch());
  for (int64_t epoch : {0, 2}) {
    const std::vector<int64_t> perm_many = many.permutation(epoch);
    const std::vector<int64_t> perm_one = one.permutation(epoch);
    EXPECT_EQ(perm_many, perm_one);
    for (int64_t step = 0; step < one.steps_per_epoch(); ++step) {
      std::vector<int64_t> joined;
      for (int r = 0; r < many.replicas(); ++r) {
        const std::vector<int64_t> part = indices_of(many, perm_many, step, r);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, indices_of(one, perm_one, step, 0))
          << "epoch " << epoch << " step " << step;
    }
  }
}

TEST(Sampler, EpochsAndSeedsChangeTheOrder) {
  const Sampler a(500, 8, 2, 1);
  const Sampler same(500, 8, 2, 1);
  const Sampler other_seed(500, 8, 2, 2);
  const Sampler other_split(500, 25, 4, 1);  // the order does not depend on the split
  EXPECT_NE(a.permutation(0), a.permutation(1));
  EXPECT_NE(a.permutation(1), a.permutation(2));
  EXPECT_EQ(a.permutation(3), same.permutation(3));
  EXPECT_EQ(a.permutation(3), other_split.permutation(3));
  EXPECT_NE(a.permutation(3), other_seed.permutation(3));
}

TEST(Sampler, DropsADifferentRemainderEachEpoch) {
  const Sampler sampler(50, 4, 3, 5);  // G = 12, 4 steps, 2 dropped
  ASSERT_EQ(sampler.dropped_per_epoch(), 50 % 12);
  std::vector<std::set<int64_t>> dropped;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    const std::vector<int64_t> perm = sampler.permutation(epoch);
    std::set<int64_t> missing;
    for (int64_t i = 0; i < 50; ++i) missing.insert(i);
    for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
      for (int r = 0; r < sampler.replicas(); ++r) {
        for (int64_t i : indices_of(sampler, perm, step, r)) missing.erase(i);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(missing.size()), sampler.dropped_per_epoch());
    dropped.push_back(missing);
  }
  EXPECT_FALSE(dropped[0] == dropped[1] && dropped[1] == dropped[2] && dropped[2] == dropped[3])
      << "the same samples were dropped in every epoch";
}

TEST(Sampler, ShuffleIsUniform) {
  // All 6 orders of 3 elements, counted over 6000 epochs: each near 1000. The seed is fixed,
  // so this is deterministic; a biased shuffle (swapping with any position, giving 4/27 and
  // 5/27 frequencies, i.e. ~889 and ~1111) falls outside the bounds.
  const Sampler sampler(3, 1, 1, 42);
  std::map<std::vector<int64_t>, int> counts;
  for (int64_t epoch = 0; epoch < 6000; ++epoch) ++counts[sampler.permutation(epoch)];
  EXPECT_EQ(counts.size(), 6u);
  for (const auto& [perm, count] : counts) {
    EXPECT_GT(count, 900);
    EXPECT_LT(count, 1100);
  }
}

TEST(Sampler, RejectsBadArguments) {
  EXPECT_CONTAINS(error_of([] { Sampler(100, 64, 2, 1); }),
                  "global batch 128 (64 per replica x 2 replicas) is larger than the dataset's "
                  "100 samples");
  EXPECT_CONTAINS(error_of([] { Sampler(10, 11, 1, 1); }),
                  "global batch 11 (11 per replica x 1 replica) is larger than the dataset's 10 "
                  "samples");
  EXPECT_CONTAINS(error_of([] { Sampler(10, int64_t{1} << 62, 8, 1); }), "larger than the dataset");
  EXPECT_CONTAINS(error_of([] { Sampler(0, 1, 1, 1); }), "at least one sample, not 0");
  EXPECT_CONTAINS(error_of([] { Sampler(10, 0, 1, 1); }), "per-replica batch 0");
  EXPECT_CONTAINS(error_of([] { Sampler(10, -3, 1, 1); }), "per-replica batch -3");
  EXPECT_CONTAINS(error_of([] { Sampler(10, 1, 0, 1); }), "replica count 0");
  EXPECT_CONTAINS(error_of([] { Sampler(10, 1, -1, 1); }), "replica count -1");
  EXPECT_EQ(error_of([] { Sampler(10, 5, 2, 1); }), "<no error thrown>");

  const Sampler sampler(10, 2, 2, 1);
  const std::vector<int64_t> perm = sampler.permutation(0);
  std::vector<int64_t> out(2);
  EXPECT_CONTAINS(error_of([&] { sampler.replica_indices(perm, 2, 0, out); }), "step 2");
  EXPECT_CONTAINS(error_of([&] { sampler.replica_indices(perm, -1, 0, out); }), "step -1");
  EXPECT_CONTAINS(error_of([&] { sampler.replica_indices(perm, 0, 2, out); }), "replica 2");
  std::vector<int64_t> small(1);
  EXPECT_CONTAINS(error_of([&] { sampler.replica_indices(perm, 0, 0, small); }), "holds 1");
  const std::vector<int64_t> short_perm(5);
  EXPECT_CONTAINS(error_of([&] { sampler.replica_indices(short_perm, 0, 0, out); }), "5 indices");
  EXPECT_CONTAINS(error_of([&] { (void)sampler.permutation(-1); }), "epoch -1");
}

}  // namespace
}  // namespace scalescope
