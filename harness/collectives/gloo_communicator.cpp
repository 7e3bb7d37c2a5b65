// The Gloo communicator: collectives between the CPU replicas of one process, over TCP on
// loopback. CPU streams run their work inline on the calling thread, so every collective
// here runs synchronously on the caller's thread: by the time a collective is called, the
// work enqueued on the stream before it has already finished.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <source_location>
#include <string_view>
#include <utility>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "harness/collectives/communicator.h"
#include "harness/collectives/gloo_connect.h"
#include "models/cpu/cpu_half.h"

namespace scalescope {

namespace {

constexpr const char* kLibrary = "Gloo";

bool mentions_timeout(std::string_view message) {
  std::string lower(message);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("timeout") != std::string::npos || lower.find("timed out") != std::string::npos;
}

// Runs `body` (calls into Gloo) and turns whatever Gloo throws into our Error. Gloo throws
// gloo::Exception for I/O failures and timeouts, but its GLOO_ENFORCE checks throw
// gloo::EnforceNotMet, which derives from std::exception only: SS_CHECK_GLOO would let
// those escape untranslated, so both are caught here. `what` names the operation in the
// form "<collective> of <count> <unit>"; `rank` is -1 for work of the whole group.
template <typename Body>
void call_gloo(int rank, int size, std::chrono::milliseconds timeout, std::string_view expression,
               std::string_view what, std::source_location where, Body&& body) {
  std::string failure;
  try {
    std::forward<Body>(body)();
    return;
  } catch (const gloo::Exception& e) {
    failure = e.what();
  } catch (const gloo::EnforceNotMet& e) {
    failure = e.what();
  }
  const std::string verdict = mentions_timeout(failure)
                                  ? fmt::format("timed out after {} ms", timeout.count())
                                  : fmt::format("failed (timeout {} ms)", timeout.count());
  throw Error(kLibrary, std::string(expression),
              fmt::format("{}: {} {}: {}",
                          rank >= 0 ? fmt::format("rank {} of {}", rank, size)
                                    : fmt::format("group of {}", size),
                          what, verdict, failure),
              where);
}

void check_cpu_stream(const Stream& stream, std::string_view collective) {
  const DeviceId id = stream.device().id();
  SS_CHECK(id.kind == DeviceKind::kCpu,
           "{}: the Gloo communicator takes CPU memory; GPU replicas use NCCL (got a stream of "
           "{})",
           collective, to_string(id));
}

void check_count(int64_t count, std::string_view collective) {
  SS_CHECK(count >= 0, "{}: count must be >= 0, got {}", collective, count);
}

// The group of one: nothing to exchange, so no context and no networking.
class SoloCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend_name() const override { return "gloo"; }

  void all_reduce(float* /*data*/, int64_t count, ReduceOp /*op*/, Stream& stream) override {
    // Sum and average over one rank are both the identity.
    check_cpu_stream(stream, "all_reduce");
    check_count(count, "all_reduce");
  }
  void all_reduce_half(uint16_t* /*data*/, int64_t count, kernel_math::HalfFormat /*format*/,
                       Stream& stream) override {
    check_cpu_stream(stream, "all_reduce_half");
    check_count(count, "all_reduce_half");
  }
  void broadcast(float* /*data*/, int64_t count, int root, Stream& stream) override {
    check_cpu_stream(stream, "broadcast");
    check_count(count, "broadcast");
    SS_CHECK(root == 0, "broadcast: root {} is out of range for a group of 1", root);
  }
  void barrier() override {}
  std::vector<double> all_gather(std::span<const double> mine) override {
    return {mine.begin(), mine.end()};
  }
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> context,
                   std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}

  ~GlooCommunicator() override {
    // Closing the pairs' sockets; Gloo's destructors are not documented as non-throwing.
    try {
      context_.reset();
    } catch (const std::exception& e) {
      SS_LOG_ERROR("Gloo: rank {} of {}: closing the communicator failed: {}", rank_, size_,
                   e.what());
    } catch (...) {
      SS_LOG_ERROR("Gloo: rank {} of {}: closing the communicator failed", rank_, size_);
    }
  }

  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "gloo"; }
  int host_threads() const override { return 1; }  // one TCP device per rank (connect())

  void all_reduce(float* data, int64_t count, ReduceOp op, Stream& stream) override {
    check_cpu_stream(stream, "all_reduce");
    check_count(count, "all_reduce");
    if (count == 0) return;
    check_usable("all_reduce");
    guarded("gloo::allreduce", fmt::format("all_reduce of {} floats", count),
            std::source_location::current(), [&] {
              gloo::AllreduceOptions opts(context_);
              opts.setOutput(data, static_cast<size_t>(count));
              // Ring all-reduce: every chunk is reduced exactly once, on one rank, then passed
              // around unchanged, so all ranks end with bit-identical buffers (the replica
              // equivalence tests depend on it; BCUBE gives no such promise we have checked).
              opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
              opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
                  &gloo::sum<float>));
              opts.setTimeout(timeout_);
              gloo::allreduce(opts);
            });
    if (op == ReduceOp::kAverage) {
      // Division, not multiplication by 1/size: exact whenever the quotient is
      // representable, and every rank does the same operation on the same bits.
      const auto divisor = static_cast<float>(size_);
      for (int64_t i = 0; i < count; ++i) data[i] /= divisor;
    }
  }

  // Gloo's ring with our element sum: each chunk is summed on one rank in ring order and
  // passed on unchanged, so every rank ends with the same bits, as for floats.
  void all_reduce_half(uint16_t* data, int64_t count, kernel_math::HalfFormat format,
                       Stream& stream) override {
    check_cpu_stream(stream, "all_reduce_half");
    check_count(count, "all_reduce_half");
    if (count == 0) return;
    check_usable("all_reduce_half");
    guarded("gloo::allreduce", fmt::format("all_reduce_half of {} values", count),
            std::source_location::current(), [&] {
              gloo::AllreduceOptions opts(context_);
              opts.setOutput(data, static_cast<size_t>(count));
              opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
              opts.setReduceFunction([format](void* c, const void* a, const void* b, size_t n) {
                sum_half_span(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
                              static_cast<uint16_t*>(c), static_cast<int64_t>(n), format);
              });
              opts.setTimeout(timeout_);
              gloo::allreduce(opts);
            });
  }

  void broadcast(float* data, int64_t count, int root, Stream& stream) override {
    check_cpu_stream(stream, "broadcast");
    check_count(count, "broadcast");
    SS_CHECK(root >= 0 && root < size_, "broadcast: root {} is out of range for a group of {}",
             root, size_);
    if (count == 0) return;
    check_usable("broadcast");
    guarded("gloo::broadcast", fmt::format("broadcast of {} floats from rank {}", count, root),
            std::source_location::current(), [&] {
              gloo::BroadcastOptions opts(context_);
              opts.setOutput(data, static_cast<size_t>(count));
              opts.setRoot(root);
              opts.setTimeout(timeout_);
              gloo::broadcast(opts);
            });
  }

  void barrier() override {
    check_usable("barrier");
    guarded("gloo::barrier", "barrier", std::source_location::current(), [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

  std::vector<double> all_gather(std::span<const double> mine) override {
    std::vector<double> all(mine.size() * static_cast<size_t>(size_));
    if (mine.empty()) return all;
    check_usable("all_gather");
    guarded("gloo::allgather", fmt::format("all_gather of {} doubles", mine.size()),
            std::source_location::current(), [&] {
              gloo::AllgatherOptions opts(context_);
              // Gloo's input pointer is non-const but it only reads the input.
              opts.setInput(const_cast<double*>(mine.data()), mine.size());
              opts.setOutput(all.data(), all.size());
              opts.setTimeout(timeout_);
              gloo::allgather(opts);
            });
    return all;
  }

 private:
  // After a failed collective the ranks no longer agree on which messages belong to which
  // collective, so a later one could pair up the wrong buffers: refuse instead.
  void check_usable(std::string_view collective) const {
    SS_CHECK(!broken_,
             "rank {} of {}: {}: this Gloo communicator is unusable after an earlier failure "
             "({})",
             rank_, size_, collective, broken_reason_);
  }

  template <typename Body>
  void guarded(std::string_view expression, const std::string& what, std::source_location where,
               Body&& body) {
    try {
      call_gloo(rank_, size_, timeout_, expression, what, where, std::forward<Body>(body));
    } catch (const Error& e) {
      broken_ = true;
      broken_reason_ = e.message();
      throw;
    }
  }

  std::shared_ptr<gloo::rendezvous::Context> context_;
  int rank_ = context_->rank;
  int size_ = context_->size;
  std::chrono::milliseconds timeout_;
  bool broken_ = false;
  std::string broken_reason_;
};

// Each of this process's `local` ranks holds a socket to every other rank, and its TCP device a
// listening socket and an epoll descriptor. Past the open-file limit a rank failed with "Too
// many open files" while the others waited out the timeout (`sweep --devices cpu:1024` here,
// where `ulimit -n` is 20000): the soft limit is raised to what the mesh needs where the hard
// limit allows, else the group is refused at once.
void reserve_descriptors(int size, int local) {
  std::error_code ignored;
  int64_t open_now = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ignored);
       it != std::filesystem::directory_iterator(); it.increment(ignored)) {
    ++open_now;
  }
  constexpr int64_t kSpare = 64;  // files the run opens besides (data, reports, libraries')
  const int64_t needed = open_now + static_cast<int64_t>(local) * (size + 2) + kSpare;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || needed <= static_cast<int64_t>(limit.rlim_cur))
    return;
  const bool unlimited = limit.rlim_max == RLIM_INFINITY;
  if (unlimited || needed <= static_cast<int64_t>(limit.rlim_max)) {
    limit.rlim_cur = static_cast<rlim_t>(needed);
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) return;
  }
  throw_error(fmt::format(
      "{} rank{} of this process connect to {} ranks over Gloo's TCP: about {} open files with "
      "the {} already open, more than this process may open ({}, the hard limit of `ulimit -n`). "
      "Run fewer devices per process (across processes under mpirun: --ranks-per-node), or raise "
      "the limit",
      local, local == 1 ? "" : "s", size, needed, open_now, limit.rlim_max));
}

}  // namespace

// The rendezvous store of a group: in memory, shared by the threads of this process. Each
// rank sets one key (its pairs' addresses) and waits for the others'; keys of ranks in other
// processes arrive through add_remote().
class GlooGroup::Store final : public gloo::rendezvous::Store {
 public:
  Store(int local, std::chrono::milliseconds timeout) : local_(local), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    const std::lock_guard lock(mutex_);
    values_[key] = data;
    pending_.push_back(key);
    changed_.notify_all();
  }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    const std::lock_guard lock(mutex_);
    return values_.at(key);
  }
  // The group's timeout, not Gloo's: Gloo passes the context's, a fifth of it while
  // connecting (gloo_connect.h).
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    wait(keys);
  }
  void wait(const std::vector<std::string>& keys) override {
    std::unique_lock lock(mutex_);
    const bool ready = changed_.wait_for(lock, timeout_, [&] {
      return !aborted_.empty() || std::all_of(keys.begin(), keys.end(), [&](const std::string& k) {
        return values_.count(k) > 0;
      });
    });
    // Gloo's own exception types, so that connect() reports these like Gloo's failures.
    if (!aborted_.empty()) throw gloo::IoException(aborted_);
    if (!ready) {
      throw gloo::IoException(
          fmt::format("timed out after {} ms waiting for the addresses of "
                      "rank(s) {}",
                      timeout_.count(), fmt::join(keys, ", ")));
    }
  }

  // The keys set here since the last call (CBOR of {key: bytes}), once there are any, every
  // local rank has finished connecting, the group was aborted, or `wait` has passed; and
  // whether every local rank has finished.
  std::pair<std::string, bool> take_local(std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, wait, [&] {
      return !pending_.empty() || finished_.size() == static_cast<size_t>(local_) ||
             !aborted_.empty();
    });
    nlohmann::json j = nlohmann::json::object();
    for (const std::string& key : pending_) {
      const std::vector<char>& value = values_.at(key);
      j[key] = nlohmann::json::binary(std::vector<uint8_t>(value.begin(), value.end()));
    }
    pending_.clear();
    const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(j);
    return {std::string(bytes.begin(), bytes.end()),
            finished_.size() == static_cast<size_t>(local_)};
  }
  void add(const std::string& serialized) {
    const nlohmann::json j =
        nlohmann::json::from_cbor(std::vector<uint8_t>(serialized.begin(), serialized.end()));
    const std::lock_guard lock(mutex_);
    for (const auto& [key, value] : j.items()) {
      const auto& bytes = value.get_binary();
      values_[key] = std::vector<char>(bytes.begin(), bytes.end());
    }
    changed_.notify_all();
  }
  void finish(int rank) {
    const std::lock_guard lock(mutex_);
    finished_.insert(rank);
    changed_.notify_all();
  }
  void abort(const std::string& why) {
    const std::lock_guard lock(mutex_);
    if (aborted_.empty()) aborted_ = why.empty() ? "the group was aborted" : why;
    changed_.notify_all();
  }
  std::string aborted() {
    const std::lock_guard lock(mutex_);
    return aborted_;
  }

 private:
  const int local_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> values_;
  std::vector<std::string> pending_;  // set here, not yet taken by take_local()
  std::set<int> finished_;            // local ranks done connecting (or failed)
  std::string aborted_;
};

GlooGroup::GlooGroup(int size, std::chrono::milliseconds timeout)
    : GlooGroup(size, 0, size, timeout, "127.0.0.1", "") {}

GlooGroup::GlooGroup(int size, int first, int local, std::chrono::milliseconds timeout,
                     std::string hostname, std::string iface)
    : size_(size),
      first_(first),
      local_(local),
      timeout_(timeout),
      hostname_(std::move(hostname)),
      iface_(std::move(iface)) {
  SS_CHECK(size >= 1, "GlooGroup: size must be >= 1, got {}", size);
  SS_CHECK(first >= 0 && local >= 1 && first + local <= size,
           "GlooGroup: local ranks [{}, {}) are not inside a group of {}", first, first + local,
           size);
  SS_CHECK(timeout.count() > 0, "GlooGroup: timeout must be > 0 ms, got {} ms", timeout.count());
  reserve_descriptors(size, local);
  store_ = std::make_unique<Store>(local, timeout);
  connected_.assign(static_cast<size_t>(size), false);
}

// Members only: the store, which frees memory. Each communicator owns its context and
// TCP device, so communicators may outlive the group.
GlooGroup::~GlooGroup() = default;

std::pair<std::string, bool> GlooGroup::take_local_keys(std::chrono::milliseconds wait) {
  return store_->take_local(wait);
}

void GlooGroup::add_remote(const std::string& addresses) {
  store_->add(addresses);
}

void GlooGroup::abort(const std::string& why) {
  store_->abort(why);
}

void GlooGroup::finished(int rank) {
  store_->finish(rank);
}

std::unique_ptr<Communicator> GlooGroup::connect(int rank) {
  SS_CHECK(rank >= first_ && rank < first_ + local_,
           "GlooGroup::connect: rank {} is not one of this process's ranks [{}, {})", rank, first_,
           first_ + local_);
  {
    // A rank's address in the store is written once; a second connect would read stale
    // addresses (or wait for peers that already left), so it is refused. A failed attempt
    // counts too, for the same reason.
    const std::lock_guard lock(mutex_);
    SS_CHECK(!connected_[static_cast<size_t>(rank)],
             "GlooGroup::connect: rank {} of {} is already connected", rank, size_);
    connected_[static_cast<size_t>(rank)] = true;
  }
  // Done connecting, or failed: either way the rendezvous need not wait for this rank.
  struct Finished {
    GlooGroup& group;
    int rank;
    ~Finished() { group.finished(rank); }
  } finished_guard{*this, rank};
  if (size_ == 1) return std::make_unique<SoloCommunicator>();

  // One TCP device (listening socket and event loop thread) per rank, as if each rank were
  // its own process. Gloo 0.5 allows one device shared by the contexts of several ranks,
  // but with one shared device connectFullMesh and the first collective after it failed
  // now and then on this machine ("Connection closed by peer", about 1 group in 30 of 3-4
  // ranks); with a device per rank, never in hundreds of groups.
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size_);
  try {
    call_gloo(rank, size_, timeout_, "gloo::rendezvous::Context::connectFullMesh",
              "connecting to the other replicas", std::source_location::current(), [&] {
                gloo::transport::tcp::attr attr;
                if (!iface_.empty()) {
                  attr.iface = iface_;
                } else {
                  attr.hostname = hostname_;
                }
                connect_full_mesh(context, *store_, gloo::transport::tcp::CreateDevice(attr),
                                  timeout_);
              });
  } catch (const Error& e) {
    // A rank that aborts the group after its own connect closes its pairs, and a peer still
    // connecting sees only "Connection closed by peer"; the abort's reason is the cause.
    const std::string why = store_->aborted();
    if (why.empty() || e.message().find(why) != std::string::npos) throw;
    throw Error(e.library(), e.expression(),
                fmt::format("{} (the group was aborted: {})", e.message(), why));
  }
  return std::make_unique<GlooCommunicator>(std::move(context), timeout_);
}

}  // namespace scalescope
