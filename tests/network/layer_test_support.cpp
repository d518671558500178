#include "layer_test_support.hpp"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "ember/core/half.hpp"
#include "ember/core/stream.hpp"
#include "ember/network/layer_registry.hpp"
#include "ember/network/layers/dropout_layer.hpp"
#include "ember/network/layers/fully_connected_layer.hpp"
#include "ember/network/layers/loss_layers.hpp"
#include "ember/network/precision.hpp"

namespace ember::network::testing {

std::vector<double> to_doubles(const Tensor& t) {
  const Tensor host = t.to(Place::host());
  std::vector<double> out(static_cast<std::size_t>(host.numel()));
  dispatch_floating(host.dtype(), "to_doubles", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = host.data<T>();
    for (std::size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_same_v<T, double>) {
        out[i] = p[i];
      } else {
        out[i] = static_cast<double>(static_cast<float>(p[i]));
      }
    }
  });
  return out;
}

void from_doubles(const Tensor& t, const std::vector<double>& values) {
  EMBER_CHECK(static_cast<std::int64_t>(values.size()) == t.numel(),
              "from_doubles: ", values.size(), " values for ", t.numel(), " elements");
  Tensor host = Tensor::empty(t.shape(), t.dtype(), Place::host());
  dispatch_floating(t.dtype(), "from_doubles", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = host.data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<T, double>) {
        p[i] = values[i];
      } else {
        p[i] = T(static_cast<float>(values[i]));
      }
    }
  });
  t.copy_from(host);
  if (t.is_cuda()) synchronize_device(t.place().device());
}

Graph::Graph(Place place, DType dtype, BuildOptions overrides) : place_(place), dtype_(dtype) {
  const DType master = dtype == DType::F64 ? DType::F64 : DType::F32;
  const DType compute = (dtype == DType::F16 || dtype == DType::BF16) ? dtype : master;
  store_ = std::make_shared<ParameterStore>(place, master, compute);
  overrides.place = place;
  overrides.activation_dtype = dtype;
  ctx_ = std::make_unique<BuildContext>(overrides, store_);
}

BlobPtr Graph::input(const std::string& name, const Shape& shape, bool requires_grad,
                     std::optional<DType> dtype) {
  auto b = make_input_blob(name, shape, dtype.value_or(dtype_), place_, requires_grad);
  blobs_[name] = b;
  inputs_.push_back(b);
  return b;
}

Layer& Graph::add(const std::string& json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text);
  const LayerHeader h = read_layer_header(j);
  std::vector<BlobPtr> bottoms;
  for (const auto& name : h.bottoms) {
    const auto it = blobs_.find(name);
    bottoms.push_back(it == blobs_.end() ? nullptr : it->second);
  }
  Layer* added = nullptr;
  for (LayerPtr& l : create_layer_with_casts(j, bottoms, *ctx_)) {
    for (const auto& t : l->tops())
      blobs_[t->name()] = t;
    if (l->name() == h.name) added = l.get();
    layers_.push_back(std::move(l));
  }
  EMBER_CHECK(added != nullptr, "test graph: layer '", h.name, "' was not built");
  return *added;
}

void Graph::finalize(std::uint64_t seed) {
  ctx_->allocate();
  for (auto& l : layers_)
    l->bind();
  store_->initialize(seed);
}

void Graph::forward(bool training) {
  for (auto& l : layers_) {
    if (auto* d = dynamic_cast<DropoutLayer*>(l.get())) d->set_steps(0);
    l->forward(training);
    if (storage_of_ != nullptr) {
      if (plain_products_.count(l->name()) > 0) redo_as_plain_product(*l);
      for (const auto& t : l->tops()) {
        if (storage_of_->blobs_.count(l->name() + "/" + t->name() + "/f32") > 0) {
          f32_tops_[t->name()] = t->value().clone();
        }
        round_like_device(t, false);
      }
    }
  }
  if (place_.is_cuda()) synchronize_device(place_.device());
}

void Graph::backward() {
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    if (!(*it)->needs_backward()) continue;
    for (const auto& t : (*it)->tops()) {
      const auto kept = f32_tops_.find(t->name());
      if (kept != f32_tops_.end()) t->value().copy_from(kept->second);
    }
    (*it)->backward();
    if (storage_of_ != nullptr) {
      for (const auto& b : (*it)->bottoms()) {
        if (b->requires_grad()) round_like_device(b, true);
      }
    }
  }
  if (place_.is_cuda()) synchronize_device(place_.device());
}

void Graph::emulate_storage_of(const Graph& device) {
  EMBER_CHECK(place_.is_host() && dtype_ == DType::F32,
              "emulate_storage_of: the reference must be an f32 graph on the CPU");
  storage_of_ = &device;
  const DType compute = device.store().compute_dtype();
  if (compute != DType::F16 && compute != DType::BF16) return;
  // The layers that multiply with the 16-bit compute copy (the others read the f32 masters,
  // which the reference already has).
  for (const Layer* l : device.layer_ptrs()) {
    if (!l->uses_compute_copy()) continue;
    for (const auto& dp : l->parameters()) {
      if (!dp->trainable()) continue;
      const ParameterPtr p = store_->find(dp->name());
      EMBER_CHECK(p != nullptr, "emulate_storage_of: the reference has no parameter ", dp->name());
      from_doubles(p->value(), to_doubles(dp->compute(compute)));
    }
  }
}

void Graph::round_like_device(const BlobPtr& blob, bool gradient) const {
  const auto it = storage_of_->blobs_.find(blob->name());
  if (it == storage_of_->blobs_.end()) return;
  const DType stored = it->second->dtype();
  if (stored != DType::F16 && stored != DType::BF16) return;
  if (blob->shape().numel() == 0) return;  // placeholder tops
  const Tensor& t = gradient ? blob->grad() : blob->value();
  from_doubles(t, rounded(to_doubles(t), stored));
}

void Graph::redo_as_plain_product(const Layer& layer) const {
  const auto* fc = dynamic_cast<const FullyConnectedLayer*>(&layer);
  EMBER_CHECK(fc != nullptr, "model_plain_products: '", layer.name(), "' is not an FC layer");
  const std::string& top = fc->tops()[0]->name();
  const auto it = storage_of_->blobs_.find(top);
  if (it == storage_of_->blobs_.end()) return;
  const DType stored = it->second->dtype();
  if (stored != DType::F16 && stored != DType::BF16) return;  // one rounding only
  const std::vector<double> x = values(fc->bottoms()[0]->name());
  const std::vector<double> w = to_doubles(fc->weight()->value());
  const std::vector<double> b = to_doubles(fc->bias()->value());
  const std::int64_t rows = fc->rows(), in = fc->in_features(), out = fc->out_features();
  // The product as the device accumulates it (f32), then stored in 16 bits.
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < out; ++c) {
      double p = 0;
      for (std::int64_t k = 0; k < in; ++k) {
        p += x[static_cast<std::size_t>(r * in + k)] * w[static_cast<std::size_t>(k * out + c)];
      }
      y[static_cast<std::size_t>(r * out + c)] = static_cast<float>(p);
    }
  }
  y = rounded(std::move(y), stored);
  // Ember's bias/ReLU kernel: f32 sum of the stored product and the 16-bit bias, then ReLU
  // (the caller rounds the result to 16 bits like every stored top).
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < out; ++c) {
      auto& v = y[static_cast<std::size_t>(r * out + c)];
      v = static_cast<float>(static_cast<float>(v) +
                             static_cast<float>(b[static_cast<std::size_t>(c)]));
      if (fc->relu() && v < 0) v = 0;
    }
  }
  set_values(top, y);
}

std::vector<double> rounded(std::vector<double> v, DType dtype) {
  for (auto& x : v) {
    if (dtype == DType::F16) x = static_cast<float>(Half(static_cast<float>(x)));
    if (dtype == DType::BF16) x = static_cast<float>(BFloat16(static_cast<float>(x)));
    if (dtype == DType::F32) x = static_cast<float>(x);
  }
  return v;
}

BlobPtr Graph::blob(const std::string& name) const {
  const auto it = blobs_.find(name);
  EMBER_CHECK(it != blobs_.end(), "test graph has no blob '", name, "'");
  return it->second;
}

void Graph::set_values(const std::string& b, const std::vector<double>& v) const {
  from_doubles(blob(b)->value(), v);
}
void Graph::set_grad(const std::string& b, const std::vector<double>& v) const {
  from_doubles(blob(b)->grad(), v);
}
std::vector<double> Graph::values(const std::string& b) const {
  return to_doubles(blob(b)->value());
}
std::vector<double> Graph::grad(const std::string& b) const {
  return to_doubles(blob(b)->grad());
}

void Graph::randomize(const std::string& b, std::mt19937_64& rng, double low, double high) {
  std::uniform_real_distribution<double> u(low, high);
  std::vector<double> v(static_cast<std::size_t>(blob(b)->shape().numel()));
  for (auto& x : v)
    x = u(rng);
  set_values(b, v);
}

std::vector<Layer*> Graph::layer_ptrs() const {
  std::vector<Layer*> out;
  for (const auto& l : layers_)
    out.push_back(l.get());
  return out;
}

std::vector<BlobPtr> Graph::outputs() const {
  std::vector<BlobPtr> out;
  for (const auto& l : layers_) {
    for (const auto& t : l->tops()) {
      bool consumed = false;
      for (const auto& other : layers_) {
        for (const auto& b : other->bottoms())
          consumed = consumed || b == t;
      }
      if (!consumed && t->shape().numel() > 0) out.push_back(t);
    }
  }
  return out;
}

double relative_error(const std::vector<double>& a, const std::vector<double>& b, double floor) {
  EMBER_CHECK(a.size() == b.size(), "relative_error: sizes ", a.size(), " and ", b.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), floor);
}

namespace {

struct Probe {
  std::string what;
  Tensor value;  // perturbed in place
  std::vector<double> analytic;
};

}  // namespace

void check_gradients(Graph& g, std::mt19937_64& rng, const GradCheckOptions& o) {
  // Objective: the loss if the graph ends in one, else sum R * output with R fixed.
  LossLayer* loss = nullptr;
  for (Layer* l : g.layer_ptrs()) {
    if (auto* ll = dynamic_cast<LossLayer*>(l)) loss = ll;
  }
  std::vector<std::pair<BlobPtr, std::vector<double>>> weights;
  if (loss == nullptr) {
    std::uniform_real_distribution<double> u(-1, 1);
    for (const auto& out : g.outputs()) {
      std::vector<double> r(static_cast<std::size_t>(out->shape().numel()));
      for (auto& x : r)
        x = u(rng);
      weights.emplace_back(out, std::move(r));
    }
    ASSERT_FALSE(weights.empty()) << "graph has no outputs";
  }
  auto objective = [&]() {
    g.forward(o.training);
    if (loss != nullptr) return to_doubles(loss->loss())[0];
    double s = 0;
    for (const auto& [blob, r] : weights) {
      const auto v = to_doubles(blob->value());
      for (std::size_t i = 0; i < v.size(); ++i)
        s += r[i] * v[i];
    }
    return s;
  };

  // Analytic gradients.
  (void)objective();
  for (const auto& [blob, r] : weights) {
    ASSERT_TRUE(blob->requires_grad()) << blob->name() << " has no gradient";
    from_doubles(blob->grad(), r);
  }
  g.backward();
  std::vector<Probe> probes;
  for (const auto& in : g.inputs()) {
    if (in->requires_grad())
      probes.push_back({"input " + in->name(), in->value(), to_doubles(in->grad())});
  }
  for (const auto& p : g.store().parameters()) {
    if (p->trainable())
      probes.push_back({"parameter " + p->name(), p->value(), to_doubles(p->grad())});
  }
  ASSERT_FALSE(probes.empty()) << "nothing to check";

  for (auto& probe : probes) {
    const std::int64_t n = probe.value.numel();
    std::vector<std::int64_t> picks{0, n - 1};
    std::uniform_int_distribution<std::int64_t> pick(0, n - 1);
    for (int i = 0; i < o.samples_per_tensor && i < n; ++i)
      picks.push_back(pick(rng));
    std::vector<double> base = to_doubles(probe.value);
    auto central = [&](std::size_t at, double h) {
      auto v = base;
      v[at] = base[at] + h;
      from_doubles(probe.value, v);
      const double plus = objective();
      v[at] = base[at] - h;
      from_doubles(probe.value, v);
      const double minus = objective();
      from_doubles(probe.value, base);
      return (plus - minus) / (2 * h);
    };
    int skipped = 0;
    for (std::int64_t idx : picks) {
      const auto at = static_cast<std::size_t>(idx);
      const double numeric = central(at, o.eps);
      const double analytic = probe.analytic[at];
      const double tol = o.atol + o.rtol * std::max(std::abs(analytic), std::abs(numeric));
      // A kink (ReLU, ELU) inside the step makes the difference quotient depend on the step:
      // such a point has no derivative to check. Smooth points agree at both steps.
      const double finer = central(at, o.eps / 4);
      if (std::abs(finer - numeric) > 10 * tol) {
        ++skipped;
        continue;
      }
      EXPECT_NEAR(analytic, numeric, tol) << probe.what << " element " << idx;
    }
    EXPECT_LE(skipped, 2) << probe.what << ": too many points where the objective is not smooth";
  }
}

}  // namespace ember::network::testing
