// How the replicas of a run spread over the processes of a launch (mpirun, srun) and their
// nodes.
#pragma once

#include "core/device_spec.h"

namespace scalescope {

class Cluster;

// How a run of `devices` replicas spreads over the processes of `cluster` (null: this
// process alone), each process hosting `replicas_per_process` (0: devices / processes).
struct ProcessLayout {
  int processes = 1;             // processes taking part
  int replicas_per_process = 1;  // replicas (threads) in each of them
  int first = 0;                 // this process's first replica's rank
  int local = 1;                 // replicas in this process (0: this process waits)
  int on_node = 1;               // replicas of the run on this process's node
  // Replicas of the run on this process's cores: its own and those of the processes running
  // on cores it runs on (Cluster::shares_cores_with); what divides its CPU threads.
  int sharing_cores = 1;
  int node_first = 0;  // this process's first replica's index among them
  int nodes = 1;       // nodes the run spans
};
// Throws Error naming the counts when `devices` does not spread evenly.
ProcessLayout process_layout(const Cluster* cluster, int replicas_per_process, int devices);

// The index of the device replica `rank` opens: its rank in one process (the r-th visible
// device). Across
// processes, where this process sees `visible` devices: its place among the replicas of its
// node when it sees the node's devices (the processes before it on the node have the first
// ones); its place among this process's replicas when it sees fewer (it was given its own,
// by a per-rank CUDA_VISIBLE_DEVICES or srun --gpus-per-task).
int device_index(const ProcessLayout& layout, int rank, int visible);
// Throws Error unless this process, seeing `visible` devices of `kind`, can open its replicas'
// (device_index): naming the counts and how devices were made visible.
void check_visible_devices(const ProcessLayout& layout, DeviceKind kind, int visible);

}  // namespace scalescope
