#include "harness/cli/data_options.h"

namespace scalescope::cli {

void add_data_options(CLI::App& cmd, DataOptions& o, bool with_workers) {
  cmd.add_option("--data", o.spec,
                 "Data: synthetic, synthetic:device, idx:DIR (MNIST-format), cifar10:DIR")
      ->capture_default_str();
  if (with_workers) {
    cmd.add_option("--workers", o.workers, "Input pipeline worker threads")->capture_default_str();
  }
  cmd.add_option("--queue-depth", o.queue_depth, "Ready batches kept ahead of the trainer")
      ->capture_default_str();
  cmd.add_flag("!--no-normalize", o.normalize,
               "Do not normalise file data per channel (on by default)");
  cmd.add_option("--crop-padding", o.crop_padding,
                 "Random crop after zero-padding each side by this many pixels (0: off)")
      ->capture_default_str();
  cmd.add_flag("--flip", o.flip, "Random horizontal flips");
  cmd.add_option("--decode-cost-us", o.decode_cost_us,
                 "Busy CPU time per sample emulating heavy decoding, in microseconds")
      ->capture_default_str();
}

}  // namespace scalescope::cli
