// Scaling sweeps: the mirrored trainer over a grid of models × device counts × batch sizes ×
// bucket caps, each point warmed up until its step time settles, measured, and repeated; the
// report written after every point so that a crash keeps what was finished.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/sweep/options.h"
#include "harness/trainer/trainer.h"
#include "reports/sweep_report.h"

namespace scalescope {

// A file-name-safe name of a point: "cifar-cnn_cpu2_b64" (+ "_bucket5" for other than the
// default bucket caps, + "_fp16" with compression).
std::string point_file_name(const SweepPoint& point);

// The grid in run order: per model and batch, ascending device counts (the one-device
// baseline first, so speedups are known as soon as possible), and for each count of more
// than one every bucket cap × first-bucket cap, ascending, × compression (none first).
std::vector<SweepPoint> sweep_grid(const SweepOptions& options, const DeviceAxis& axis);

// options.devices' axis, its GPU counts checked against the machine (those of this node in
// a multi-process launch). Throws Error naming the value as `names` says.
DeviceAxis resolve_devices(const SweepOptions& options, const OptionSources& names = {});

// Every check that needs no measurement: each option's own, device counts against the
// machine, strong-scaling divisibility, the data of every model, the training options of
// every point. Throws Error naming the value as `names` says (by key unless told how the user
// gave it) and what would be accepted.
void validate(const SweepOptions& options, const OptionSources& names = {});

struct SweepProgress {
  // Before every repeat of every point: `done` runs finished out of `total`.
  std::function<void(const SweepPoint& point, int repeat, int done, int total, double elapsed_s)>
      on_run;
  std::function<void(const SweepPoint& point)> on_point_done;
};

// Runs the grid (skipping points already in `resume`, when given) and returns the report;
// writes it to options.output after every point. A point that fails is recorded with its
// error and the sweep goes on.
SweepReport run_sweep(const SweepOptions& options, const Environment& environment,
                      const SweepProgress& progress, const SweepReport* resume = nullptr);

}  // namespace scalescope
