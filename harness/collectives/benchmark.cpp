#include "harness/collectives/benchmark.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <thread>

#include "core/backend.h"
#include "core/buffer.h"
#include "core/check.h"
#include "core/enum_names.h"
#include "harness/collectives/cluster.h"
#include "harness/collectives/rendezvous.h"
#include "harness/collectives/replica_comms.h"

namespace scalescope {
namespace {

// A typo guard: every rank holds a buffer of the largest size and a host copy of it.
constexpr int64_t kMaxMessageBytes = int64_t{8} << 30;
constexpr int64_t kFloatBytes = static_cast<int64_t>(sizeof(float));

void check_options(const AllReduceBenchOptions& options) {
  SS_CHECK_INPUT(!options.sizes.empty(), "all-reduce benchmark: no message sizes given");
  for (const int64_t bytes : options.sizes) {
    SS_CHECK_INPUT(bytes > 0 && bytes % kFloatBytes == 0 && bytes <= kMaxMessageBytes,
                   "all-reduce benchmark: message size {} bytes must be a positive multiple of {} "
                   "(whole floats) of at most {} bytes",
                   bytes, kFloatBytes, kMaxMessageBytes);
  }
  SS_CHECK_INPUT(options.warmup_iters >= 0, "all-reduce benchmark: --warmup-iters {} must be >= 0",
                 options.warmup_iters);
  SS_CHECK_INPUT(options.iters >= 1, "all-reduce benchmark: --iters {} must be >= 1",
                 options.iters);
}

// The size multiple of check_input: 1..16, from the top bits of a multiplicative hash, so that
// neighbouring elements and chunks at any regular stride hold different values.
int64_t index_factor(int64_t index) {
  const uint64_t h = static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull;
  return 1 + static_cast<int64_t>(h >> 60);
}

// "--min-bytes '1.5K' is not a whole number of K (1.5K is 1536 bytes)": a size with a fraction.
std::string fraction_of_unit(std::string_view text, std::string_view flag) {
  const std::string typed(text);
  char* end = nullptr;
  const double value = std::strtod(typed.c_str(), &end);
  const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(*end)));
  const size_t power = std::string_view("KMG").find(unit);
  if (unit == '\0' || power == std::string_view::npos) {
    return fmt::format("{} '{}' is not a whole number of bytes", flag, text);
  }
  const double below = value * 1024.0;  // in the unit below
  const bool exact = below == std::floor(below) && std::abs(below) < 0x1p62;
  return fmt::format("{} '{}' is not a whole number of {}{}", flag, text, unit,
                     exact ? fmt::format(" ({} is {}{})", text, static_cast<int64_t>(below),
                                         power == 0 ? " bytes" : std::string(1, "KM"[power - 1]))
                           : "");
}

}  // namespace

int64_t AllReduceBenchResult::wrong() const {
  int64_t total = 0;
  for (const AllReduceSizeResult& s : sizes) total += s.wrong;
  return total;
}

double AllReduceBenchResult::average_busbw_gbps() const {
  if (sizes.empty()) return 0.0;
  double total = 0;
  for (const AllReduceSizeResult& s : sizes) total += s.busbw_gbps;
  return total / static_cast<double>(sizes.size());
}

int64_t parse_byte_size(std::string_view text, std::string_view flag) {
  constexpr const char* kAccepted =
      "accepted: a positive whole number of bytes, or one with K, "
      "M or G (powers of 1024), e.g. 8, 64K, 64M, 1G";
  int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, value);
  SS_CHECK_INPUT(ec == std::errc() && end != first, "{} '{}' is not a size in bytes ({})", flag,
                 text, kAccepted);
  std::string suffix(end, last);
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (suffix.starts_with('.')) throw_usage_error(fraction_of_unit(text, flag));
  int shift = -1;
  for (const auto& [unit, bits] : {std::pair<std::string_view, int>{"", 0},
                                   {"b", 0},
                                   {"k", 10},
                                   {"kb", 10},
                                   {"kib", 10},
                                   {"m", 20},
                                   {"mb", 20},
                                   {"mib", 20},
                                   {"g", 30},
                                   {"gb", 30},
                                   {"gib", 30}}) {
    if (suffix == unit) shift = bits;
  }
  SS_CHECK_INPUT(shift >= 0, "{} '{}': unknown unit '{}' ({})", flag, text, suffix, kAccepted);
  SS_CHECK_INPUT(value > 0, "{} '{}' must be positive ({})", flag, text, kAccepted);
  SS_CHECK_INPUT(value <= (std::numeric_limits<int64_t>::max() >> shift), "{} '{}' is too large",
                 flag, text);
  return value << shift;
}

std::vector<int64_t> message_sizes(int64_t min_bytes, int64_t max_bytes, int64_t factor) {
  SS_CHECK_INPUT(
      min_bytes > 0 && min_bytes % kFloatBytes == 0,
      "--min-bytes {} must be a positive multiple of {} (the all-reduce moves whole floats)",
      min_bytes, kFloatBytes);
  SS_CHECK_INPUT(max_bytes >= min_bytes, "--max-bytes {} must be at least --min-bytes {}",
                 max_bytes, min_bytes);
  SS_CHECK_INPUT(max_bytes <= kMaxMessageBytes,
                 "--max-bytes {} exceeds the {} bytes (8G) a rank may allocate here", max_bytes,
                 kMaxMessageBytes);
  SS_CHECK_INPUT(factor >= 2, "--factor {} must be at least 2 (each size is the previous times it)",
                 factor);
  std::vector<int64_t> sizes;
  for (int64_t bytes = min_bytes;; bytes *= factor) {
    sizes.push_back(bytes);
    if (bytes > max_bytes / factor) break;  // the next size would pass max (or overflow)
  }
  return sizes;
}

namespace {

constexpr auto kReduceOpNames = enum_names<ReduceOp>("sum", "avg");

}  // namespace

const char* to_string(ReduceOp op) {
  return kReduceOpNames(op).data();
}

ReduceOp parse_reduce_op(std::string_view text) {
  const std::optional<ReduceOp> op = kReduceOpNames.parse(text);
  SS_CHECK_INPUT(op.has_value(), "--op '{}' is not a reduction{} (accepted: {})", text,
                 kReduceOpNames.meant(text), kReduceOpNames.accepted());
  return *op;
}

float check_input(int rank, int64_t index) {
  return static_cast<float>((rank + 1) * index_factor(index));
}

float check_expected(int ranks, int64_t index, ReduceOp op) {
  // Sum over r of (r + 1) * k = k * N(N+1)/2: below 2^24 for N <= 1024 (k <= 16), so exact.
  // The average k(N+1)/2 is a multiple of 0.5, exact too, and equal to the float quotient.
  const int64_t sum = index_factor(index) * ranks * (ranks + 1) / 2;
  return op == ReduceOp::kSum ? static_cast<float>(sum)
                              : static_cast<float>(sum) / static_cast<float>(ranks);
}

double time_collective(Communicator& comm, Device& device, Stream& stream, int warmup, int iters,
                       const std::function<void()>& body) {
  SS_CHECK(iters >= 1, "timing {} iterations of a collective", iters);
  for (int i = 0; i < warmup; ++i) body();
  // The barrier is a host-side rendezvous: the warm-up must be finished on this rank's
  // stream first, or a GPU rank could enter the timed loop with its warm-up still queued.
  // Host waits go through the communicator: NCCL's give up at the timeout.
  comm.synchronize(stream, "the warm-up collectives");
  comm.barrier();
  const std::unique_ptr<Event> start = device.create_event();
  const std::unique_ptr<Event> stop = device.create_event();
  start->record(stream);
  for (int i = 0; i < iters; ++i) body();
  stop->record(stream);
  comm.synchronize(stream, "the timed collectives");
  return stop->elapsed_ms_since(*start) / iters;
}

bool check_matches(float value, int ranks, int64_t index, ReduceOp op) {
  const float expected = check_expected(ranks, index, op);
  if (op == ReduceOp::kSum) return value == expected;
  const float tolerance =
      static_cast<float>(ranks + 2) * std::numeric_limits<float>::epsilon() * std::abs(expected);
  return std::abs(value - expected) <= tolerance;
}

AllReduceBenchResult benchmark_all_reduce(Communicator& comm, Device& device,
                                          const AllReduceBenchOptions& options,
                                          const SizeCallback& on_size, Stream* on) {
  check_options(options);
  const int ranks = comm.size();
  const int rank = comm.rank();
  const int64_t max_bytes = *std::max_element(options.sizes.begin(), options.sizes.end());
  DeviceBuffer buffer(device, static_cast<size_t>(max_bytes));
  auto* data = static_cast<float*>(buffer.data());
  // Staging for the check, in memory the device copies from and to directly (pinned on CUDA).
  HostBuffer host_buffer(device, static_cast<size_t>(max_bytes));
  auto* host = static_cast<float*>(host_buffer.data());
  Stream& stream = on != nullptr ? *on : device.default_stream();

  AllReduceBenchResult result;
  result.backend = comm.backend_name();
  result.ranks = ranks;
  result.options = options;
  for (const int64_t bytes : options.sizes) {
    const int64_t count = bytes / kFloatBytes;
    // The timed all-reduces run in place, so any other values would grow with every sum
    // (towards inf); zeros stay zeros, and no value is a denormal whose arithmetic is slow.
    device.fill_zero(data, static_cast<size_t>(bytes), stream);
    const double rank_us =
        time_collective(comm, device, stream, options.warmup_iters, options.iters,
                        [&] { comm.all_reduce(data, count, options.op, stream); }) *
        1e3;

    // One more all-reduce, untimed, of a pattern whose result is known exactly.
    for (int64_t i = 0; i < count; ++i) host[i] = check_input(rank, i);
    device.copy_to_device(data, host, static_cast<size_t>(bytes), stream);
    comm.all_reduce(data, count, options.op, stream);
    device.copy_to_host(host, data, static_cast<size_t>(bytes), stream);
    comm.synchronize(stream, "the checked all-reduce");
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      wrong += check_matches(host[i], ranks, i, options.op) ? 0 : 1;
    }

    const double mine[2] = {rank_us, static_cast<double>(wrong)};
    const std::vector<double> all = comm.all_gather(mine);
    AllReduceSizeResult s;
    s.bytes = bytes;
    s.count = count;
    for (int r = 0; r < ranks; ++r) {
      s.rank_time_us.push_back(all[2 * static_cast<size_t>(r)]);
      s.rank_wrong.push_back(static_cast<int64_t>(all[2 * static_cast<size_t>(r) + 1]));
      s.wrong += s.rank_wrong.back();
    }
    s.time_us = *std::max_element(s.rank_time_us.begin(), s.rank_time_us.end());
    if (s.time_us > 0.0) {
      s.algbw_gbps = algorithm_bandwidth_gbps(bytes, s.time_us * 1e-3);
      s.busbw_gbps = bus_bandwidth_gbps(bytes, s.time_us * 1e-3, ranks);
    }
    if (on_size && rank == 0) on_size(s);
    result.sizes.push_back(std::move(s));
  }
  return result;
}

AllReduceBenchResult benchmark_all_reduce_gloo(int ranks, const AllReduceBenchOptions& options,
                                               std::chrono::milliseconds timeout,
                                               const CommunicatorWrapper& wrap,
                                               const SizeCallback& on_size) {
  SS_CHECK(ranks >= 1, "all-reduce benchmark: {} ranks; at least 1 is needed", ranks);
  const DeviceSpec spec{.kind = DeviceKind::kCpu, .devices = ranks};
  return benchmark_all_reduce_on(spec, options, timeout, wrap, on_size);
}

namespace {

// benchmark_all_reduce on ranks [first, first + local) of `spec` (this process's share, on
// the first `local` of its devices), each a thread connected through `group`. `meanwhile`
// (when set) runs on the calling thread while they do: the rendezvous with other processes,
// whose error is rethrown once the threads have ended. Returns the first local rank's result
// (every rank returns the same); throws the Error of the lowest failing rank.
AllReduceBenchResult run_local_ranks(const DeviceSpec& spec, int first, int local,
                                     ReplicaComms& group, const AllReduceBenchOptions& options,
                                     const CommunicatorWrapper& wrap, const SizeCallback& on_size,
                                     const std::function<void()>& meanwhile) {
  std::vector<AllReduceBenchResult> results(static_cast<size_t>(local));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(local));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(local));
  for (int j = 0; j < local; ++j) {
    threads.emplace_back([&, j, rank = first + j] {
      try {
        set_thread_rank(rank);
        // Gloo's reductions run on the calling thread alone: one thread per CPU rank.
        const int index = j;
        std::unique_ptr<Device> device =
            backend(spec.kind).open(index, BackendOptions{.cpu_threads = 1, .cpu_devices = local});
        device->make_current();
        std::unique_ptr<Communicator> comm = group.connect(rank, *device, index);
        if (wrap) comm = wrap(std::move(comm));
        // NCCL runs on the communication stream, as in training.
        results[static_cast<size_t>(j)] =
            benchmark_all_reduce(*comm, *device, options, on_size, &device->comm_stream());
      } catch (...) {
        errors[static_cast<size_t>(j)] = std::current_exception();
        group.finished(rank);
        // Its peers must not wait for it until the timeout (enqueued collectives would).
        group.abort(fmt::format("rank {} failed", rank));
      }
    });
  }
  std::exception_ptr rendezvous_error;
  if (meanwhile) {
    try {
      meanwhile();
    } catch (...) {
      rendezvous_error = std::current_exception();
    }
  }
  for (std::thread& t : threads) t.join();
  if (rendezvous_error) std::rethrow_exception(rendezvous_error);
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return std::move(results.front());
}

}  // namespace

AllReduceBenchResult benchmark_all_reduce_on(const DeviceSpec& spec,
                                             const AllReduceBenchOptions& options,
                                             std::chrono::milliseconds timeout,
                                             const CommunicatorWrapper& wrap,
                                             const SizeCallback& on_size) {
  const int ranks = spec.count();
  SS_CHECK(ranks >= 1, "all-reduce benchmark: {} ranks; at least 1 is needed", ranks);
  check_options(options);  // here too, so that bad options fail before any thread starts
  // Gloo between CPU ranks; NCCL (with Gloo for the host values) between GPUs.
  ReplicaComms group(spec.kind, ranks, 0, ranks, timeout, 1, "", "");
  return run_local_ranks(spec, 0, ranks, group, options, wrap, on_size, {});
}

int ranks_per_process(const DeviceSpec& spec, int processes) {
  const int ranks = spec.count();
  SS_CHECK_INPUT(
      ranks >= processes && ranks % processes == 0,
      "--devices {}: {} ranks cannot be shared evenly by {} processes; give a multiple of "
      "{} (each process runs the same number of ranks)",
      to_string(spec), ranks, processes, processes);
  return ranks / processes;
}

AllReduceBenchResult benchmark_all_reduce_across(Cluster& cluster, const DeviceSpec& spec,
                                                 const AllReduceBenchOptions& options,
                                                 std::chrono::milliseconds timeout,
                                                 const SizeCallback& on_size) {
  const int ranks = spec.count();
  const int processes = cluster.size();
  const int local = ranks_per_process(spec, processes);
  check_options(options);
  const int first = cluster.rank() * local;
  ReplicaComms group(spec.kind, ranks, first, local, timeout, processes, cluster.gloo_hostname(),
                     cluster.gloo_interface());
  return run_local_ranks(spec, first, local, group, options, {}, on_size,
                         [&] { run_rendezvous(cluster, &group, nullptr, timeout); });
}

std::optional<AlphaBetaFit> fit_all_reduce(const AllReduceBenchResult& result) {
  if (result.ranks < 2 || result.sizes.size() < 2) return std::nullopt;
  std::vector<AllReduceSample> samples;
  for (const AllReduceSizeResult& s : result.sizes) {
    samples.push_back(AllReduceSample{s.bytes, result.ranks, s.time_us * 1e-3});
  }
  return fit_alpha_beta(samples);
}

nlohmann::json to_json(const AllReduceBenchResult& result) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const AllReduceSizeResult& s : result.sizes) {
    sizes.push_back({{"bytes", s.bytes},
                     {"count", s.count},
                     {"time_us", s.time_us},
                     {"algbw_gbps", s.algbw_gbps},
                     {"busbw_gbps", s.busbw_gbps},
                     {"wrong", s.wrong},
                     {"rank_time_us", s.rank_time_us},
                     {"rank_wrong", s.rank_wrong}});
  }
  nlohmann::json j = {{"collective", "all_reduce"},
                      {"backend", result.backend},
                      {"ranks", result.ranks},
                      {"dtype", "float32"},
                      {"op", to_string(result.options.op)},
                      {"in_place", true},
                      {"warmup_iters", result.options.warmup_iters},
                      {"iters", result.options.iters},
                      {"rank_policy", kRankCombinePolicy},
                      {"sizes", sizes},
                      {"wrong", result.wrong()},
                      {"average_busbw_gbps", result.average_busbw_gbps()}};
  const std::optional<AlphaBetaFit> fit = fit_all_reduce(result);
  if (fit) {
    j["alpha_beta"] = {{"alpha_ms", fit->alpha_ms},
                       {"beta_ms_per_byte", fit->beta_ms_per_byte},
                       {"bus_bandwidth_gbps", fit->bus_bandwidth_gbps},
                       {"r_squared", fit->r_squared},
                       {"samples", fit->samples}};
  } else {
    j["alpha_beta"] = nullptr;
  }
  return j;
}

}  // namespace scalescope
