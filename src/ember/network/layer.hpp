// The base of every dense layer and loss.
//
// Life cycle: the constructor checks the bottoms, creates the tops (shapes fixed, batch size
// included), declares parameters and reserves workspaces through the BuildContext; after
// BuildContext::allocate(), bind() takes the tensors; then forward()/backward() run on a stream
// (nullptr: the device's current stream; ignored on the CPU).
//
// backward() overwrites the gradients of the bottoms that require one and the gradients of the
// layer's parameters (never accumulates: see blob.hpp); it reads the tops' gradients and may
// overwrite them as scratch (they have one reader: this layer).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/error.hpp"
#include "ember/network/blob.hpp"
#include "ember/network/build_context.hpp"
#include "ember/network/parameter_store.hpp"

namespace ember::network {

// What every layer is built from: identity and connections, as parsed from its JSON object.
struct LayerSpec {
  std::string name;
  std::string type;
  std::vector<BlobPtr> bottoms;
  std::vector<std::string> top_names;
};

class Layer {
 public:
  Layer(const LayerSpec& spec, BuildContext& ctx);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }
  const std::vector<BlobPtr>& bottoms() const { return bottoms_; }
  const std::vector<BlobPtr>& tops() const { return tops_; }
  const std::vector<ParameterPtr>& parameters() const { return parameters_; }
  Place place() const { return options_.place; }
  const BuildOptions& options() const { return options_; }

  // Takes tensors once the context is allocated. Overrides must call Layer::bind() first.
  virtual void bind();
  // Runs the layer on `stream` (nullptr: the device's current stream; ignored on the CPU).
  // `training` selects training behaviour (Dropout drops, BatchNorm uses batch statistics).
  void forward(bool training, StreamHandle stream = nullptr);
  // Requires a training forward of the same batch before it.
  void backward(StreamHandle stream = nullptr);
  // False when no top needs a gradient: the whole backward can be skipped. (Losses override:
  // their top, the loss value, has no gradient, yet they start the backward pass.)
  virtual bool needs_backward() const;
  // Whether the layer multiplies with its weights' 16-bit compute copy in mixed precision (the
  // products on tensor cores: the fully connected layers) rather than the f32 masters (every
  // other layer: per-element weights cost nothing extra in f32 and keep their full precision).
  virtual bool uses_compute_copy() const { return false; }
  // "'fc1' (InnerProduct)" for messages.
  std::string describe() const;

 protected:
  // What forward()/backward() run; `stream` is already resolved (nullptr on the CPU).
  virtual void do_forward(bool training, StreamHandle stream) = 0;
  virtual void do_backward(StreamHandle stream) = 0;

  // A top with its own value and gradient memory; the gradient exists when any bottom requires
  // one or the layer has trainable parameters (so declare parameters before adding tops), and
  // the network builds gradients at all.
  BlobPtr add_top(std::size_t index, const Shape& shape, DType dtype);
  // A top whose tensors are views of another blob's (Reshape): bound from `source` in bind().
  BlobPtr add_view_top(std::size_t index, const Shape& shape, const BlobPtr& source);
  // A top whose value is a view of `source`'s value (same shape) but whose gradient is its own
  // (Slice's whole-width ranges: no copy forward, and each consumer's gradient kept apart for the
  // backward to add). Its consumers read the value, as every layer does with its bottoms.
  BlobPtr add_value_view_top(std::size_t index, const BlobPtr& source);
  // An empty [0] u8 top without memory or gradient, standing for a tensor HugeCTR passes between
  // layers that Ember does not need (FusedInnerProduct's mask/dReLU/bias-gradient tops).
  BlobPtr add_placeholder_top(std::size_t index);
  ParameterPtr add_parameter(const std::string& suffix, const Shape& shape, const InitSpec& init,
                             bool trainable = true);
  TensorSlot add_workspace(const Shape& shape, DType dtype);

  // Construction-time checks: a ConfigError "layer 'x' (Type): ..." naming the problem.
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    throw ConfigError(cat("layer ", describe(), ": ", args...));
  }
  void require_bottoms(std::size_t min_count, std::size_t max_count) const;
  void require_tops(std::size_t count) const;
  void require_rank(std::size_t bottom, int rank, const char* layout) const;
  // Each bottom must have dtype `dtype`.
  void require_dtype(std::size_t bottom, DType dtype) const;
  // Element types this layer computes in on its place: f32/f64 on the CPU; f32 and, where
  // `half_ok`, f16/bf16 on CUDA. A layer without `half_ok` is registered as computing in f32
  // (layer_registry.hpp), and create_layer_with_casts (precision.hpp) casts around it.
  void require_supported_dtype(std::size_t bottom, bool half_ok) const;
  // The dtype of the parameter masters: f32 (f64 in the CPU's gradient tests). Statistics and
  // the f32 intermediate values of 16-bit layers are kept in it.
  DType parameter_dtype() const { return parameter_dtype_; }

  const Blob& bottom(std::size_t i) const { return *bottoms_.at(i); }
  const Blob& top(std::size_t i) const { return *tops_.at(i); }
  bool any_bottom_requires_grad() const;
  StreamHandle stream_or_default(StreamHandle stream) const;
  bool bound_ = false;
  bool on_cuda() const { return options_.place.is_cuda(); }

  BuildOptions options_;

 private:
  struct TopSlots {
    TensorSlot value, grad;
    BlobPtr view_source;
    bool value_only_view = false;  // view_source's value, this top's own gradient
    bool placeholder = false;
  };
  std::string name_, type_;
  std::vector<BlobPtr> bottoms_, tops_;
  std::vector<std::string> top_names_;
  std::vector<TopSlots> top_slots_;
  std::vector<ParameterPtr> parameters_;
  DType parameter_dtype_;
  BuildContext* ctx_;  // valid during construction only
};

using LayerPtr = std::unique_ptr<Layer>;

// Runs `fn` with T = float or double for a CPU dtype; anything else is an error naming `what`.
template <class F>
decltype(auto) dispatch_cpu(DType dtype, const char* what, F&& fn) {
  switch (dtype) {
    case DType::F32:
      return fn(TypeTag<float>{});
    case DType::F64:
      return fn(TypeTag<double>{});
    default:
      break;
  }
  EMBER_THROW(what, " on the CPU computes in f32 (or f64), not ", dtype_name(dtype));
}

}  // namespace ember::network
