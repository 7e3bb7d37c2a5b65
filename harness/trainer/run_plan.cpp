#include "harness/trainer/run_plan.h"

namespace scalescope {

RunPlan::RunPlan(const TrainOptions& o)
    : spec(parse_device_spec(o.devices)),
      precision(run_precision(o, spec.kind)),
      def(make_model(o.model)),
      data(open_run_data(o.data, def, o.seed)),
      summary(summarize(def, data.sample_shape)),
      replicas(spec.count()),
      batch(per_replica_batch(o, replicas)),
      layout(process_layout(o.cluster, o.replicas_per_process, replicas)),
      sampler(data.train->size(), batch * o.accumulation, replicas, o.seed, o.data.shuffle),
      steps(o.adaptive_warmup.enabled ? 0
            : o.epochs > 0            ? o.epochs * sampler.steps_per_epoch()
                                      : o.steps) {}

}  // namespace scalescope
