#include "ember/network/layers/weighted_layers.hpp"

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"
#include "ember/tensor/gemm.hpp"

namespace ember::network {

// ---- MultiCross -------------------------------------------------------------------------------

MultiCrossLayer::MultiCrossLayer(const LayerSpec& spec, BuildContext& ctx, int num_layers,
                                 InitKind weight_init, InitKind bias_init)
    : Layer(spec, ctx), num_layers_(num_layers) {
  require_bottoms(1, 1);
  require_tops(1);
  require_rank(0, 2, "[batch, features]");
  require_supported_dtype(0, true);
  if (num_layers < 1) fail("mc_param.num_layers must be at least 1, got ", num_layers);
  batch_ = bottom(0).shape()[0];
  width_ = bottom(0).shape()[1];
  const auto n = static_cast<double>(width_);
  for (int l = 0; l < num_layers; ++l) {
    weights_.push_back(add_parameter(cat("weight", l), {1, width_},
                                     InitSpec{weight_init, n, n, xavier_uniform(n, n)}));
    biases_.push_back(add_parameter(cat("bias", l), {1, width_},
                                    InitSpec{bias_init, 0.0, n, Distribution::constant(0.0)}));
  }
  add_top(0, bottom(0).shape(), bottom(0).dtype());
  fused_ = on_cuda() && cuda::cross_fused(width_, num_layers);
  if (fused_) {
    // The fused kernels keep every hidden state in registers: only the per-row scalars s_l
    // (which the backward recomputes the hidden states from) and the weight gradients' partial
    // sums are stored.
    s_all_slot_ = add_workspace({num_layers, batch_}, DType::F32);
    if (top(0).requires_grad()) {
      workspace_slot_ =
          add_workspace({cuda::multi_cross_workspace(batch_, width_, num_layers)}, DType::F32);
    }
    return;
  }
  // The CPU and the per-layer CUDA kernels: hidden states and per-row scalars in the
  // parameters' dtype: f32 on CUDA whatever the activations, so a 16-bit layer rounds only its
  // output, not each of its cross layers.
  const DType h = parameter_dtype();
  for (int l = 1; l < num_layers; ++l)
    hidden_slots_.push_back(add_workspace({batch_, width_}, h));
  for (int l = 0; l < num_layers; ++l)
    s_slots_.push_back(add_workspace({batch_}, h));
  t_slot_ = add_workspace({batch_}, h);
  if (on_cuda()) {
    workspace_slot_ = add_workspace({cuda::cross_workspace(batch_, width_)}, DType::F32);
    // A 16-bit layer keeps the running gradient and the input gradient's partial sums in f32
    // (an f32 layer uses its top's gradient and its bottom's gradient for them).
    if (bottom(0).dtype() != DType::F32 && top(0).requires_grad()) {
      g_slot_ = add_workspace({batch_, width_}, DType::F32);
      if (bottom(0).requires_grad()) dx_slot_ = add_workspace({batch_, width_}, DType::F32);
    }
  }
}

void MultiCrossLayer::bind() {
  Layer::bind();
  hidden_.clear();
  s_.clear();
  for (const auto& h : hidden_slots_)
    hidden_.push_back(h.tensor());
  for (const auto& s : s_slots_)
    s_.push_back(s.tensor());
  if (t_slot_) t_ = t_slot_.tensor();
  if (s_all_slot_) s_all_ = s_all_slot_.tensor();
  if (workspace_slot_) workspace_ = workspace_slot_.tensor();
  if (g_slot_) g32_ = g_slot_.tensor();
  if (dx_slot_) dx32_ = dx_slot_.tensor();
}

namespace {

template <class T>
void cpu_cross_forward(std::int64_t batch, std::int64_t n, const T* x0, const T* x, const T* w,
                       const T* bias, T* s, T* y) {
  for (std::int64_t b = 0; b < batch; ++b) {
    T dot = 0;
    for (std::int64_t k = 0; k < n; ++k)
      dot += x[b * n + k] * w[k];
    s[b] = dot;
    for (std::int64_t k = 0; k < n; ++k) {
      y[b * n + k] = x0[b * n + k] * dot + bias[k] + x[b * n + k];
    }
  }
}

template <class T>
void cpu_cross_backward(std::int64_t batch, std::int64_t n, const T* x0, const T* x, const T* w,
                        const T* s, T* g, T* dx0, bool first, bool last, T* t, T* dw, T* dbias) {
  for (std::int64_t k = 0; k < n; ++k)
    dw[k] = dbias[k] = T(0);
  for (std::int64_t b = 0; b < batch; ++b) {
    T dot = 0;
    for (std::int64_t k = 0; k < n; ++k)
      dot += g[b * n + k] * x0[b * n + k];
    t[b] = dot;
    for (std::int64_t k = 0; k < n; ++k) {
      dw[k] += dot * x[b * n + k];
      dbias[k] += g[b * n + k];
    }
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t k = 0; k < n; ++k) {
      const T gv = g[b * n + k];
      const T through_x = gv + t[b] * w[k];
      if (dx0 != nullptr) {
        T v = gv * s[b] + (first ? T(0) : dx0[b * n + k]);
        if (last) v += through_x;
        dx0[b * n + k] = v;
      }
      if (!last) g[b * n + k] = through_x;
    }
  }
}

}  // namespace

#if EMBER_WITH_CUDA
void MultiCrossLayer::fused_forward(StreamHandle stream) {
  std::vector<const float*> w, b;
  for (int l = 0; l < num_layers_; ++l) {
    w.push_back(weights_[static_cast<std::size_t>(l)]->value().data<float>());
    b.push_back(biases_[static_cast<std::size_t>(l)]->value().data<float>());
  }
  const Tensor& x0 = bottom(0).value();
  cuda::multi_cross_forward(x0.dtype(), batch_, width_, num_layers_, x0.data(), w.data(), b.data(),
                            s_all_.data<float>(), top(0).value().data(), stream);
}

void MultiCrossLayer::fused_backward(StreamHandle stream) {
  std::vector<const float*> w, b;
  std::vector<float*> dw, db;
  for (int l = 0; l < num_layers_; ++l) {
    const auto li = static_cast<std::size_t>(l);
    w.push_back(weights_[li]->value().data<float>());
    b.push_back(biases_[li]->value().data<float>());
    dw.push_back(weights_[li]->grad().data<float>());
    db.push_back(biases_[li]->grad().data<float>());
  }
  const Tensor& x0 = bottom(0).value();
  void* dx = bottom(0).requires_grad() ? bottom(0).grad().data() : nullptr;
  cuda::multi_cross_backward(x0.dtype(), batch_, width_, num_layers_, x0.data(), w.data(), b.data(),
                             s_all_.data<float>(), top(0).grad().data(), dx, dw.data(), db.data(),
                             workspace_.data<float>(), stream);
}
#endif

void MultiCrossLayer::do_forward(bool, StreamHandle stream) {
  if (fused_) {
#if EMBER_WITH_CUDA
    fused_forward(stream_or_default(stream));
#endif
    return;
  }
  const Tensor& x0 = bottom(0).value();
  const int L = num_layers_;
  auto input_of = [&](int l) { return l == 0 ? x0 : hidden_[static_cast<std::size_t>(l - 1)]; };
  auto output_of = [&](int l) {
    return l == L - 1 ? top(0).value() : hidden_[static_cast<std::size_t>(l)];
  };
  for (int l = 0; l < L; ++l) {
    const auto li = static_cast<std::size_t>(l);
    if (on_cuda()) {
#if EMBER_WITH_CUDA
      const Tensor& x = input_of(l);
      const Tensor& y = output_of(l);
      cuda::cross_forward(x0.dtype(), x.dtype(), y.dtype(), batch_, width_, x0.data(), x.data(),
                          weights_[li]->value().data<float>(), biases_[li]->value().data<float>(),
                          s_[li].data<float>(), y.data(), stream_or_default(stream));
#endif
      continue;
    }
    dispatch_cpu(x0.dtype(), "MultiCross", [&](auto tag) {
      using T = typename decltype(tag)::type;
      cpu_cross_forward<T>(batch_, width_, x0.data<T>(), input_of(l).data<T>(),
                           weights_[li]->value().data<T>(), biases_[li]->value().data<T>(),
                           s_[li].data<T>(), output_of(l).data<T>());
    });
  }
}

void MultiCrossLayer::do_backward(StreamHandle stream) {
  if (!top(0).requires_grad()) return;
  if (fused_) {
#if EMBER_WITH_CUDA
    fused_backward(stream_or_default(stream));
#endif
    return;
  }
  const Tensor& x0 = bottom(0).value();
  // The top's gradient serves as the running dL/dx_l (this layer is its only reader).
  const Tensor& g = top(0).grad();
  const bool want_dx = bottom(0).requires_grad();
  const int L = num_layers_;
  for (int l = L - 1; l >= 0; --l) {
    const auto li = static_cast<std::size_t>(l);
    const Tensor& x = l == 0 ? x0 : hidden_[li - 1];
    const bool first = l == L - 1, last = l == 0;
    if (on_cuda()) {
#if EMBER_WITH_CUDA
      // f32: the top's gradient is the running gradient, the bottom's gradient the partial
      // sums. 16-bit: both live in f32 workspaces; the first step reads the top's 16-bit
      // gradient, the last writes the bottom's.
      const bool wide = g32_.defined();
      const Tensor& g_in = wide && !first ? g32_ : g;
      float* g_out = wide ? g32_.data<float>() : g.data<float>();
      const Tensor& dx_out = wide && !last ? dx32_ : bottom(0).grad();
      const float* dx_acc = wide ? (want_dx ? dx32_.data<float>() : nullptr)
                                 : (want_dx ? bottom(0).grad().data<float>() : nullptr);
      cuda::cross_backward(
          x0.dtype(), g_in.dtype(), x.dtype(), want_dx ? dx_out.dtype() : x0.dtype(), batch_,
          width_, x0.data(), x.data(), weights_[li]->value().data<float>(), s_[li].data<float>(),
          g_in.data(), g_out, dx_acc, want_dx ? dx_out.data() : nullptr, first, last,
          t_.data<float>(), weights_[li]->grad().data<float>(), biases_[li]->grad().data<float>(),
          workspace_.data<float>(), stream_or_default(stream));
#endif
      continue;
    }
    dispatch_cpu(x0.dtype(), "MultiCross", [&](auto tag) {
      using T = typename decltype(tag)::type;
      cpu_cross_backward<T>(
          batch_, width_, x0.data<T>(), x.data<T>(), weights_[li]->value().data<T>(),
          s_[li].data<T>(), g.data<T>(), want_dx ? bottom(0).grad().data<T>() : nullptr, first,
          last, t_.data<T>(), weights_[li]->grad().data<T>(), biases_[li]->grad().data<T>());
    });
  }
}

// ---- WeightMultiply ---------------------------------------------------------------------------

WeightMultiplyLayer::WeightMultiplyLayer(const LayerSpec& spec, BuildContext& ctx,
                                         std::int64_t slots, std::int64_t vec, InitKind weight_init)
    : Layer(spec, ctx), slots_(slots), vec_(vec) {
  require_bottoms(1, 1);
  require_tops(1);
  require_rank(0, 2, "[batch, slots]");
  require_supported_dtype(0, true);
  if (slots <= 0 || vec <= 0)
    fail("weight_dims must be two positive numbers, got [", slots, ", ", vec, "]");
  if (bottom(0).shape()[1] != slots) {
    fail("weight_dims[0] = ", slots, " must equal the width of ", bottom(0).describe());
  }
  batch_ = bottom(0).shape()[0];
  const auto s = static_cast<double>(slots), o = static_cast<double>(slots * vec);
  weight_ =
      add_parameter("weight", {slots, vec}, InitSpec{weight_init, s, o, xavier_uniform(s, o)});
  add_top(0, {batch_, slots * vec}, bottom(0).dtype());
  if (on_cuda()) {
    workspace_slot_ =
        add_workspace({cuda::weight_multiply_workspace(batch_, slots, vec)}, DType::F32);
  }
}

void WeightMultiplyLayer::bind() {
  Layer::bind();
  if (workspace_slot_) workspace_ = workspace_slot_.tensor();
}

void WeightMultiplyLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::weight_multiply_forward(x.dtype(), batch_, slots_, vec_, x.data(),
                                  weight_->value().data<float>(), y.data(),
                                  stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "WeightMultiply", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    const T* w = weight_->value().data<T>();
    T* out = y.data<T>();
    for (std::int64_t b = 0; b < batch_; ++b)
      for (std::int64_t i = 0; i < slots_; ++i)
        for (std::int64_t j = 0; j < vec_; ++j)
          out[(b * slots_ + i) * vec_ + j] = in[b * slots_ + i] * w[i * vec_ + j];
  });
}

void WeightMultiplyLayer::do_backward(StreamHandle stream) {
  if (!top(0).requires_grad()) return;
  const Tensor& x = bottom(0).value();
  const Tensor& dy = top(0).grad();
  const bool want_dx = bottom(0).requires_grad();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::weight_multiply_backward(
        x.dtype(), batch_, slots_, vec_, x.data(), weight_->value().data<float>(), dy.data(),
        want_dx ? bottom(0).grad().data() : nullptr, weight_->grad().data<float>(),
        workspace_.data<float>(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "WeightMultiply", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    const T* w = weight_->value().data<T>();
    const T* g = dy.data<T>();
    T* dw = weight_->grad().data<T>();
    T* dx = want_dx ? bottom(0).grad().data<T>() : nullptr;
    for (std::int64_t i = 0; i < slots_ * vec_; ++i)
      dw[i] = T(0);
    for (std::int64_t b = 0; b < batch_; ++b) {
      for (std::int64_t i = 0; i < slots_; ++i) {
        T acc = 0;
        for (std::int64_t j = 0; j < vec_; ++j) {
          const T gv = g[(b * slots_ + i) * vec_ + j];
          dw[i * vec_ + j] += gv * in[b * slots_ + i];
          acc += gv * w[i * vec_ + j];
        }
        if (dx != nullptr) dx[b * slots_ + i] = acc;
      }
    }
  });
}

// ---- MatrixMultiply ---------------------------------------------------------------------------

MatrixMultiplyLayer::MatrixMultiplyLayer(const LayerSpec& spec, BuildContext& ctx)
    : Layer(spec, ctx) {
  require_bottoms(2, 2);
  require_tops(1);
  require_supported_dtype(0, true);
  const Shape& a = bottom(0).shape();
  const Shape& b = bottom(1).shape();
  const int rank = a.size();
  if (rank < 2 || rank > 4 || b.size() != rank) {
    fail("bottoms must both be 2-D, 3-D or 4-D: ", bottom(0).describe(), ", ",
         bottom(1).describe());
  }
  if (bottom(1).dtype() != bottom(0).dtype()) {
    fail("bottoms must share a dtype: ", bottom(0).describe(), ", ", bottom(1).describe());
  }
  if (a[rank - 1] != b[rank - 2]) {
    fail("inner dimensions differ: ", bottom(0).describe(), " x ", bottom(1).describe());
  }
  for (int d = 0; d < rank - 2; ++d) {
    if (a[d] != b[d])
      fail("batch dimensions differ: ", bottom(0).describe(), " x ", bottom(1).describe());
  }
  m_ = a[rank - 2];
  n_ = a[rank - 1];
  k_ = b[rank - 1];
  if (rank > 2) {
    batch_ = 1;
    for (int d = 0; d < rank - 2; ++d)
      batch_ *= a[d];
  }
  Shape out = a;
  out[rank - 1] = k_;
  add_top(0, out, bottom(0).dtype());
}

Tensor MatrixMultiplyLayer::view(const Tensor& t, std::int64_t rows, std::int64_t cols) const {
  return batch_ == 0 ? t.reshape({rows, cols}) : t.reshape({batch_, rows, cols});
}

void MatrixMultiplyLayer::do_forward(bool, StreamHandle stream) {
  ops::GemmOptions o;
  o.allow_tf32 = options_.allow_tf32;
  const Tensor a = view(bottom(0).value(), m_, n_), b = view(bottom(1).value(), n_, k_);
  const Tensor c = view(top(0).value(), m_, k_);
  if (batch_ == 0) {
    ops::gemm(a, b, c, o, stream_or_default(stream));
  } else {
    ops::batched_gemm(a, b, c, o, stream_or_default(stream));
  }
}

void MatrixMultiplyLayer::do_backward(StreamHandle stream) {
  if (!top(0).requires_grad()) return;
  const Tensor a = view(bottom(0).value(), m_, n_), b = view(bottom(1).value(), n_, k_);
  const Tensor dc = view(top(0).grad(), m_, k_);
  auto run = [&](const Tensor& x, const Tensor& y, const Tensor& z, bool ta, bool tb) {
    ops::GemmOptions o;
    o.transpose_a = ta;
    o.transpose_b = tb;
    o.allow_tf32 = options_.allow_tf32;
    if (batch_ == 0) {
      ops::gemm(x, y, z, o, stream_or_default(stream));
    } else {
      ops::batched_gemm(x, y, z, o, stream_or_default(stream));
    }
  };
  if (bottom(0).requires_grad()) run(dc, b, view(bottom(0).grad(), m_, n_), false, true);
  if (bottom(1).requires_grad()) run(a, dc, view(bottom(1).grad(), n_, k_), true, false);
}

// ---- configuration ----------------------------------------------------------------------------

namespace factories {

LayerPtr multi_cross(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  ConfigReader p = json.object("mc_param");
  const std::int64_t layers = p.integer("num_layers", IntRange::between(1, 64));
  const InitKind w = p.choice_or("weight_init", InitKind::Default, kInitKindNames);
  const InitKind b = p.choice_or("bias_init", InitKind::Default, kInitKindNames);
  p.finish();
  return std::make_unique<MultiCrossLayer>(spec, ctx, static_cast<int>(layers), w, b);
}

LayerPtr weight_multiply(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  const std::vector<std::int64_t> dims = json.integers("weight_dims");
  if (dims.size() != 2) json.invalid("weight_dims", "two integers [slots, vector size]", dims);
  const InitKind w = json.choice_or("weight_init", InitKind::Default, kInitKindNames);
  return std::make_unique<WeightMultiplyLayer>(spec, ctx, dims[0], dims[1], w);
}

LayerPtr matrix_multiply(ConfigReader&, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<MatrixMultiplyLayer>(spec, ctx);
}

}  // namespace factories

}  // namespace ember::network
