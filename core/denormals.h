// Denormal (subnormal) floats on the CPU. An x86 core takes a microcode assist, many times an
// ordinary operation's time, for arithmetic on or producing one. A model that memorizes its
// batch (`--data synthetic:device` repeats one) drives its gradients and Adam's moments there,
// and the steps slow down as it does (docs/performance.md, "Denormal floats on CPU", has
// mlp-41m's figures).
// GPUs take denormals at full speed.
//
// SCALESCOPE_DENORMALS=flush sets MXCSR's flush-to-zero and denormals-are-zero for the process
// before any thread starts (threads inherit it), as PyTorch's torch.set_flush_denormal(True)
// does; unset, empty or `keep` leaves the CPU's default. A sweep report's environment records
// the variable with every SCALESCOPE_* one.
#pragma once

namespace scalescope {

enum class Denormals { kKeep, kFlush };

// SCALESCOPE_DENORMALS: kKeep unset, empty or "keep", kFlush for "flush"; throws Error naming
// the variable and its value otherwise.
Denormals denormals_from_environment();

// This thread's handling of denormals from now on (threads it starts afterwards inherit it).
// Throws Error for kFlush on a CPU without such a mode (not x86).
void set_denormals(Denormals denormals);

// Whether this thread flushes denormals (false on a CPU without such a mode).
bool denormals_flushed();

}  // namespace scalescope
