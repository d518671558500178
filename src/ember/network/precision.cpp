#include "ember/network/precision.hpp"

#include <nlohmann/json.hpp>

#include "ember/network/layer_registry.hpp"
#include "ember/network/layers/cast_layer.hpp"

namespace ember::network {

namespace {

bool is_16bit(DType d) {
  return d == DType::F16 || d == DType::BF16;
}

LayerPtr make_cast(const std::string& name, const BlobPtr& from, const std::string& to,
                   DType target, BuildContext& ctx) {
  return std::make_unique<CastLayer>(LayerSpec{name, "Cast", {from}, {to}}, ctx, target);
}

}  // namespace

bool CastPlan::empty() const {
  if (tops) return false;
  for (const auto& b : bottoms) {
    if (b) return false;
  }
  return true;
}

CastPlan plan_casts(const std::string& type, const std::vector<DType>& dtypes,
                    const BuildOptions& options) {
  CastPlan plan;
  plan.bottoms.assign(dtypes.size(), std::nullopt);
  const DType act = options.activation_dtype;
  if (!options.place.is_cuda() || !is_16bit(act)) return plan;
  // A loss's labels are f32; they take no part in the choice of the compute dtype.
  const bool loss = is_loss_type(type);
  auto is_label = [&](std::size_t i) { return loss && i == 1; };
  if (loss && dtypes.size() > 1 && is_floating(dtypes[1]) && dtypes[1] != DType::F32) {
    plan.bottoms[1] = DType::F32;
  }
  if (cuda_compute(type) == CudaCompute::F32) {
    bool cast_any = false;
    for (std::size_t i = 0; i < dtypes.size(); ++i) {
      if (is_label(i) || !is_16bit(dtypes[i])) continue;
      plan.bottoms[i] = DType::F32;
      cast_any = true;
    }
    if (cast_any && !loss) plan.tops = act;
    return plan;
  }
  std::optional<DType> common;
  bool agree = true;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (is_label(i) || !is_floating(dtypes[i])) continue;
    if (common && *common != dtypes[i]) agree = false;
    common = dtypes[i];
  }
  if (agree) return plan;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (is_label(i) || !is_floating(dtypes[i]) || dtypes[i] == act) continue;
    plan.bottoms[i] = act;
  }
  return plan;
}

std::vector<LayerPtr> create_layer_with_casts(const nlohmann::json& layer,
                                              const std::vector<BlobPtr>& bottoms,
                                              BuildContext& ctx) {
  const LayerHeader h = read_layer_header(layer);
  std::vector<DType> dtypes;
  bool complete = bottoms.size() == h.bottoms.size();
  for (const BlobPtr& b : bottoms) {
    complete = complete && b != nullptr;
    if (b != nullptr) dtypes.push_back(b->dtype());
  }
  std::vector<LayerPtr> out;
  // create_layer reports missing bottoms and miscounts in its own words.
  const CastPlan plan = complete ? plan_casts(h.type, dtypes, ctx.options()) : CastPlan{};
  if (plan.empty()) {
    out.push_back(create_layer(layer, bottoms, ctx));
    return out;
  }
  std::vector<BlobPtr> cast_bottoms = bottoms;
  for (std::size_t i = 0; i < bottoms.size(); ++i) {
    if (!plan.bottoms[i]) continue;
    const DType to = *plan.bottoms[i];
    out.push_back(make_cast(cat(h.name, "/cast/", h.bottoms[i]), bottoms[i],
                            cat(h.name, "/", h.bottoms[i], "/", dtype_name(to)), to, ctx));
    cast_bottoms[i] = out.back()->tops().at(0);
  }
  nlohmann::json renamed = layer;
  if (plan.tops) {
    std::vector<std::string> tops;
    for (const std::string& t : h.tops)
      tops.push_back(cat(h.name, "/", t, "/f32"));
    renamed["top"] = tops;
  }
  out.push_back(create_layer(renamed, cast_bottoms, ctx));
  if (plan.tops) {
    const std::vector<BlobPtr> tops = out.back()->tops();
    for (std::size_t k = 0; k < tops.size(); ++k) {
      EMBER_CHECK(tops[k]->dtype() == DType::F32 && tops[k]->shape().numel() > 0, "layer '", h.name,
                  "' (", h.type, "): an f32 layer's top ", tops[k]->describe(),
                  " cannot be cast back to ", dtype_name(*plan.tops));
      out.push_back(
          make_cast(cat(h.name, "/cast/", h.tops[k]), tops[k], h.tops[k], *plan.tops, ctx));
    }
  }
  return out;
}

}  // namespace ember::network
