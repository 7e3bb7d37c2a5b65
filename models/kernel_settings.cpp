#include "models/kernel_settings.h"

namespace scalescope {

KernelSettings kernel_settings() {
  return {.precision = precision(),
          .determinism = determinism(),
          .conv_search = conv_search(),
          .fuse_layers = fuse_layers()};
}

void set_kernel_settings(const KernelSettings& settings) {
  set_precision(settings.precision);
  set_determinism(settings.determinism);
  set_conv_search(settings.conv_search);
  set_fuse_layers(settings.fuse_layers);
}

}  // namespace scalescope
