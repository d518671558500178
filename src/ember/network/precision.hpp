// Mixed precision's graph rule: the casts a network built for 16-bit activations puts around a
// layer so that every layer receives what it computes in (docs/network.md, "Precision").
//
// On CUDA with f16 or bf16 activations:
//   - a layer registered as computing in f32 (CudaCompute::F32: GRU) gets its 16-bit bottoms cast
//     to f32, and its tops cast back to the activation dtype, so the rest of the network stays in
//     16 bits and a user never sees the difference;
//   - a loss's labels (bottom 1) are f32 whatever produced them;
//   - a layer that computes in its bottoms' dtype and is given bottoms of different floating
//     dtypes (an f32 tensor from an explicit Cast beside a 16-bit one) gets the f32 ones cast to
//     the activation dtype.
// Nothing is inserted otherwise: on the CPU (the f32 reference), in f32 networks, or when a
// layer's bottoms already agree with it (an explicit Cast to f32 before an f32 layer keeps its
// tops in f32, as the configuration asked).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ember/core/dtype.hpp"
#include "ember/network/build_context.hpp"
#include "ember/network/layer.hpp"

namespace ember::network {

struct CastPlan {
  // Per bottom: the dtype it is cast to before the layer reads it, or nullopt.
  std::vector<std::optional<DType>> bottoms;
  // The dtype every top of the layer is cast back to, or nullopt.
  std::optional<DType> tops;
  bool empty() const;
};

// The casts for a layer of `type` over bottoms of `bottom_dtypes` in a network built with
// `options`. Non-floating bottoms (FusedInnerProduct's u8 placeholders) are never cast.
CastPlan plan_casts(const std::string& type, const std::vector<DType>& bottom_dtypes,
                    const BuildOptions& options);

// create_layer with its plan's casts, in execution order: the bottoms' casts, the layer, the
// tops' casts. Consumers find every top under its configured name: when the tops are cast
// back, the layer's own tops are named "<layer>/<top>/f32" and the casts produce the configured
// names. Cast layers are named "<layer>/cast/<tensor>".
std::vector<LayerPtr> create_layer_with_casts(const nlohmann::json& layer,
                                              const std::vector<BlobPtr>& bottoms,
                                              BuildContext& ctx);

}  // namespace ember::network
