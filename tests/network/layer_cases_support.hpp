// The layer configurations the gradient tests and the GPU tests share: every dense layer type
// and loss, built from JSON on small (and odd) shapes.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ember/core/dtype.hpp"
#include "ember/tensor/shape.hpp"

namespace ember::network::testing {

struct InputSpec {
  std::string name;
  Shape shape;
  bool requires_grad = true;
  double low = -1.0, high = 1.0;
  bool label = false;   // an f32 label input (values in {0, 1}, or -1 with masking allowed)
  bool binary = false;  // values in {0, 1} in the graph's dtype (an attention mask)
};

// Every case runs on CUDA in f32, f16 and bf16 (the layers that compute in f32 get casts).
struct LayerCase {
  std::string name;
  std::vector<InputSpec> inputs;
  std::vector<std::string> layers;  // JSON objects, built in order
};

// gtest prints a case by its name.
inline void PrintTo(const LayerCase& c, std::ostream* os) {
  *os << c.name;
}

// The cases for gradient checks (small shapes).
const std::vector<LayerCase>& gradient_cases();
// Larger and odd shapes for the GPU-vs-CPU comparison (1, 7, 251 x 511 x 1023 ...).
const std::vector<LayerCase>& device_cases();
// The MLP chains on a batch far deeper than their widths (4099 samples, widths 13 to 40), as in
// training: their weight gradients reduce over the batch, where cuBLASLt's candidates split k.
const std::vector<LayerCase>& deep_batch_cases();

}  // namespace ember::network::testing
