// nccl_hostid_probe: can two processes that share ONE GPU form a two-rank NCCL communicator
// when each claims a different host through NCCL_HOSTID?
//
// NCCL refuses two ranks on the same GPU of the same host ("Duplicate GPU detected"). Its host
// identity comes from NCCL_HOSTID when that is set, so two processes with different values look
// like two hosts; with P2P and shared memory disabled they must then talk through the socket
// transport on the loopback interface. This program tries exactly that and prints one verdict
// line:
//   NCCL_HOSTID two-rank on one GPU: WORKS (...)
//   NCCL_HOSTID two-rank on one GPU: FAILS: <reason>
//
// Usage:
//   nccl_hostid_probe [--timeout S] [--same-host]   launcher: starts ranks 0 and 1 (itself, again)
//   nccl_hostid_probe --rank R --dir DIR [--timeout S] [--same-host]   one rank (used by the
//   launcher)
// --same-host is the control experiment: NCCL_HOSTID unset, so NCCL sees one host and is
// expected to refuse. --timeout bounds every wait of a rank (default 60 s); the launcher kills
// both ranks after 2.5 times that. Nothing waits without a deadline: built with gpu-check.sh,
// which also runs it under timeout(1).
//
// Exit status: 0 when the verdict is WORKS, 1 when it FAILS, 2 on a usage error.
// Built by scripts/gpu-check.sh:
//   nvcc -std=c++17 -O2 scripts/nccl_hostid_probe.cpp -I<nccl>/include -L<dir> -lnccl -o probe
#include <cuda_runtime.h>
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "nccl_hostid_probe needs NCCL 2.14 or newer (non-blocking communicators)"
#endif

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRanks = 2;
constexpr size_t kCount = size_t{1} << 20;  // 1M floats
const char* const kVerdict = "NCCL_HOSTID two-rank on one GPU";
const char* const kControlVerdict = "Same host (NCCL_HOSTID unset, control) two-rank on one GPU";

struct Options {
  int rank = -1;  // -1: launcher
  std::string dir;
  double timeout_s = 60;
  bool same_host = false;
};

// A failure of one rank: the reason becomes part of the verdict.
struct Failure {
  std::string reason;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Failure{std::string(what) + ": " + cudaGetErrorString(e)};
}

std::string nccl_message(ncclResult_t r, ncclComm_t comm) {
  std::string msg = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') msg += std::string(" (") + last + ")";
  return msg;
}

// One rank's communicator. Every wait polls with a deadline; a wait that runs out aborts the
// communicator so that nothing is left blocked inside NCCL.
class Rank {
 public:
  explicit Rank(const Options& opt) : opt_(opt) {}
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;
  ~Rank() {
    if (comm_ != nullptr) {
      // A failure path: stop NCCL's work and leave the rest to process exit (freeing memory
      // would synchronize with a kernel that may still be waiting for the peer).
      ncclCommAbort(comm_);
      return;
    }
    if (send_ != nullptr) cudaFree(send_);
    if (recv_ != nullptr) cudaFree(recv_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void run() {
    int devices = 0;
    check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices < 1) throw Failure{"no CUDA device"};
    check_cuda(cudaSetDevice(0), "cudaSetDevice(0)");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");

    ncclUniqueId id = exchange_id();
    init(id);
    allreduce_and_check();
    finalize();
  }

 private:
  std::string id_path() const { return opt_.dir + "/nccl-unique-id"; }

  // Rank 0 publishes the id (written to a temporary name, then renamed: rank 1 never reads a
  // partial file); rank 1 waits for it.
  ncclUniqueId exchange_id() {
    ncclUniqueId id;
    if (opt_.rank == 0) {
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) throw Failure{"ncclGetUniqueId: " + nccl_message(r, nullptr)};
      std::string tmp = id_path() + ".tmp";
      FILE* f = std::fopen(tmp.c_str(), "wb");
      if (f == nullptr || std::fwrite(&id, sizeof id, 1, f) != 1 || std::fclose(f) != 0)
        throw Failure{"cannot write " + tmp + ": " + std::strerror(errno)};
      if (std::rename(tmp.c_str(), id_path().c_str()) != 0)
        throw Failure{"cannot rename " + tmp + ": " + std::strerror(errno)};
      return id;
    }
    auto t0 = Clock::now();
    while (seconds_since(t0) < opt_.timeout_s) {
      if (FILE* f = std::fopen(id_path().c_str(), "rb")) {
        size_t n = std::fread(&id, sizeof id, 1, f);
        std::fclose(f);
        if (n == 1) return id;
      }
      sleep_ms(50);
    }
    throw Failure{"rank 0's unique id did not appear in " + id_path() + " within " +
                  std::to_string(static_cast<int>(opt_.timeout_s)) + " s"};
  }

  // Polls the communicator's state until it leaves ncclInProgress, at most timeout_s.
  void wait_ready(const char* what) {
    auto t0 = Clock::now();
    ncclResult_t state = ncclInProgress;
    while (true) {
      ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess)
        throw Failure{std::string(what) + ": ncclCommGetAsyncError: " + nccl_message(r, comm_)};
      if (state != ncclInProgress) break;
      if (seconds_since(t0) > opt_.timeout_s)
        throw Failure{std::string(what) + " still in progress after " +
                      std::to_string(static_cast<int>(opt_.timeout_s)) + " s"};
      sleep_ms(10);
    }
    if (state != ncclSuccess) throw Failure{std::string(what) + ": " + nccl_message(state, comm_)};
  }

  void init(const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    auto t0 = Clock::now();
    ncclResult_t r = ncclCommInitRankConfig(&comm_, kRanks, id, opt_.rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      std::string msg = nccl_message(r, comm_);
      throw Failure{"ncclCommInitRankConfig: " + msg};
    }
    wait_ready("ncclCommInitRankConfig");
    std::printf("[rank %d] communicator ready in %.2f s\n", opt_.rank, seconds_since(t0));
  }

  // x[i] = (rank + 1) + (i mod 1024) / 4 on each rank: every value and every sum is exact in
  // float, so the result must equal 3 + (i mod 1024) / 2 exactly. The output starts as NaN
  // (all bits set), so an element the all-reduce did not write cannot pass.
  void allreduce_and_check() {
    std::vector<float> host(kCount);
    for (size_t i = 0; i < kCount; ++i)
      host[i] = static_cast<float>(opt_.rank + 1) + static_cast<float>(i % 1024) * 0.25f;
    check_cuda(cudaMalloc(&send_, kCount * sizeof(float)), "cudaMalloc");
    check_cuda(cudaMalloc(&recv_, kCount * sizeof(float)), "cudaMalloc");
    check_cuda(cudaMemcpy(send_, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
               "cudaMemcpy to device");
    check_cuda(cudaMemset(recv_, 0xff, kCount * sizeof(float)), "cudaMemset");

    auto t0 = Clock::now();
    ncclResult_t r = ncclAllReduce(send_, recv_, kCount, ncclFloat, ncclSum, comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress)
      throw Failure{"ncclAllReduce: " + nccl_message(r, comm_)};
    wait_ready("ncclAllReduce (enqueue)");
    // The stream finishes only when the peer took part: poll it, and the communicator's error
    // state, against the deadline.
    while (true) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) check_cuda(e, "cudaStreamQuery");
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress)
        throw Failure{"ncclAllReduce: " + nccl_message(state, comm_)};
      if (seconds_since(t0) > opt_.timeout_s)
        throw Failure{"ncclAllReduce did not complete within " +
                      std::to_string(static_cast<int>(opt_.timeout_s)) + " s"};
      sleep_ms(1);
    }
    double ms = seconds_since(t0) * 1e3;

    check_cuda(cudaMemcpy(host.data(), recv_, kCount * sizeof(float), cudaMemcpyDeviceToHost),
               "cudaMemcpy to host");
    size_t wrong = 0;
    size_t first_wrong = 0;
    for (size_t i = 0; i < kCount; ++i) {
      float expected = 3.0f + static_cast<float>(i % 1024) * 0.5f;
      if (!(host[i] == expected)) {  // NaN compares unequal too
        if (wrong == 0) first_wrong = i;
        ++wrong;
      }
    }
    if (wrong != 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "wrong sum in %zu of %zu elements (first at %zu: %g, expected %g)", wrong,
                    kCount, first_wrong, static_cast<double>(host[first_wrong]),
                    3.0 + static_cast<double>(first_wrong % 1024) * 0.5);
      throw Failure{buf};
    }
    std::printf("[rank %d] all-reduce of %zu floats correct, %.2f ms (first call, untuned)\n",
                opt_.rank, kCount, ms);
  }

  void finalize() {
    ncclResult_t r = ncclCommFinalize(comm_);
    if (r != ncclSuccess && r != ncclInProgress)
      throw Failure{"ncclCommFinalize: " + nccl_message(r, comm_)};
    wait_ready("ncclCommFinalize");
    r = ncclCommDestroy(comm_);
    comm_ = nullptr;
    if (r != ncclSuccess) throw Failure{"ncclCommDestroy: " + nccl_message(r, nullptr)};
  }

  const Options& opt_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* send_ = nullptr;
  float* recv_ = nullptr;
};

void write_status(const Options& opt, const std::string& status) {
  std::string path = opt.dir + "/rank" + std::to_string(opt.rank) + ".status";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fprintf(f, "%s\n", status.c_str());
    std::fclose(f);
  }
}

int run_rank(const Options& opt) {
  std::printf("[rank %d] pid %d, NCCL_HOSTID=%s\n", opt.rank, static_cast<int>(getpid()),
              std::getenv("NCCL_HOSTID") ? std::getenv("NCCL_HOSTID") : "(unset)");
  try {
    Rank rank(opt);
    rank.run();
  } catch (const Failure& f) {
    std::printf("[rank %d] FAILED: %s\n", opt.rank, f.reason.c_str());
    write_status(opt, f.reason);
    return 1;
  }
  write_status(opt, "ok");
  return 0;
}

std::string read_status(const std::string& dir, int rank) {
  std::string path = dir + "/rank" + std::to_string(rank) + ".status";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  char buf[1024] = {};
  if (std::fgets(buf, sizeof buf, f) == nullptr) buf[0] = '\0';
  std::fclose(f);
  std::string s = buf;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

void set_default_env(const char* name, const char* value) {
  setenv(name, value, /*overwrite=*/0);
}

// Starts rank `r` (this program again, with --rank) in a child process; -1 when fork fails.
pid_t start_rank(const Options& opt, int r, const std::string& dir) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  // The child: no CUDA was touched before fork.
  if (opt.same_host)
    unsetenv("NCCL_HOSTID");
  else
    setenv("NCCL_HOSTID", r == 0 ? "host-a" : "host-b", 1);
  std::string rank = std::to_string(r);
  std::string timeout = std::to_string(opt.timeout_s);
  std::vector<const char*> argv = {"nccl_hostid_probe", "--rank",    rank.c_str(),   "--dir",
                                   dir.c_str(),         "--timeout", timeout.c_str()};
  if (opt.same_host) argv.push_back("--same-host");
  argv.push_back(nullptr);
  execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
  std::printf("exec /proc/self/exe: %s\n", std::strerror(errno));
  _exit(127);
}

// Waits for both ranks: 2.5 timeouts in all (id exchange, init and all-reduce each have
// one); once one rank has failed, the other gets 15 s more to notice before it is killed.
// Fills `status` with each rank's exit status; returns whether any was killed.
bool wait_for_ranks(const Options& opt, pid_t (&pids)[kRanks], int (&status)[kRanks]) {
  auto t0 = Clock::now();
  const double limit = opt.timeout_s * 2.5;
  int running = kRanks;
  bool killed = false;
  double killed_at = -1;
  double first_failure_at = -1;
  while (running > 0) {
    for (int r = 0; r < kRanks; ++r) {
      if (pids[r] < 0) continue;
      int ws = 0;
      if (waitpid(pids[r], &ws, WNOHANG) != pids[r]) continue;
      status[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
      pids[r] = -1;
      --running;
      if (status[r] != 0 && first_failure_at < 0) first_failure_at = seconds_since(t0);
    }
    if (running == 0) break;
    double now = seconds_since(t0);
    if (!killed && (now > limit || (first_failure_at >= 0 && now > first_failure_at + 15))) {
      for (int r = 0; r < kRanks; ++r)
        if (pids[r] > 0) kill(pids[r], SIGKILL);
      killed = true;
      killed_at = now;
    }
    if (killed && now > killed_at + 10) break;  // a rank stuck in the driver: report anyway
    sleep_ms(50);
  }
  return killed;
}

// The ranks' outcomes ("" when both worked), and the temporary folder removed.
std::string collect_reasons(const std::string& dir, const int (&status)[kRanks], bool killed) {
  std::string reasons;
  for (int r = 0; r < kRanks; ++r) {
    std::string s = read_status(dir, r);
    if (status[r] == 0 && s == "ok") continue;
    if (s.empty())
      s = "exit status " + std::to_string(status[r]) + (killed ? " (killed at the deadline)" : "");
    if (!reasons.empty()) reasons += "; ";
    reasons += "rank " + std::to_string(r) + ": " + s;
  }
  std::remove((dir + "/nccl-unique-id").c_str());
  for (int r = 0; r < kRanks; ++r)
    std::remove((dir + "/rank" + std::to_string(r) + ".status").c_str());
  rmdir(dir.c_str());
  return reasons;
}

// Starts both ranks, waits for them with a deadline, and prints the verdict.
int run_launcher(const Options& opt) {
  char dir_template[] = "/tmp/nccl-hostid-probe.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::printf("%s: FAILS: cannot create a temporary folder: %s\n", kVerdict,
                std::strerror(errno));
    return 1;
  }
  std::string dir = dir_template;
  const char* verdict = opt.same_host ? kControlVerdict : kVerdict;

  // The socket transport on loopback, nothing else: no P2P, no shared memory, no InfiniBand.
  set_default_env("NCCL_P2P_DISABLE", "1");
  set_default_env("NCCL_SHM_DISABLE", "1");
  set_default_env("NCCL_IB_DISABLE", "1");
  set_default_env("NCCL_SOCKET_IFNAME", "lo");
  set_default_env("NCCL_DEBUG", "INFO");
  set_default_env("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV");
  std::printf("probe: %s; NCCL %d; P2P_DISABLE=%s SHM_DISABLE=%s IB_DISABLE=%s SOCKET_IFNAME=%s\n",
              opt.same_host ? "control, NCCL_HOSTID unset" : "NCCL_HOSTID host-a / host-b",
              NCCL_VERSION_CODE, std::getenv("NCCL_P2P_DISABLE"), std::getenv("NCCL_SHM_DISABLE"),
              std::getenv("NCCL_IB_DISABLE"), std::getenv("NCCL_SOCKET_IFNAME"));
  std::fflush(stdout);

  auto t0 = Clock::now();
  pid_t pids[kRanks] = {-1, -1};
  for (int r = 0; r < kRanks; ++r) {
    pids[r] = start_rank(opt, r, dir);
    if (pids[r] < 0) {
      std::printf("%s: FAILS: fork: %s\n", verdict, std::strerror(errno));
      for (int k = 0; k < r; ++k) kill(pids[k], SIGKILL);
      return 1;
    }
  }
  int status[kRanks] = {-1, -1};
  const bool killed = wait_for_ranks(opt, pids, status);
  const std::string reasons = collect_reasons(dir, status, killed);
  if (reasons.empty())
    std::printf(
        "%s: WORKS (all-reduce of %zu floats correct; P2P, SHM and IB disabled, sockets on %s; "
        "%.1f s)\n",
        verdict, kCount, std::getenv("NCCL_SOCKET_IFNAME"), seconds_since(t0));
  else
    std::printf("%s: FAILS: %s\n", verdict, reasons.c_str());
  return reasons.empty() ? 0 : 1;
}

int usage(const char* msg) {
  std::fprintf(stderr,
               "nccl_hostid_probe: %s\nusage: nccl_hostid_probe [--timeout S] [--same-host]\n"
               "       nccl_hostid_probe --rank 0|1 --dir DIR [--timeout S] [--same-host]\n",
               msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // the two ranks share one log: whole lines only
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--rank") {
      const char* v = value();
      if (v == nullptr || (std::strcmp(v, "0") != 0 && std::strcmp(v, "1") != 0))
        return usage("--rank takes 0 or 1");
      opt.rank = std::atoi(v);
    } else if (a == "--dir") {
      const char* v = value();
      if (v == nullptr) return usage("--dir takes a folder");
      opt.dir = v;
    } else if (a == "--timeout") {
      const char* v = value();
      char* end = nullptr;
      opt.timeout_s = v ? std::strtod(v, &end) : 0;
      if (v == nullptr || *end != '\0' || !(opt.timeout_s > 0) || opt.timeout_s > 3600)
        return usage("--timeout takes seconds, more than 0 and at most 3600");
    } else if (a == "--same-host") {
      opt.same_host = true;
    } else if (a == "-h" || a == "--help") {
      usage("help");
      return 0;
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  if (opt.rank >= 0) {
    if (opt.dir.empty()) return usage("--rank needs --dir");
    return run_rank(opt);
  }
  return run_launcher(opt);
}
