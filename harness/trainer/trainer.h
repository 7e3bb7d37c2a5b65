// The mirrored (synchronous data-parallel) trainer: one thread per device, each with its own
// model copy, optimizer state and input shard; weights broadcast from replica 0 before the
// first step; gradients all-reduced (averaged) in buckets, as backward makes them ready.
// Replicas may span the processes of an MPI launch (TrainOptions::cluster): then each
// process hosts its replicas as threads, one collective group spans them all, and every
// process ends with the whole run's report.
#pragma once

#include "harness/trainer/options.h"
#include "reports/run_report.h"

namespace scalescope {

// Trains and returns the record of the run. Throws Error on failure.
RunReport train(const TrainOptions& options, const TrainHooks& hooks = {});

}  // namespace scalescope
