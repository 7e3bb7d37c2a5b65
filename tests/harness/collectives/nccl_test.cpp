// The NCCL communicator. Argument checks (made before any NCCL or CUDA call) run everywhere;
// the collectives need a GPU and skip without one. Built only with SCALESCOPE_WITH_CUDA.
#include "harness/collectives/nccl_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/cpu/cpu_device.h"
#include "core/error.h"
#include "core/tensor.h"

namespace scalescope {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTimeout{60'000};

bool have_gpu() {
  return backend(DeviceKind::kCuda).device_count() > 0;
}

#define SKIP_WITHOUT_GPU()                                                                         \
  do {                                                                                             \
    if (!have_gpu()) {                                                                             \
      GTEST_SKIP() << "no GPU to run NCCL on (" << backend(DeviceKind::kCuda).unavailable_reason() \
                   << ")";                                                                         \
    }                                                                                              \
  } while (0)

// A host communicator that only has to say who it is (the argument checks look no further).
class FakeHostComm final : public Communicator {
 public:
  FakeHostComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "fake"; }
  void all_reduce(float*, int64_t, ReduceOp, Stream&) override {}
  void broadcast(float*, int64_t, int, Stream&) override {}
  void barrier() override {}
  std::vector<double> all_gather(std::span<const double> mine) override {
    return {mine.begin(), mine.end()};
  }

 private:
  int rank_;
  int size_;
};

// A bootstrap for a process that does not host global rank 0: hands out a fixed id, so
// that no NCCL call is made by the group itself.
NcclGroup::ShareId fixed_id(size_t bytes = kNcclUniqueIdBytes) {
  return [bytes](std::vector<char> mine) {
    EXPECT_TRUE(mine.empty()) << "only global rank 0's process offers an id";
    return std::vector<char>(bytes, 7);
  };
}

template <typename Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NcclGroupTest, RefusesBadGroupArguments) {
  EXPECT_THROW(NcclGroup(0, kTimeout, fixed_id(), 1), Error);
  EXPECT_THROW(NcclGroup(1, milliseconds(0), fixed_id(), 1), Error);
  EXPECT_THROW(NcclGroup(1, kTimeout, fixed_id(), -1), Error);
  // Not global rank 0 and no way to receive its id.
  EXPECT_NE(error_of([] { NcclGroup(1, kTimeout, {}, 1); }).find("share_id"), std::string::npos);
  // An id of the wrong size from the bootstrap.
  EXPECT_NE(error_of([] { NcclGroup(1, kTimeout, fixed_id(5), 1); }).find("5 bytes"),
            std::string::npos);
}

// NCCL_COMM_BLOCKING=1 would make NCCL's calls block past every timeout: refused when the
// group is made, before any NCCL call; 0 (what scalescope asks for anyway) is fine.
TEST(NcclGroupTest, RefusesNcclCommBlockingWhichWouldOutlastTheTimeout) {
  ASSERT_EQ(setenv("NCCL_COMM_BLOCKING", "1", 1), 0);
  const std::string what = error_of([] { NcclGroup(1, kTimeout, fixed_id(), 1); });
  ASSERT_EQ(setenv("NCCL_COMM_BLOCKING", "0", 1), 0);
  EXPECT_NO_THROW(NcclGroup(1, kTimeout, fixed_id(), 1));
  ASSERT_EQ(unsetenv("NCCL_COMM_BLOCKING"), 0);
  EXPECT_NE(what.find("NCCL_COMM_BLOCKING=1"), std::string::npos) << what;
  EXPECT_NE(what.find("--collective-timeout-ms"), std::string::npos) << what;
}

TEST(NcclGroupTest, RefusesBadConnectArgumentsBeforeTouchingNccl) {
  // This process hosts global ranks 2 and 3 of 4.
  NcclGroup group(2, kTimeout, fixed_id(), 2);
  EXPECT_EQ(group.size(), 2);
  EXPECT_EQ(group.first_global_rank(), 2);
  auto host = [](int rank, int size) { return std::make_unique<FakeHostComm>(rank, size); };
  EXPECT_THROW(group.connect(-1, 0, 1, 4, host(1, 4)), Error);
  EXPECT_THROW(group.connect(2, 0, 4, 4, host(4, 4)), Error);  // local rank out of range
  EXPECT_NE(error_of([&] { group.connect(0, 0, 3, 4, host(3, 4)); }).find("global rank 2"),
            std::string::npos);
  EXPECT_THROW(group.connect(0, 0, 2, 3, host(2, 3)), Error);  // the world is too small
  EXPECT_THROW(group.connect(0, -1, 2, 4, host(2, 4)), Error);
  EXPECT_NE(error_of([&] { group.connect(0, 0, 2, 4, nullptr); }).find("host communicator"),
            std::string::npos);
  EXPECT_NE(error_of([&] { group.connect(0, 0, 2, 4, host(1, 4)); }).find("host communicator"),
            std::string::npos);
}

TEST(NcclGroupTest, ConnectWithoutAGpuFailsInsteadOfHanging) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present: ConnectTimesOutWhenAPeerNeverJoins covers it";
  NcclGroup group(1, kTimeout, fixed_id(), 1);
  const std::string what =
      error_of([&] { group.connect(0, 0, 1, 2, std::make_unique<FakeHostComm>(1, 2)); });
  EXPECT_NE(what.find("CUDA"), std::string::npos) << what;
  // A rank connects once, even when its first attempt failed.
  EXPECT_NE(error_of([&] {
              group.connect(0, 0, 1, 2, std::make_unique<FakeHostComm>(1, 2));
            }).find("already connected"),
            std::string::npos);
}

// One rank on GPU 0: the collectives of a group of one are identities, which is enough to
// check that they are enqueued on the right stream with the right arguments.
class NcclOneRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    device_ = backend(DeviceKind::kCuda).open(0, BackendOptions{});
    device_->make_current();
    gloo_ = std::make_unique<GlooGroup>(1, kTimeout);
    group_ = std::make_unique<NcclGroup>(1, kTimeout);
    comm_ = group_->connect(0, 0, 0, 1, gloo_->connect(0));
  }
  void TearDown() override {
    comm_.reset();  // before the device its streams belong to
  }

  Device& device() { return *device_; }
  NcclCommunicator& comm() { return *comm_; }

 private:
  std::unique_ptr<Device> device_;
  std::unique_ptr<GlooGroup> gloo_;
  std::unique_ptr<NcclGroup> group_;
  std::unique_ptr<NcclCommunicator> comm_;
};

TEST_F(NcclOneRankTest, AllReduceOfOneRankIsTheIdentity) {
  EXPECT_EQ(comm().rank(), 0);
  EXPECT_EQ(comm().size(), 1);
  EXPECT_EQ(comm().backend_name(), "nccl");
  EXPECT_EQ(comm().device_index(), 0);
  std::vector<float> values(10'000);
  std::iota(values.begin(), values.end(), -5000.0f);
  Tensor t(device(), Shape{static_cast<int64_t>(values.size())});
  t.copy_from_host(values);  // synchronous: done before the collective is enqueued
  Stream& comm_stream = device().comm_stream();
  comm().all_reduce(t.data(), t.numel(), ReduceOp::kAverage, comm_stream);
  comm().all_reduce(t.data(), t.numel(), ReduceOp::kSum, comm_stream);
  comm().wait(comm_stream, "all_reduce test");
  EXPECT_EQ(t.to_host(), values);
  comm().all_reduce(t.data(), 0, ReduceOp::kSum, comm_stream);  // nothing to do
}

TEST_F(NcclOneRankTest, BroadcastFromRootZeroAndRefusesOtherRoots) {
  std::vector<float> values = {1.0f, 2.0f, 3.0f};
  Tensor t(device(), Shape{3});
  t.copy_from_host(values);
  comm().broadcast(t.data(), t.numel(), 0, device().comm_stream());
  comm().wait(device().comm_stream());
  EXPECT_EQ(t.to_host(), values);
  EXPECT_THROW(comm().broadcast(t.data(), t.numel(), 1, device().comm_stream()), Error);
}

TEST_F(NcclOneRankTest, HostValuesGoThroughTheHostCommunicator) {
  const std::vector<double> mine = {1.5, -2.5};
  EXPECT_EQ(comm().all_gather(mine), mine);
  comm().barrier();
}

TEST_F(NcclOneRankTest, RefusesAStreamOfAnotherKindAndStaysUsable) {
  CpuDevice cpu(0, 1);
  float x = 1.0f;
  const std::string what =
      error_of([&] { comm().all_reduce(&x, 1, ReduceOp::kSum, cpu.default_stream()); });
  EXPECT_NE(what.find("cuda device 0"), std::string::npos) << what;
  EXPECT_NE(what.find("cpu device 0"), std::string::npos) << what;
  EXPECT_THROW(comm().broadcast(&x, 1, 0, cpu.default_stream()), Error);
  EXPECT_THROW(comm().wait(cpu.default_stream()), Error);
  EXPECT_THROW(comm().all_reduce(&x, -1, ReduceOp::kSum, device().comm_stream()), Error);
  // Refused before anything was enqueued: the communicator still works.
  Tensor t(device(), Shape{4});
  t.copy_from_host(std::vector<float>{4, 3, 2, 1});
  comm().all_reduce(t.data(), 4, ReduceOp::kAverage, device().comm_stream());
  comm().wait(device().comm_stream());
  EXPECT_EQ(t.to_host(), (std::vector<float>{4, 3, 2, 1}));
}

TEST(NcclGroupTest, ConnectTimesOutWhenAPeerNeverJoins) {
  SKIP_WITHOUT_GPU();
  // Global rank 0 of a world of 2 whose rank 1 never comes: NCCL's bootstrap waits for it,
  // and connect must give up at the timeout.
  NcclGroup group(
      1, milliseconds(3000), [](std::vector<char> mine) { return mine; }, 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string what =
      error_of([&] { group.connect(0, 0, 0, 2, std::make_unique<FakeHostComm>(0, 2)); });
  EXPECT_NE(what.find("timed out after 3000 ms"), std::string::npos) << what;
  EXPECT_NE(what.find("rank 0 of 2"), std::string::npos) << what;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST(NcclGroupTest, AbortStopsAConnectWaitingForAPeer) {
  SKIP_WITHOUT_GPU();
  NcclGroup group(
      1, kTimeout, [](std::vector<char> mine) { return mine; }, 0);
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    group.abort("replica 1 failed to build its model");
  });
  const std::string what =
      error_of([&] { group.connect(0, 0, 0, 2, std::make_unique<FakeHostComm>(0, 2)); });
  aborter.join();
  EXPECT_NE(what.find("replica 1 failed to build its model"), std::string::npos) << what;
}

}  // namespace
}  // namespace scalescope
