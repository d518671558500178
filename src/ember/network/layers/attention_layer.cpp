#include "ember/network/layers/attention_layer.hpp"

#include <algorithm>
#include <cmath>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"
#include "ember/tensor/gemm.hpp"

namespace ember::network {

namespace {

// What a masked-out position loses (HugeCTR's constant): exp(-10000) is 0 in any precision.
constexpr double kMaskPenalty = 10000.0;

// Row r of the [batch, heads, from, to] scores is sample r / (heads from), query row r % from.
// The exponents are taken relative to the row's largest logit s_t + pen_t as (s_c - s_t) +
// (pen_c - pen_t): written s_c + pen_c - max, a row whose keys are all masked would carry its
// scores next to -10000, where f32 keeps 13 bits fewer of them.
template <class T>
void cpu_softmax(std::int64_t rows, std::int64_t cols, std::int64_t heads, std::int64_t from,
                 const T* scores, const T* mask, T* probs) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* s = scores + r * cols;
    const T* m = mask != nullptr ? mask + ((r / (heads * from)) * from + r % from) * cols : nullptr;
    T* p = probs + r * cols;
    auto penalty = [&](std::int64_t c) {
      return m != nullptr ? -static_cast<T>(kMaskPenalty) * (T(1) - m[c]) : T(0);
    };
    std::int64_t top = 0;
    for (std::int64_t c = 1; c < cols; ++c) {
      if (s[c] + penalty(c) > s[top] + penalty(top)) top = c;
    }
    T sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      p[c] = std::exp((s[c] - s[top]) + (penalty(c) - penalty(top)));
      sum += p[c];
    }
    for (std::int64_t c = 0; c < cols; ++c)
      p[c] /= sum;
  }
}

template <class T>
void cpu_softmax_backward(std::int64_t rows, std::int64_t cols, const T* probs, const T* dprobs,
                          T* dscores) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* p = probs + r * cols;
    const T* dp = dprobs + r * cols;
    T dot = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      dot += dp[c] * p[c];
    for (std::int64_t c = 0; c < cols; ++c)
      dscores[r * cols + c] = p[c] * (dp[c] - dot);
  }
}

}  // namespace

MultiHeadAttentionLayer::MultiHeadAttentionLayer(const LayerSpec& spec, BuildContext& ctx,
                                                 std::int64_t heads)
    : Layer(spec, ctx), heads_(heads) {
  require_bottoms(3, 4);
  require_tops(1);
  for (std::size_t i = 0; i < 3; ++i) {
    require_rank(i, 3, "[batch, sequence, hidden]");
    require_supported_dtype(i, true);
  }
  for (std::size_t i = 1; i < bottoms().size(); ++i) {
    if (bottom(i).dtype() != bottom(0).dtype()) {
      fail("bottoms must share one dtype: ", bottom(0).describe(), " vs ", bottom(i).describe());
    }
  }
  const Shape& q = bottom(0).shape();
  const Shape& k = bottom(1).shape();
  const Shape& v = bottom(2).shape();
  if (k != v || k[0] != q[0] || k[2] != q[2]) {
    fail("needs Q [batch, from, hidden] and K, V [batch, to, hidden], got ", bottom(0).describe(),
         ", ", bottom(1).describe(), ", ", bottom(2).describe());
  }
  batch_ = q[0];
  from_ = q[1];
  to_ = k[1];
  width_ = q[2];
  if (heads_ < 1 || width_ % heads_ != 0) {
    fail("num_attention_heads = ", heads_, " must divide the hidden width ", width_);
  }
  if (to_ == 0) fail("bottom ", bottom(1).describe(), " has no positions to attend to");
  head_width_ = width_ / heads_;
  if (masked()) {
    if (bottom(3).shape() != Shape{batch_, 1, from_, to_}) {
      fail("the mask ", bottom(3).describe(), " must be [batch, 1, from, to] = [", batch_, ", 1, ",
           from_, ", ", to_, "]");
    }
    if (bottom(3).requires_grad()) {
      fail("the mask ", bottom(3).describe(),
           " must not require a gradient (it is data: 1 keeps a position, 0 masks it)");
    }
  }
  add_top(0, q, bottom(0).dtype());
  const Shape scores{batch_, heads_, from_, to_};
  scores_slot_ = add_workspace(scores, parameter_dtype());
  probs_slot_ = add_workspace(scores, bottom(0).dtype());
  if (top(0).requires_grad()) dscores_slot_ = add_workspace(scores, bottom(0).dtype());
}

void MultiHeadAttentionLayer::bind() {
  Layer::bind();
  scores_ = scores_slot_.tensor();
  probs_ = probs_slot_.tensor();
  if (dscores_slot_) dscores_ = dscores_slot_.tensor();
}

Tensor MultiHeadAttentionLayer::head(const Tensor& t, std::int64_t i) const {
  return t.slice(2, i * head_width_, (i + 1) * head_width_);
}

void MultiHeadAttentionLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& q = bottom(0).value();
  const Tensor& k = bottom(1).value();
  const Tensor& v = bottom(2).value();
  const Tensor& o = top(0).value();
  ops::GemmOptions scaled;
  scaled.transpose_b = true;
  scaled.alpha = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_width_)));
  scaled.allow_tf32 = options_.allow_tf32;
  for (std::int64_t i = 0; i < heads_; ++i)
    ops::batched_gemm(head(q, i), head(k, i), scores_.select(1, i), scaled, stream);
  const std::int64_t rows = batch_ * heads_ * from_;
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::attention_softmax(probs_.dtype(), rows, to_, heads_, from_, scores_.data<float>(),
                            masked() ? bottom(3).value().data() : nullptr, probs_.data(), stream);
#endif
  } else {
    dispatch_cpu(q.dtype(), "MultiHeadAttention", [&](auto tag) {
      using T = typename decltype(tag)::type;
      cpu_softmax<T>(rows, to_, heads_, from_, scores_.data<T>(),
                     masked() ? bottom(3).value().data<T>() : nullptr, probs_.data<T>());
    });
  }
  ops::GemmOptions plain;
  plain.allow_tf32 = options_.allow_tf32;
  for (std::int64_t i = 0; i < heads_; ++i)
    ops::batched_gemm(probs_.select(1, i), head(v, i), head(o, i), plain, stream);
}

void MultiHeadAttentionLayer::do_backward(StreamHandle stream) {
  if (!top(0).requires_grad()) return;
  const Tensor& q = bottom(0).value();
  const Tensor& k = bottom(1).value();
  const Tensor& v = bottom(2).value();
  const Tensor& dout = top(0).grad();
  ops::GemmOptions o;
  o.allow_tf32 = options_.allow_tf32;
  for (std::int64_t i = 0; i < heads_; ++i) {
    // dP into the scores' buffer; dV = P^T dO.
    o.transpose_b = true;
    ops::batched_gemm(head(dout, i), head(v, i), scores_.select(1, i), o, stream);
    o.transpose_b = false;
    if (bottom(2).requires_grad()) {
      o.transpose_a = true;
      ops::batched_gemm(probs_.select(1, i), head(dout, i), head(bottom(2).grad(), i), o, stream);
      o.transpose_a = false;
    }
  }
  const std::int64_t rows = batch_ * heads_ * from_;
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::attention_softmax_backward(probs_.dtype(), rows, to_, probs_.data(),
                                     scores_.data<float>(), dscores_.data(), stream);
#endif
  } else {
    dispatch_cpu(q.dtype(), "MultiHeadAttention", [&](auto tag) {
      using T = typename decltype(tag)::type;
      cpu_softmax_backward<T>(rows, to_, probs_.data<T>(), scores_.data<T>(), dscores_.data<T>());
    });
  }
  o.alpha = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_width_)));
  for (std::int64_t i = 0; i < heads_; ++i) {
    const Tensor ds = dscores_.select(1, i);
    if (bottom(0).requires_grad()) {
      ops::batched_gemm(ds, head(k, i), head(bottom(0).grad(), i), o, stream);
    }
    if (bottom(1).requires_grad()) {
      o.transpose_a = true;
      ops::batched_gemm(ds, head(q, i), head(bottom(1).grad(), i), o, stream);
      o.transpose_a = false;
    }
  }
}

namespace factories {
LayerPtr multi_head_attention(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  const std::int64_t heads = json.integer_or("num_attention_heads", 1, IntRange::at_least(1));
  // HugeCTR writes it into its configurations but its layer always multiplies by K^T.
  (void)json.boolean_or("transpose_b", false);
  return std::make_unique<MultiHeadAttentionLayer>(spec, ctx, heads);
}
}  // namespace factories

}  // namespace ember::network
