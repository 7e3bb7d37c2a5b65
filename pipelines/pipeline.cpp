// The prefetching input pipeline.
//
// Synchronisation design
// ----------------------
// Batches of the replica are numbered k = 0, 1, 2, ... in delivery order; batch k is step
// k mod steps_per_epoch of epoch first_epoch + k / steps_per_epoch. One mutex guards all
// shared bookkeeping; the bulk of the work (reading and mapping a whole batch) happens
// outside it, so a worker takes the lock twice per batch (claim, publish), never per sample.
//
// - Claim: a worker takes the next unclaimed number, next_claim_, but only while it lies in
//   the window [released_, released_ + slots), where released_ is the oldest batch the
//   consumer has not given back. The window has queue_depth + workers + 1 slots: the batch
//   the consumer holds, queue_depth batches ready for it, and one in progress per worker
//   (a worker whose batch is finished early keeps its slot until the consumer catches up,
//   exactly as if it were still filling it). Batch k always lives in slot k mod slots: the
//   live numbers are consecutive and at most `slots` of them, so no two share a slot, and
//   slots keep their vectors for the pipeline's life (no allocation per batch).
// - Publish: the worker marks the slot ready with its batch number and wakes the consumer
//   if that is the batch it waits for. Batches finish out of order; delivery is in order,
//   because next() waits for its own slot only.
// - Release: next() gives back the batch it returned last (which moves the window by one
//   and wakes one waiting worker), then waits for the following one.
// No deadlock: the batch the consumer waits for is either being filled by a worker (which
// never waits while holding a claim, other than for a permutation being computed), or it
// is unclaimed, in which case everything before it was delivered, the window has room and
// an idle worker claims it.
//
// Errors: a worker that fails records its batch number and exception (the lowest failing
// batch wins) and exits; the others stop claiming. Batches before the failed one still
// complete, so next() delivers them and then rethrows at the failed batch, every time it
// is called again. Stopping: the destructor sets stop_ under the lock (waiting workers see
// it in their predicate) and an atomic flag checked between samples (busy workers quit
// their batch), then joins.
//
// Permutations: claims are in order, so the epochs of claimed batches never go back and
// only two are needed at a time: the current one and the next. Each is computed once, by
// the first worker that needs it, outside the lock (std::call_once makes the others wait
// for it); the worker that filled step 0 of an epoch computes the next epoch's order
// after publishing, so that the next epoch's first batches do not wait for a shuffle
// (unless an epoch has fewer steps than the pipeline looks ahead).
#include "pipelines/pipeline.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "core/nvtx.h"

namespace scalescope {
namespace {

// Far beyond any useful setting; above them a value is a mistake, not a configuration.
constexpr int kMaxWorkers = 256;
constexpr int kMaxQueueDepth = 256;

// What a failed read said, without the rank prefix that the wrapping error adds again.
std::string describe_failure(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) {
    const std::string& file = error->file();
    return fmt::format("{}{} (at {}:{})",
                       error->library().empty() ? "" : error->library() + " error: ",
                       error->message(), file.substr(file.find_last_of('/') + 1), error->line());
  }
  return e.what();
}

}  // namespace

void validate(const PipelineConfig& config, const Shape& sample_shape) {
  SS_CHECK(config.workers >= 1 && config.workers <= kMaxWorkers,
           "pipeline workers {} must be between 1 and {}", config.workers, kMaxWorkers);
  SS_CHECK(config.queue_depth >= 1 && config.queue_depth <= kMaxQueueDepth,
           "pipeline queue depth {} must be between 1 and {}", config.queue_depth, kMaxQueueDepth);
  validate(config.transforms, sample_shape);
}

class InputPipeline::Impl {
 public:
  Impl(const Dataset& dataset, const Sampler& sampler, int replica, const PipelineConfig& config,
       int64_t first_epoch);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // The next batch; waits for it when `wait`, else returns null unless it is ready.
  const HostBatch* take(bool wait);
  int64_t epoch() const;
  int64_t step() const;

 private:
  struct Slot {
    HostBatch batch;
    int64_t ready = -1;  // the batch number the slot holds once filled; -1 while not
  };
  // One epoch's sample order, computed once by whichever worker first needs it.
  struct EpochOrder {
    explicit EpochOrder(int64_t e) : epoch(e) {}
    const int64_t epoch;
    std::once_flag computed;
    std::vector<int64_t> perm;
  };

  // The order of `epoch`, advancing the cache when a claim enters a new epoch.
  // REQUIRES: mutex_ held; epoch is the current cached epoch or the one after it.
  std::shared_ptr<EpochOrder> order_locked(int64_t epoch);
  void compute(EpochOrder& order) const;
  // Records that batch `batch` failed with `error` (kNextUnclaimed: the first batch no worker
  // has taken yet), stops further claims and wakes everyone.
  void fail(int64_t batch, std::exception_ptr error);
  void run_worker(int worker);
  // Reads and maps batch (epoch, step) into `batch`. Returns false when stopped midway.
  bool fill(int64_t epoch, int64_t step, const std::vector<int64_t>& perm, HostBatch& batch,
            std::vector<int64_t>& indices, std::vector<float>& scratch) const;

  const Dataset& dataset_;
  const Sampler& sampler_;
  const int replica_;
  const PipelineConfig config_;
  const int64_t first_epoch_;
  const int64_t steps_per_epoch_;
  const Shape sample_shape_;
  const int64_t sample_numel_;
  const int64_t label_width_;
  // Workers report errors with the rank of the thread that built the pipeline (the replica).
  const int rank_;
  static constexpr int64_t kNextUnclaimed = -1;

  std::mutex mutex_;
  std::condition_variable work_cv_;   // workers: the window has room, an error, or stop
  std::condition_variable ready_cv_;  // consumer: its batch is ready, or failed
  // Guarded by mutex_ (the contents of a slot belong to the worker that claimed it, then,
  // once published, to the consumer until it releases it).
  std::vector<Slot> slots_;
  int64_t next_claim_ = 0;  // the next batch number a worker will take
  int64_t released_ = 0;    // the oldest batch the consumer has not given back
  int64_t returned_ = 0;    // batches next() has returned (written by the consumer, locked)
  bool stop_ = false;
  int64_t failed_batch_ = std::numeric_limits<int64_t>::max();
  std::exception_ptr error_;
  std::shared_ptr<EpochOrder> current_order_;
  std::shared_ptr<EpochOrder> next_order_;
  // stop_, readable without the lock by workers between samples.
  std::atomic<bool> stopping_{false};

  std::vector<std::thread> workers_;
};

InputPipeline::Impl::Impl(const Dataset& dataset, const Sampler& sampler, int replica,
                          const PipelineConfig& config, int64_t first_epoch)
    : dataset_(dataset),
      sampler_(sampler),
      replica_(replica),
      config_(config),
      first_epoch_(first_epoch),
      steps_per_epoch_(sampler.steps_per_epoch()),
      sample_shape_(dataset.sample_shape()),
      sample_numel_(sample_shape_.numel()),
      label_width_(dataset.labels().width()),
      rank_(thread_rank()) {
  validate(config_, sample_shape_);
  SS_CHECK(sampler.dataset_size() == dataset.size(),
           "the sampler covers {} samples, but the dataset holds {} ({})", sampler.dataset_size(),
           dataset.size(), dataset.describe());
  SS_CHECK(replica >= 0 && replica < sampler.replicas(),
           "replica {} is outside the sampler's replicas [0, {})", replica, sampler.replicas());
  SS_CHECK(first_epoch >= 0, "the first epoch {} must not be negative", first_epoch);
  SS_CHECK(sample_numel_ > 0, "samples of shape {} hold no values", sample_shape_.to_string());
  SS_CHECK(label_width_ > 0, "labels of width {} hold no values", label_width_);

  const int64_t batch = sampler.per_replica_batch();
  slots_.resize(static_cast<size_t>(config_.queue_depth + config_.workers + 1));
  for (Slot& slot : slots_) {
    slot.batch.size = batch;
    slot.batch.sample_shape = sample_shape_;
    slot.batch.inputs.resize(static_cast<size_t>(batch * sample_numel_));
    slot.batch.labels.resize(static_cast<size_t>(batch * label_width_));
  }
  current_order_ = std::make_shared<EpochOrder>(first_epoch);
  next_order_ = std::make_shared<EpochOrder>(first_epoch + 1);

  workers_.reserve(static_cast<size_t>(config_.workers));
  try {
    for (int w = 0; w < config_.workers; ++w) workers_.emplace_back([this, w] { run_worker(w); });
  } catch (...) {
    // A thread could not start: stop the ones that did before the members they use go away.
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    stopping_.store(true);
    work_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    throw;
  }
}

InputPipeline::Impl::~Impl() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stopping_.store(true);
  work_cv_.notify_all();
  for (std::thread& t : workers_) {
    try {
      t.join();
    } catch (const std::exception& e) {
      SS_LOG_ERROR("input pipeline of replica {}: joining a worker failed: {}", replica_, e.what());
    }
  }
}

std::shared_ptr<InputPipeline::Impl::EpochOrder> InputPipeline::Impl::order_locked(int64_t epoch) {
  if (epoch != current_order_->epoch) {
    // Claims are sequential, so a claim leaves the current epoch only for the next one.
    // Workers still filling batches of the old epoch keep its order alive by their own
    // shared_ptr.
    current_order_ = std::move(next_order_);
    next_order_ = std::make_shared<EpochOrder>(epoch + 1);
  }
  return current_order_;
}

void InputPipeline::Impl::compute(EpochOrder& order) const {
  std::call_once(order.computed, [&] { order.perm = sampler_.permutation(order.epoch); });
}

void InputPipeline::Impl::fail(int64_t batch, std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (batch == kNextUnclaimed) batch = next_claim_;
    if (batch < failed_batch_) {
      failed_batch_ = batch;
      error_ = std::move(error);
    }
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
}

bool InputPipeline::Impl::fill(int64_t epoch, int64_t step, const std::vector<int64_t>& perm,
                               HostBatch& batch, std::vector<int64_t>& indices,
                               std::vector<float>& scratch) const {
  sampler_.replica_indices(perm, step, replica_, indices);
  const bool transform = config_.transforms.any();
  for (size_t i = 0; i < indices.size(); ++i) {
    // Checked per sample so that the destructor does not wait for a whole slow batch.
    if (stopping_.load(std::memory_order_relaxed)) return false;
    const int64_t index = indices[i];
    float* x = batch.inputs.data() + static_cast<int64_t>(i) * sample_numel_;
    float* y = batch.labels.data() + static_cast<int64_t>(i) * label_width_;
    try {
      dataset_.read(index, x, y);
    } catch (const std::exception& e) {
      throw_error(fmt::format(
          "input pipeline of replica {} (epoch {}, step {}): reading sample {} of {} failed: {}",
          replica_, epoch, step, index, dataset_.describe(), describe_failure(e)));
    }
    if (transform) {
      apply_transforms(config_.transforms, sample_shape_, config_.seed, epoch, index, x,
                       scratch.data());
    }
  }
  return true;
}

void InputPipeline::Impl::run_worker(int worker) {
  set_thread_rank(rank_);
  // Per-worker buffers, allocated once.
  std::vector<int64_t> indices;
  std::vector<float> scratch;
  try {
    const std::string name = fmt::format("scalescope input r{} w{}", replica_, worker);
    nvtx::name_current_thread(name.c_str());
    indices.resize(static_cast<size_t>(sampler_.per_replica_batch()));
    if (config_.transforms.any()) scratch.resize(static_cast<size_t>(sample_numel_));
  } catch (...) {
    // An exception must not leave the thread (std::terminate), and the consumer must not
    // wait for batches this worker will never fill.
    fail(kNextUnclaimed, std::current_exception());
    return;
  }
  const auto slot_count = static_cast<int64_t>(slots_.size());

  for (;;) {
    int64_t k = 0;
    Slot* slot = nullptr;
    std::shared_ptr<EpochOrder> order;
    std::shared_ptr<EpochOrder> upcoming;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || error_ || next_claim_ < released_ + slot_count; });
      if (stop_ || error_) return;
      k = next_claim_++;
      slot = &slots_[static_cast<size_t>(k % slot_count)];
      slot->ready = -1;
      order = order_locked(first_epoch_ + k / steps_per_epoch_);
      if (k % steps_per_epoch_ == 0) upcoming = next_order_;
    }
    const int64_t epoch = first_epoch_ + k / steps_per_epoch_;
    const int64_t step = k % steps_per_epoch_;

    bool filled = false;
    try {
      compute(*order);
      filled = fill(epoch, step, order->perm, slot->batch, indices, scratch);
    } catch (...) {
      fail(k, std::current_exception());
      return;
    }
    if (!filled) return;  // stopping

    bool wanted = false;
    {
      std::lock_guard lock(mutex_);
      slot->ready = k;
      wanted = k == returned_;
    }
    if (wanted) ready_cv_.notify_one();

    if (upcoming && !stopping_.load(std::memory_order_relaxed)) {
      try {
        compute(*upcoming);
      } catch (...) {
        // Not fatal here: the worker that needs this order computes it again and reports.
      }
    }
  }
}

const HostBatch* InputPipeline::Impl::take(bool wait) {
  const auto slot_count = static_cast<int64_t>(slots_.size());
  std::unique_lock lock(mutex_);
  if (released_ < returned_) {
    // The batch returned last is given back: its slot can take a new batch.
    released_ = returned_;
    work_cv_.notify_one();
  }
  const int64_t k = returned_;
  Slot& slot = slots_[static_cast<size_t>(k % slot_count)];
  const auto settled = [&] { return slot.ready == k || failed_batch_ == k; };
  if (!wait && slot.ready != k) return nullptr;
  ready_cv_.wait(lock, settled);
  if (slot.ready != k) std::rethrow_exception(error_);
  ++returned_;
  return &slot.batch;
}

int64_t InputPipeline::Impl::epoch() const {
  return first_epoch_ + (returned_ > 0 ? (returned_ - 1) / steps_per_epoch_ : 0);
}

int64_t InputPipeline::Impl::step() const {
  return returned_ > 0 ? (returned_ - 1) % steps_per_epoch_ : -1;
}

InputPipeline::InputPipeline(const Dataset& dataset, const Sampler& sampler, int replica,
                             const PipelineConfig& config, int64_t first_epoch)
    : impl_(std::make_unique<Impl>(dataset, sampler, replica, config, first_epoch)) {}

InputPipeline::~InputPipeline() = default;

const HostBatch& InputPipeline::next() {
  return *impl_->take(true);
}

const HostBatch* InputPipeline::try_next() {
  return impl_->take(false);
}

int64_t InputPipeline::epoch() const {
  return impl_->epoch();
}

int64_t InputPipeline::step() const {
  return impl_->step();
}

}  // namespace scalescope
