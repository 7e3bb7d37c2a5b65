// A model instantiated on one device: flat parameter and gradient buffers, the kernels of
// each layer and the activations of a batch.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "models/kernels.h"
#include "models/memory_plan.h"
#include "models/zoo.h"

namespace scalescope {

// Told when each layer's work starts and ends being enqueued on the stream, in forward
// (training only) and backward: --profile-layers times the layers with events recorded here.
// A layer whose work another layer does (a fused activation) gets an empty pair.
class LayerProbe {
 public:
  enum class Pass { kForward, kBackward };
  virtual ~LayerProbe() = default;
  virtual void begin(int layer, Pass pass, Stream& stream) = 0;
  virtual void end(int layer, Pass pass, Stream& stream) = 0;
};

class Model {
 public:
  // Builds `def` for samples of shape `input` on `device`, and initialises the weights from
  // `seed` (Glorot-uniform weights, zero biases), identically on every backend.
  // Throws Error when a layer cannot take the shape it gets.
  Model(ModelDef def, Shape input, Device& device, uint64_t seed);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelDef& def() const { return def_; }
  const Shape& input_shape() const { return shapes_.front(); }
  const Shape& output_shape() const { return shapes_.back(); }
  Device& device() const { return device_; }

  // Parameters in checkpoint order (layer by layer, weight before bias); a tied weight once.
  const std::vector<ParamInfo>& params() const { return params_; }
  // The second names of tied weights (ModelDef::ties).
  const std::vector<ParamAlias>& param_aliases() const { return aliases_; }
  int64_t param_count() const { return param_count_; }
  // The flat buffers. Their layout is reverse layer order (the last layer's parameters
  // first), so that gradients become ready front to back during backward and a bucket of
  // consecutive layers is one contiguous range. Each parameter starts at a multiple of
  // kParamAlignment floats, the gaps held at zero, so the buffers hold flat_size() floats,
  // a little more than param_count().
  static constexpr int64_t kParamAlignment = 64;  // floats: 256 bytes
  static int64_t aligned_param_end(int64_t end) {
    return (end + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
  }
  int64_t flat_size() const { return weights_.numel(); }
  const Tensor& weights() const { return weights_; }
  const Tensor& grads() const { return grads_; }
  int64_t param_offset(size_t i) const { return offsets_.at(i); }
  TensorView param(size_t i) const;
  TensorView grad(size_t i) const;
  // [begin, end) of layer `layer`'s gradients inside grads(), its padding included (so the
  // next layer's range begins at `end`); empty for layers without any.
  std::pair<int64_t, int64_t> layer_grad_range(int layer) const;

  // Host copies of the weights, in params() order (tests, checkpoints).
  std::vector<std::vector<float>> weights_to_host() const;
  void weights_from_host(const std::vector<std::vector<float>>& values);

  // The layers' buffers (batch norm's running statistics), in layer order, in one flat
  // tensor of their own: never all-reduced, never touched by the optimizer. Empty when no
  // layer keeps any.
  const std::vector<ParamInfo>& buffer_infos() const { return buffer_infos_; }
  const Tensor& buffers() const { return buffers_; }      // unallocated when there are none
  int64_t buffer_count() const { return buffer_count_; }  // floats in buffers(); 0 for none
  std::vector<std::vector<float>> buffers_to_host() const;
  void buffers_from_host(const std::vector<std::vector<float>>& values);

  // forward: computes the output of a batch. `input` is device memory holding batch ×
  // input_shape() floats and must stay valid until backward() returns. In evaluation
  // (`training` false), layers that differ run as in PyTorch's eval mode (batch norm with
  // its running statistics) and no backward may follow.
  // REQUIRES: the device current. Runs on `stream`; does not synchronize the host. The first
  // call for a batch size plans its kernels and allocates its activations; later ones
  // allocate nothing.
  void forward(const float* input, int64_t batch, Stream& stream, bool training = true);
  // Output of the last forward: batch × output_shape() floats on the device, until the next
  // forward or backward (whose restored inputs may take its place in the forward arena).
  const float* output() const;
  // The loss of the last forward. loss[0] = `scale` × the sum of per-sample losses, and the
  // gradient of that with respect to the output is kept for backward().
  // `labels` holds batch × label_shape() floats; `loss` is one float of device memory.
  void loss_forward_backward(const float* labels, float scale, float* loss, Stream& stream);
  void loss_forward(const float* labels, float scale, float* loss, Stream& stream);
  void count_correct(const float* labels, float* correct, Stream& stream);
  // Backward through every layer, last to first, writing grads(). `on_layer_done(layer)` is
  // called after each layer's backward has been enqueued (the trainer starts all-reducing a
  // bucket from there).
  void backward(Stream& stream, const std::function<void(int layer)>& on_layer_done = {});

  // Batch statistics over every replica (--sync-batchnorm), this model being replica
  // `group.rank`: `sum(values, count, backward)` sums `count` floats of device memory over the
  // `group.replicas` replicas, in stream order (`backward` says which pass asks). Set before the
  // first forward; planning a layer whose kernels cannot synchronize their statistics then
  // throws Error naming it.
  using SyncSum = std::function<void(float* values, int64_t count, bool backward)>;
  void set_sync(SyncGroup group, SyncSum sum);
  // Null: none. `probe` outlives the passes it is set for.
  void set_layer_probe(LayerProbe* probe) { probe_ = probe; }

  // Where the device memory of training at batch size `batch` goes, in bytes. Plans the batch
  // as the first forward of it would (allocating its activations and kernels); a step then
  // allocates nothing more of the model's.
  struct Memory {
    int64_t parameters = 0;  // weights, their gradients (tied weights' too), the layers' buffers
    int64_t kept = 0;        // the outputs some backward reads (bf16, fp16: their 16-bit
                             // copies), all live at the loss; a graph's in its arena, from the
                             // forward that writes each to its last backward
    int64_t transient = 0;   // the arena of the other outputs (bf16, fp16: of all), and of a
                             // graph's activation gradients and scratch once those outputs are
                             // done, beyond the copies it holds
    int64_t gradients = 0;   // a sequence's activation gradients: two ping-pong buffers
    int64_t kernels = 0;     // the layers' and the loss's own: workspaces, scratch, statistics
    // `kept` by the layer whose output it is (a fused producer's in its activation's): they
    // add up to `kept`.
    std::vector<int64_t> kept_by_layer;
    // Of `kernels`, what each layer's kernel allocated for itself as it was made (statistics,
    // masks, buffers of its own); the rest is the scratch the layers' passes share and the
    // loss's.
    std::vector<int64_t> kernels_by_layer;
    int64_t total() const { return parameters + kept + transient + gradients + kernels; }
  };
  Memory memory(int64_t batch);

  // What the libraries chose for the kernels of batch size `batch` (LayerKernel::choices),
  // indexed by layer. Throws Error when no forward has planned that batch size.
  std::vector<std::vector<KernelChoice>> kernel_choices(int64_t batch) const;
  // Under bf16 and fp16, which layers' training forward writes the 16-bit copy backward reads
  // and no fp32 output (every reader of that output reads the copy in forward; LayerKernel::
  // forwards_into_saved), indexed by layer; all false otherwise. Throws Error like
  // kernel_choices.
  std::vector<bool> writes_saved_copies(int64_t batch) const;
  // Under bf16 and fp16, which layers' output gradient is kept only as its 16-bit copy, written
  // by its one reader's backward and read by the layer's (LayerKernel::reads_half_gradient),
  // indexed by layer; all false otherwise. Throws Error like kernel_choices.
  std::vector<bool> half_gradients(int64_t batch) const;
  // Under bf16 and fp16, which Adds write their output's saved 16-bit copy in their own pass
  // (with the ReLU fused after them: that ReLU's output), indexed by layer; all false otherwise.
  std::vector<bool> adds_writing_saved_copies(int64_t batch) const;

 private:
  struct Plan;
  Plan& plan_for(int64_t batch);
  // The plan of `batch`; throws Error when no forward has planned it.
  const Plan& planned(int64_t batch) const;
  // model_memory.cpp: the plan's tensors once its kernels are made: the outputs backward reads
  // (kept in fp32, or saved in 16 bits under bf16 and fp16), the arena of the others (by the
  // spans of their readers), the activation gradients (a graph's in that arena too).
  void plan_memory(Plan& plan);
  // A graph's one arena of transient outputs, the outputs backward reads (or their saved
  // copies), activation gradients and second readers' scratch (plan_step_arena). `step`: the
  // outputs by their readers' spans (transient_outputs); `kept_floats`: each layer's kept
  // output's floats (0: none).
  void plan_step_arena_of(Plan& plan, std::vector<int64_t> sizes,
                          const std::vector<std::vector<int>>& inputs, ArenaTensors step,
                          const std::vector<int64_t>& kept_floats);
  struct StepRead {
    size_t holder;  // the layer whose output (or saved copy) is read
    int at;         // step time of the backward that reads it
    bool restored;  // restored from its saved copy first
  };
  std::vector<StepRead> step_reads(const Plan& plan) const;
  std::vector<LiveSpan> restore_spans(const std::vector<StepRead>& reads) const;
  std::vector<LiveSpan> kept_spans(const Plan& plan, const std::vector<StepRead>& reads,
                                   const std::vector<int64_t>& floats) const;
  // The floats of each output that is not kept (0 for the others and for fused producers,
  // whose activation's tensor then starts at the producer: `spans` says so).
  std::vector<int64_t> transient_outputs(const Plan& plan, const std::vector<int64_t>& sizes,
                                         const std::vector<bool>& kept,
                                         std::vector<LiveSpan>& spans) const;
  // plan.outputs: at kept_at where that is set, else at its offset in plan.transient.
  void place_outputs(Plan& plan, const std::vector<float*>& kept_at,
                     const std::vector<int64_t>& offsets);
  // Under bf16 and fp16: after `layer`'s training forward, its output into its 16-bit saved
  // copy where a backward reads it; before its backward, the saved copies it reads back into
  // their fp32 places (16-bit values: what autocast's saved tensors hold).
  void save_output(int layer, Stream& stream);
  // Which layers write their saved copy themselves and no fp32 output (Plan::into_saved), and
  // such a layer's training forward.
  void plan_saved_outputs(Plan& plan) const;
  bool reads_saved_input_only(const Plan& plan, int reader, int of) const;
  // Which gradients are kept in 16 bits only (Plan::half_gradient), once grad_alias is known.
  void plan_half_gradients(Plan& plan) const;
  // Whether `layer`'s backward reads the saved copies as they are (backward_saved), and which
  // of its input (layer `from`'s output) and output it reads.
  struct SavedReads {
    int from = kModelInput;
    bool input = false, output = false, as_saved = false;
  };
  SavedReads saved_reads(const Plan& plan, const LayerKernel& kernel, int layer) const;
  // Whether `kernel` runs `pass` in stages around the model's all-reduces (set_sync): such a
  // pass reads fp32 only.
  bool staged(const LayerKernel& kernel, LayerKernel::Pass pass) const;
  void forward_into_saved(LayerKernel& kernel, int layer, Stream& stream);
  // The saved copy of layer `of`'s output, which layer `reader`'s backward reads.
  const uint16_t* saved_copy(int reader, int of) const;
  // The saved copy of `layer`'s input that its training forward reads instead of the input
  // (LayerKernel::forwards_from_saved); null where it reads the input.
  const uint16_t* saved_input(LayerKernel& kernel, int layer) const;
  void restore_saved(int reader, int of, Stream& stream);
  // A layer's backward (run_backward, its saved values restored first, or backward_saved where
  // the kernel reads them as they are: LayerKernel::reads_saved). `adding`: backward_adding or
  // backward_saved_adding, where adds_to_input_gradient said it may.
  void backward_layer(LayerKernel& kernel, int layer, const float* dout, float* din, Stream& stream,
                      bool adding = false);
  // Whether `layer`'s backward can add its input's gradient to the one a later reader wrote
  // (LayerKernel::adds_input_gradient in an fp32 call, adds_input_gradient_from_saved in one
  // from the saved copies; neither with sync stages).
  bool adds_to_input_gradient(const LayerKernel& kernel, int layer) const;
  void forward_layer(size_t layer, bool training, Stream& stream);
  LayerBinding binding(size_t layer, int64_t batch) const;
  // The output of `layer` in the current plan (kModelInput: the model's input), and the
  // (first) input of `layer`.
  const float* output_of(int layer) const;
  const float* layer_input(int layer) const;
  void backward_graph(Stream& stream, const std::function<void(int layer)>& on_layer_done);
  void backward_graph_layer(int layer, Stream& stream);
  void add_gradient(int layer, const float* gradient, Stream& stream,
                    const kernel_math::ReluOutput* relu_output = nullptr);
  // After `layer`'s backward: adds the gradients that later layers computed for the weights
  // they share with it (kept in tied_grads_) to its own.
  void add_tied_gradients(int layer, Stream& stream);
  // A layer's training passes, in stages around the sync sums when set_sync asked for them.
  void run_forward(LayerKernel& kernel, const float* in, float* out, Stream& stream);
  void run_backward(LayerKernel& kernel, const float* in, const float* out, const float* dout,
                    float* din, Stream& stream, bool adding = false);

  ModelDef def_;
  Device& device_;
  std::vector<Shape> shapes_;  // per sample: input, then each layer's output
  std::vector<ParamInfo> params_;
  std::vector<int64_t> offsets_;
  int64_t param_count_ = 0;
  Tensor weights_;
  Tensor grads_;
  std::vector<ParamAlias> aliases_;
  Tensor tied_grads_;  // per alias, the gradient of the layer that reads the weight under it
  std::vector<int64_t> tied_offsets_;
  std::vector<ParamInfo> buffer_infos_;
  std::vector<int64_t> buffer_offsets_;
  int64_t buffer_count_ = 0;
  Tensor buffers_;
  std::map<int64_t, std::unique_ptr<Plan>> plans_;
  Plan* current_ = nullptr;
  SyncGroup sync_group_;
  SyncSum sync_;
  const float* input_ = nullptr;
  LayerProbe* probe_ = nullptr;
};

}  // namespace scalescope
