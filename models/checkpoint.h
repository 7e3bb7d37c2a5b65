// Checkpoints in the safetensors format, named and laid out as PyTorch's nn.Sequential
// state_dict of the same model ("0.weight", "0.bias"; conv weights OIHW, dense [out, in]),
// so a checkpoint loads into the equivalent PyTorch model and back. The optimizer state goes
// to a second file beside it. Writes are atomic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/shape.h"
#include "models/model.h"
#include "models/optimizer.h"

namespace scalescope {

struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<float> data;
};

// A safetensors file: F32 tensors and string metadata ("__metadata__").
struct SafetensorsFile {
  std::vector<NamedTensor> tensors;  // in file order
  std::map<std::string, std::string> metadata;
};

// Throws Error naming the path and the problem (unreadable, truncated, bad header, a dtype
// other than F32, overlapping or out-of-range offsets...).
SafetensorsFile read_safetensors(const std::string& path);
// The same checks, reading only the header: the tensors' names and shapes (their data left
// empty) and the metadata. What a run checks before it starts.
SafetensorsFile read_safetensors_index(const std::string& path);
void write_safetensors(const std::string& path, const SafetensorsFile& file);

// "<path without .safetensors>.optim.safetensors"
std::string optimizer_state_path(const std::string& weights_path);

// What the trainer keeps beside the optimizer's state (the fp16 loss scale, as GradScaler's
// state_dict): entries of the optimizer state file's metadata, each key prefixed "trainer.".
using TrainerState = std::map<std::string, std::string>;

// Writes the model's weights to `path` and, with an optimizer, its state and step count (and
// `trainer`) to optimizer_state_path(path).
void save_checkpoint(const std::string& path, const Model& model,
                     const Optimizer* optimizer = nullptr, const TrainerState& trainer = {});
// The trainer's entries of the optimizer state file beside `path`, without their prefix; empty
// when there is no such file. Throws Error naming the file when it cannot be read.
TrainerState load_trainer_state(const std::string& path);
// Loads weights (and, with an optimizer, its state when the state file exists). Throws Error
// naming the file and the tensor when names, shapes or sizes do not match the model.
void load_checkpoint(const std::string& path, Model& model, Optimizer* optimizer = nullptr);
// Reads the headers of the files load_checkpoint would read (the weights, and the optimizer
// state where it exists), throwing what a load of a broken file would throw.
void check_checkpoint_files(const std::string& path);

}  // namespace scalescope
