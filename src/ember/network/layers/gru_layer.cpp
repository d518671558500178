#include "ember/network/layers/gru_layer.hpp"

#include <cmath>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"
#include "ember/tensor/gemm.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::network {

namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// One step of the cell for every sample (the equations in gru_layer.hpp). Rows of gx, h/h_prev
// and gates are ld_x, ld_h and ld_g elements apart; gh is [batch, 3 H] or null (t = 0), h_prev
// null at t = 0. gates receives r, z, n and h_{t-1} R_n.
template <class T>
void cpu_cell_forward(std::int64_t batch, std::int64_t hidden, const T* gx, std::int64_t ld_x,
                      const T* gh, const T* bias, const T* h_prev, std::int64_t ld_h, T* h,
                      T* gates, std::int64_t ld_g) {
  const std::int64_t H = hidden;
  for (std::int64_t b = 0; b < batch; ++b) {
    const T* x = gx + b * ld_x;
    const T* g = gh != nullptr ? gh + b * 3 * H : nullptr;
    T* out = gates + b * ld_g;
    for (std::int64_t j = 0; j < H; ++j) {
      const T ghr = g ? g[j] : T(0), ghz = g ? g[H + j] : T(0), ghn = g ? g[2 * H + j] : T(0);
      const T r = sigmoid(x[j] + bias[j] + ghr);
      const T z = sigmoid(x[H + j] + bias[H + j] + ghz);
      const T n = std::tanh(x[2 * H + j] + bias[2 * H + j] + r * ghn);
      const T hp = h_prev != nullptr ? h_prev[b * ld_h + j] : T(0);
      h[b * ld_h + j] = (T(1) - z) * n + z * hp;
      out[j] = r;
      out[H + j] = z;
      out[2 * H + j] = n;
      out[3 * H + j] = ghn;
    }
  }
}

// Backward of one step: dh = dy + dh_next (null at the last step); writes the gradients of the
// input projection (dgx, rows ld_x apart) and of the recurrent one (dgh [batch, 3 H]), and
// dh_prev = dh * z [batch, H] (may alias dh_next).
template <class T>
void cpu_cell_backward(std::int64_t batch, std::int64_t hidden, const T* dy, std::int64_t ld_h,
                       const T* dh_next, const T* gates, std::int64_t ld_g, const T* h_prev, T* dgx,
                       std::int64_t ld_x, T* dgh, T* dh_prev) {
  const std::int64_t H = hidden;
  for (std::int64_t b = 0; b < batch; ++b) {
    const T* g = gates + b * ld_g;
    for (std::int64_t j = 0; j < H; ++j) {
      const T dh = dy[b * ld_h + j] + (dh_next != nullptr ? dh_next[b * H + j] : T(0));
      const T r = g[j], z = g[H + j], n = g[2 * H + j], ghn = g[3 * H + j];
      const T hp = h_prev != nullptr ? h_prev[b * ld_h + j] : T(0);
      const T dan = dh * (T(1) - z) * (T(1) - n * n);
      const T dar = dan * ghn * r * (T(1) - r);
      const T daz = dh * (hp - n) * z * (T(1) - z);
      dgx[b * ld_x + j] = dar;
      dgx[b * ld_x + H + j] = daz;
      dgx[b * ld_x + 2 * H + j] = dan;
      dgh[b * 3 * H + j] = dar;
      dgh[b * 3 * H + H + j] = daz;
      dgh[b * 3 * H + 2 * H + j] = dan * r;
      dh_prev[b * H + j] = dh * z;
    }
  }
}

template <class T>
const T* ptr_or_null(const Tensor& t, bool present) {
  return present ? t.data<T>() : nullptr;
}

}  // namespace

GruLayer::GruLayer(const LayerSpec& spec, BuildContext& ctx, const Config& config)
    : Layer(spec, ctx), config_(config) {
  require_bottoms(1, 1);
  require_tops(1);
  require_supported_dtype(0, false);
  const std::int64_t S = config_.seq_length, V = config_.vector_size, H = config_.hidden;
  const Shape& in = bottom(0).shape();
  const bool rank3 = in.size() == 3;
  const bool fits = rank3 ? (in[1] == S && in[2] == V) : (in.size() == 2 && in[1] == S * V);
  if (!fits) {
    fail("bottom ", bottom(0).describe(), " must be [batch, SeqLength, vector_size] = [batch, ", S,
         ", ", V, "] or [batch, SeqLength * vector_size] = [batch, ", S * V, "]");
  }
  batch_ = in[0];
  const auto v = static_cast<double>(V), h = static_cast<double>(H);
  weight_ = add_parameter("weight", {V, 3 * H},
                          InitSpec{config_.weight_init, v, h, xavier_uniform(v, h)});
  recurrent_ = add_parameter("recurrent_weight", {H, 3 * H},
                             InitSpec{config_.weight_init, h, h, xavier_uniform(h, h)});
  bias_ = add_parameter("bias", {1, 3 * H},
                        InitSpec{config_.bias_init, 0.0, 3 * h, Distribution::constant(0.0)});
  add_top(0, rank3 ? Shape{batch_, S, H} : Shape{batch_, S * H}, bottom(0).dtype());
  const DType t = bottom(0).dtype();
  gx_slot_ = add_workspace({batch_, S, 3 * H}, t);
  gh_slot_ = add_workspace({batch_, 3 * H}, t);
  gates_slot_ = add_workspace({batch_, S, 4 * H}, t);
  if (top(0).requires_grad()) {
    dh_slot_ = add_workspace({batch_, H}, t);
    if (on_cuda()) {
      colsum_slot_ = add_workspace({cuda::column_sum_workspace(batch_ * S, 3 * H)}, DType::F32);
    }
  }
}

void GruLayer::bind() {
  Layer::bind();
  gx_ = gx_slot_.tensor();
  gh_ = gh_slot_.tensor();
  gates_ = gates_slot_.tensor();
  if (dh_slot_) dh_ = dh_slot_.tensor();
  if (colsum_slot_) colsum_ = colsum_slot_.tensor();
}

Tensor GruLayer::steps_view(const Tensor& t, std::int64_t width) const {
  return t.reshape({batch_, config_.seq_length, width});
}

void GruLayer::do_forward(bool, StreamHandle stream) {
  const std::int64_t S = config_.seq_length, V = config_.vector_size, H = config_.hidden;
  ops::GemmOptions o;
  o.allow_tf32 = options_.allow_tf32;
  // The input projection of every step at once; the bias goes in with the gates.
  ops::gemm(bottom(0).value().reshape({batch_ * S, V}), weight_->value(),
            gx_.reshape({batch_ * S, 3 * H}), o, stream);
  for (std::int64_t t = 0; t < S; ++t)
    step_forward(t, stream);
}

void GruLayer::step_forward(std::int64_t t, StreamHandle stream) {
  const std::int64_t S = config_.seq_length, H = config_.hidden;
  const Tensor y = steps_view(top(0).value(), H);
  const Tensor h_prev = t > 0 ? y.select(1, t - 1) : Tensor();
  if (t > 0) {
    ops::GemmOptions o;
    o.allow_tf32 = options_.allow_tf32;
    ops::gemm(h_prev, recurrent_->value(), gh_, o, stream);
  }
  const Tensor gx = steps_view(gx_, 3 * H).select(1, t);
  const Tensor h = y.select(1, t);
  const Tensor gates = steps_view(gates_, 4 * H).select(1, t);
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::gru_forward_step(batch_, H, gx.data<float>(), S * 3 * H,
                           t > 0 ? gh_.data<float>() : nullptr, bias_->value().data<float>(),
                           t > 0 ? h_prev.data<float>() : nullptr, S * H, h.data<float>(),
                           gates.data<float>(), S * 4 * H, stream);
#endif
    return;
  }
  dispatch_cpu(gx.dtype(), "GRU", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_cell_forward<T>(batch_, H, gx.data<T>(), S * 3 * H, ptr_or_null<T>(gh_, t > 0),
                        bias_->value().data<T>(), ptr_or_null<T>(h_prev, t > 0), S * H, h.data<T>(),
                        gates.data<T>(), S * 4 * H);
  });
}

void GruLayer::do_backward(StreamHandle stream) {
  if (!top(0).requires_grad()) return;
  const std::int64_t S = config_.seq_length, V = config_.vector_size, H = config_.hidden;
  // From the last step to the first: each leaves the gradient of x_t W in gx_ (no longer needed
  // by then) and sends dh to the step before.
  for (std::int64_t t = S - 1; t >= 0; --t)
    step_backward(t, stream);
  if (S == 1) ops::fill(recurrent_->grad(), 0.0, stream);
  const Tensor dgx = gx_.reshape({batch_ * S, 3 * H});
  const Tensor x = bottom(0).value().reshape({batch_ * S, V});
  ops::GemmOptions o;
  o.allow_tf32 = options_.allow_tf32;
  o.transpose_a = true;
  ops::gemm(x, dgx, weight_->grad(), o, stream);
  if (bottom(0).requires_grad()) {
    o.transpose_a = false;
    o.transpose_b = true;
    ops::gemm(dgx, weight_->value(), bottom(0).grad().reshape({batch_ * S, V}), o, stream);
  }
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::column_sum(DType::F32, batch_ * S, 3 * H, dgx.data(), bias_->grad().data<float>(),
                     colsum_.data<float>(), stream);
#endif
    return;
  }
  dispatch_cpu(dgx.dtype(), "GRU", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = dgx.data<T>();
    T* db = bias_->grad().data<T>();
    for (std::int64_t c = 0; c < 3 * H; ++c)
      db[c] = T(0);
    for (std::int64_t r = 0; r < batch_ * S; ++r) {
      for (std::int64_t c = 0; c < 3 * H; ++c)
        db[c] += g[r * 3 * H + c];
    }
  });
}

void GruLayer::step_backward(std::int64_t t, StreamHandle stream) {
  const std::int64_t S = config_.seq_length, H = config_.hidden;
  const Tensor y = steps_view(top(0).value(), H);
  const Tensor dy = steps_view(top(0).grad(), H).select(1, t);
  const Tensor h_prev = t > 0 ? y.select(1, t - 1) : Tensor();
  const Tensor gates = steps_view(gates_, 4 * H).select(1, t);
  const Tensor dgx = steps_view(gx_, 3 * H).select(1, t);
  const bool has_next = t < S - 1;
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::gru_backward_step(batch_, H, dy.data<float>(), S * H,
                            has_next ? dh_.data<float>() : nullptr, gates.data<float>(), S * 4 * H,
                            t > 0 ? h_prev.data<float>() : nullptr, dgx.data<float>(), S * 3 * H,
                            gh_.data<float>(), dh_.data<float>(), stream);
#endif
  } else {
    dispatch_cpu(dy.dtype(), "GRU", [&](auto tag) {
      using T = typename decltype(tag)::type;
      cpu_cell_backward<T>(batch_, H, dy.data<T>(), S * H, ptr_or_null<T>(dh_, has_next),
                           gates.data<T>(), S * 4 * H, ptr_or_null<T>(h_prev, t > 0), dgx.data<T>(),
                           S * 3 * H, gh_.data<T>(), dh_.data<T>());
    });
  }
  if (t == 0) return;  // h_{-1} = 0: nothing flows further, R has no term
  ops::GemmOptions o;
  o.allow_tf32 = options_.allow_tf32;
  // dh_{t-1} = dh z (already in dh_) + dgh R^T.
  o.transpose_b = true;
  o.beta = 1.0f;
  ops::gemm(gh_, recurrent_->value(), dh_, o, stream);
  // dR += h_{t-1}^T dgh (the first step back overwrites).
  o.transpose_b = false;
  o.transpose_a = true;
  o.beta = t == S - 1 ? 0.0f : 1.0f;
  ops::gemm(h_prev, gh_, recurrent_->grad(), o, stream);
}

namespace factories {
LayerPtr gru(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  ConfigReader p = json.object("gru_param");
  GruLayer::Config c;
  c.hidden = p.integer("num_output", IntRange::at_least(1));
  c.seq_length = p.integer("SeqLength", IntRange::at_least(1));
  c.vector_size = p.integer("vector_size", IntRange::at_least(1));
  // HugeCTR sizes its cuDNN descriptors with it; the batch here comes from the bottom (the train
  // and eval networks have different ones), so it is only checked to be a batch size.
  (void)p.integer("batchsize", IntRange::at_least(1));
  c.weight_init = p.choice_or("weight_init", c.weight_init, kInitKindNames);
  c.bias_init = p.choice_or("bias_init", c.bias_init, kInitKindNames);
  p.finish();
  return std::make_unique<GruLayer>(spec, ctx, c);
}
}  // namespace factories

}  // namespace ember::network
