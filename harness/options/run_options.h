// The options that say what runs where, shared by `train`, `sweep`, `profile` and
// `collectives` (and `pipeline-bench`): each declared here once and bound to the variable of
// whichever options struct a command fills (a list where a command measures several values).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/options/option_schema.h"
#include "models/optimizer.h"

namespace scalescope {

// --model: one model spec, name[:key=value,...].
OptionDecl& add_model_option(OptionList& list, std::string& model);
// --devices: one set of devices, cpu:N, sim:N or cuda:N (a sweep's device counts are its own
// option: harness/sweep/options.h).
OptionDecl& add_devices_option(OptionList& list, std::string& devices);
// --threads: CPU threads per device (0: automatic).
OptionDecl& add_threads_option(OptionList& list, int& threads);
// --batch: samples per micro-batch and device (weak scaling); a sweep takes a list.
OptionDecl& add_batch_option(OptionList& list, int64_t& batch);
OptionDecl& add_batch_option(OptionList& list, std::vector<int64_t>& batches);
// --workers: input pipeline worker threads; `pipeline-bench` takes a list to measure.
OptionDecl& add_workers_option(OptionList& list, int& workers);
OptionDecl& add_workers_option(OptionList& list, std::vector<int>& workers);
// --seed: of the weights and of the data's order and augmentation.
OptionDecl& add_seed_option(OptionList& list, uint64_t& seed);
// --optimizer (sgd or adam) and --momentum (SGD's): which optimizer, and so its state.
OptionDecl& add_optimizer_option(OptionList& list, OptimizerConfig& optimizer);
OptionDecl& add_momentum_option(OptionList& list, OptimizerConfig& optimizer);
// --precision (fp32, tf32, bf16 or fp16; "" the devices' default, left out of written
// configs); a sweep's is a list, an axis of its grid.
OptionDecl& add_precision_option(OptionList& list, std::string& precision);
OptionDecl& add_precision_option(OptionList& list, std::vector<std::string>& precisions);
// --global-batch: samples per step over all devices instead (strong scaling); a single run
// holds 0 when it is not given, a sweep an empty list.
OptionDecl& add_global_batch_option(OptionList& list, int64_t& global_batch);
OptionDecl& add_global_batch_option(OptionList& list, std::vector<int64_t>& global_batches);

}  // namespace scalescope
