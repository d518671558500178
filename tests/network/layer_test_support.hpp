// Test helpers for the network layer: a small graph of layers built from JSON, random inputs,
// central finite differences, and device-vs-CPU comparison.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ember/network/build_context.hpp"
#include "ember/network/layer.hpp"
#include "ember/network/parameter_store.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::network::testing {

// Layers built from JSON text in order, their blobs by name, one parameter store.
class Graph {
 public:
  // `dtype` is the activation dtype (f64 for gradient checks on the CPU; f16/bf16 on CUDA);
  // the parameter store keeps f64 masters for f64 graphs, f32 (plus a 16-bit copy) otherwise.
  Graph(Place place, DType dtype, BuildOptions overrides = {});
  // An input the graph does not produce: own memory, filled later with set_input().
  // `dtype` defaults to the graph's (labels are f32).
  BlobPtr input(const std::string& name, const Shape& shape, bool requires_grad = true,
                std::optional<DType> dtype = std::nullopt);
  // Builds a layer from its JSON object text, with the casts mixed precision puts around it
  // (create_layer_with_casts); bottoms are looked up by name. Returns the layer itself.
  Layer& add(const std::string& json_text);
  // Allocates, binds every layer and initialises the parameters from `seed`.
  void finalize(std::uint64_t seed = 7);

  void forward(bool training = true);
  void backward();

  // Makes this (CPU, f32) graph the exact-input reference of `device`, a graph of the same
  // layers whose activations are f16/bf16: the parameters of the layers that multiply with the
  // 16-bit compute copy (Layer::uses_compute_copy) take its values, and from now on, after each
  // layer's forward every top the device stores in 16 bits is rounded to 16 bits, and after each
  // layer's backward so is every bottom gradient the device stores in 16 bits. The reference then
  // sees, at every layer boundary, exactly the values the device computes from; only the arithmetic
  // inside a layer differs (summation order). A layer the device computes in f32 between casts
  // (its top "<layer>/<top>/f32" cast to the 16-bit "<top>") keeps its own top in f32 there: its
  // backward (a GRU's, which reads its outputs as the previous steps' states) sees the unrounded
  // top here too, while the layers after it see the rounded one. `device` must outlive this
  // graph's use of it; names must match.
  void emulate_storage_of(const Graph& device);
  // With emulate_storage_of: the FC layers named here run on the device in the plain form (the
  // product stored in 16 bits, then Ember's bias/ReLU kernel adds the bias in f32 and rounds
  // again); the reference computes their outputs the same way: round16(x W) + b, ReLU, round16.
  // Where x W and the bias nearly cancel, the first rounding alone is many u of the output.
  void model_plain_products(std::set<std::string> fc_layers) {
    plain_products_ = std::move(fc_layers);
  }

  // Copies host values (any floating dtype) into a blob's value or gradient.
  void set_values(const std::string& blob, const std::vector<double>& values) const;
  void set_grad(const std::string& blob, const std::vector<double>& values) const;
  std::vector<double> values(const std::string& blob) const;
  std::vector<double> grad(const std::string& blob) const;
  // Fills an input with uniform values in [low, high).
  void randomize(const std::string& blob, std::mt19937_64& rng, double low = -1, double high = 1);

  BlobPtr blob(const std::string& name) const;
  Layer& layer(std::size_t i) const { return *layers_.at(i); }
  std::size_t size() const { return layers_.size(); }
  ParameterStore& store() const { return *store_; }
  BuildContext& context() const { return *ctx_; }
  DType dtype() const { return dtype_; }
  Place place() const { return place_; }
  std::vector<Layer*> layer_ptrs() const;
  // Blobs some layer produces and no layer consumes (the graph's outputs).
  std::vector<BlobPtr> outputs() const;
  // Inputs (blobs made with input()).
  const std::vector<BlobPtr>& inputs() const { return inputs_; }

 private:
  Place place_;
  DType dtype_;
  std::shared_ptr<ParameterStore> store_;
  std::unique_ptr<BuildContext> ctx_;
  std::map<std::string, BlobPtr> blobs_;
  std::vector<BlobPtr> inputs_;
  std::vector<LayerPtr> layers_;
  const Graph* storage_of_ = nullptr;     // see emulate_storage_of
  std::set<std::string> plain_products_;  // see model_plain_products
  // Tops of layers the device computes in f32 between casts, before their rounding, by blob name.
  std::map<std::string, Tensor> f32_tops_;
  void round_like_device(const BlobPtr& blob, bool gradient) const;
  void redo_as_plain_product(const Layer& fc) const;
};

// Values rounded to what `dtype` holds (f16, bf16, f32; f64 leaves them).
std::vector<double> rounded(std::vector<double> values, DType dtype);

// Reads any floating tensor (any place) as doubles.
std::vector<double> to_doubles(const Tensor& t);
// Writes doubles into a tensor of any floating dtype and place.
void from_doubles(const Tensor& t, const std::vector<double>& values);

struct GradCheckOptions {
  double eps = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-8;
  int samples_per_tensor = 24;  // random elements checked per tensor (plus first and last)
  bool training = true;
};

// Central finite differences of L = sum over the graph's outputs of R * output (R random, fixed)
// or, when the graph ends in a loss, L = the loss value; checks every input that requires a
// gradient and every trainable parameter. Resets stochastic layers before each forward.
void check_gradients(Graph& g, std::mt19937_64& rng, const GradCheckOptions& options = {});

// ||a - b|| / max(||b||, floor): NaN-aware (any NaN gives +inf).
double relative_error(const std::vector<double>& a, const std::vector<double>& b,
                      double floor = 1e-12);

}  // namespace ember::network::testing
