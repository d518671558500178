#include "ember/network/layers/shape_layers.hpp"

#include <algorithm>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/copy_util.hpp"
#include "ember/network/layers/factories.hpp"

namespace ember::network {

using detail::element;

// ---- Concat ---------------------------------------------------------------------------------

ConcatLayer::ConcatLayer(const LayerSpec& spec, BuildContext& ctx, int axis) : Layer(spec, ctx) {
  require_bottoms(1, 1u << 20);
  require_tops(1);
  const Shape& first = bottom(0).shape();
  const int rank = first.size();
  if (rank < 2) fail("bottoms must be at least 2-D, got ", bottom(0).describe());
  if (axis < 1 || axis >= rank)
    fail("axis must be in [1, ", rank - 1, "] for ", rank, "-D bottoms, got ", axis);
  require_supported_dtype(0, true);
  for (std::size_t i = 0; i < bottoms().size(); ++i) {
    const Shape& s = bottom(i).shape();
    if (bottom(i).dtype() != bottom(0).dtype()) {
      fail("bottoms must share one dtype: ", bottom(0).describe(), " vs ", bottom(i).describe());
    }
    if (s.size() != rank)
      fail("bottoms must have the same rank: ", bottom(0).describe(), " vs ", bottom(i).describe());
    for (int d = 0; d < rank; ++d) {
      if (d != axis && s[d] != first[d]) {
        fail("bottoms must agree in every dimension but ", axis, ": ", bottom(0).describe(), " vs ",
             bottom(i).describe());
      }
    }
    mids_.push_back(s[axis]);
    offsets_.push_back(total_);
    total_ += s[axis];
  }
  for (int d = 0; d < axis; ++d)
    outer_ *= first[d];
  for (int d = axis + 1; d < rank; ++d)
    inner_ *= first[d];
  Shape out = first;
  out[axis] = total_;
  add_top(0, out, bottom(0).dtype());
}

// Rows are the dimensions before the axis, columns the axis and those after it: each bottom is
// a piece of the top's columns.
void ConcatLayer::do_forward(bool, StreamHandle stream) {
  std::vector<detail::ColumnPiece> pieces;
  for (std::size_t i = 0; i < bottoms().size(); ++i)
    pieces.push_back({bottom(i).value().data(), offsets_[i] * inner_, mids_[i] * inner_});
  detail::join_columns(on_cuda(), top(0).dtype(), outer_, total_ * inner_, pieces,
                       top(0).value().data(), false, stream_or_default(stream));
}

void ConcatLayer::do_backward(StreamHandle stream) {
  std::vector<detail::ColumnPiece> pieces;
  for (std::size_t i = 0; i < bottoms().size(); ++i) {
    if (bottom(i).requires_grad())
      pieces.push_back({bottom(i).grad().data(), offsets_[i] * inner_, mids_[i] * inner_});
  }
  detail::split_columns(on_cuda(), top(0).dtype(), outer_, total_ * inner_, top(0).grad().data(),
                        pieces, stream_or_default(stream));
}

// ---- Reshape --------------------------------------------------------------------------------

ReshapeLayer::ReshapeLayer(const LayerSpec& spec, BuildContext& ctx, std::int64_t leading_dim,
                           std::int64_t time_step)
    : Layer(spec, ctx) {
  require_bottoms(1, 1);
  require_tops(1);
  require_supported_dtype(0, true);
  const Shape& in = bottom(0).shape();
  if (in.size() < 1 || in[0] == 0) fail("bottom ", bottom(0).describe(), " has no batch");
  const std::int64_t numel = in.numel();
  if (leading_dim == 0) leading_dim = numel / in[0];
  if (leading_dim <= 0 || numel % leading_dim != 0) {
    fail("leading_dim ", leading_dim, " does not divide the ", numel, " elements of ",
         bottom(0).describe());
  }
  Shape out;
  if (time_step == 0) {
    out = Shape{numel / leading_dim, leading_dim};
  } else {
    if (time_step < 0 || (numel / leading_dim) % time_step != 0) {
      fail("time_step ", time_step, " does not divide the ", numel / leading_dim, " rows of width ",
           leading_dim, " of ", bottom(0).describe());
    }
    out = Shape{numel / leading_dim / time_step, time_step, leading_dim};
  }
  add_view_top(0, out, bottoms()[0]);
}

ReshapeLayer::ReshapeLayer(const LayerSpec& spec, BuildContext& ctx,
                           std::vector<std::int64_t> selected)
    : Layer(spec, ctx), selected_(std::move(selected)) {
  require_bottoms(1, 1);
  require_tops(1);
  require_rank(0, 3, "[batch, slots, width] when \"selected\" is given");
  require_supported_dtype(0, true);
  const Shape& in = bottom(0).shape();
  batch_ = in[0];
  slots_ = in[1];
  width_ = in[2];
  if (selected_.empty()) fail("\"selected\" must name at least one slot");
  for (std::int64_t s : selected_) {
    if (s < 0 || s >= slots_)
      fail("selected slot ", s, " is outside [0, ", slots_, ") of ", bottom(0).describe());
  }
  add_top(0, {batch_, static_cast<std::int64_t>(selected_.size()) * width_}, bottom(0).dtype());
}

void ReshapeLayer::do_forward(bool, StreamHandle stream) {
  if (is_view()) return;  // the top is a view of the bottom
  const DType t = top(0).dtype();
  const auto n = static_cast<std::int64_t>(selected_.size());
  for (std::int64_t k = 0; k < n; ++k) {
    detail::copy_3d(
        on_cuda(), t, batch_, 1, width_,
        element(bottom(0).value().data(), t, selected_[static_cast<std::size_t>(k)] * width_),
        slots_ * width_, 0, element(top(0).value().data(), t, k * width_), n * width_, 0, false,
        stream_or_default(stream));
  }
}

void ReshapeLayer::do_backward(StreamHandle stream) {
  if (is_view() || !bottom(0).requires_grad()) return;
  const DType t = top(0).dtype();
  void* din = bottom(0).grad().data();
  detail::fill_zero(on_cuda(), t, bottom(0).shape().numel(), din, stream_or_default(stream));
  const auto n = static_cast<std::int64_t>(selected_.size());
  for (std::int64_t k = 0; k < n; ++k) {
    // Accumulate: a slot may be selected more than once.
    detail::copy_3d(on_cuda(), t, batch_, 1, width_, element(top(0).grad().data(), t, k * width_),
                    n * width_, 0, element(din, t, selected_[static_cast<std::size_t>(k)] * width_),
                    slots_ * width_, 0, true, stream_or_default(stream));
  }
}

// ---- Slice ----------------------------------------------------------------------------------

SliceLayer::SliceLayer(const LayerSpec& spec, BuildContext& ctx,
                       std::vector<std::pair<std::int64_t, std::int64_t>> ranges)
    : Layer(spec, ctx), ranges_(std::move(ranges)) {
  require_bottoms(1, 1);
  require_rank(0, 2, "[batch, features]");
  require_supported_dtype(0, true);
  if (ranges_.empty()) fail("\"ranges\" must hold at least one [begin, end] pair");
  require_tops(ranges_.size());
  rows_ = bottom(0).shape()[0];
  cols_ = bottom(0).shape()[1];
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    const auto [a, b] = ranges_[i];
    if (a < 0 || b > cols_ || a >= b) {
      fail("range ", i, " [", a, ", ", b, ") is not a non-empty part of [0, ", cols_, ") (bottom ",
           bottom(0).describe(), ")");
    }
    // A range over the whole width (HugeCTR's way to hand one tensor to two layers: DCN, DeepFM)
    // is the bottom's value itself, with a gradient of its own.
    if (a == 0 && b == cols_) {
      add_value_view_top(i, bottoms()[0]);
    } else {
      add_top(i, {rows_, b - a}, bottom(0).dtype());
    }
  }
}

void SliceLayer::do_forward(bool, StreamHandle stream) {
  std::vector<detail::ColumnPiece> pieces;
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    const auto [a, b] = ranges_[i];
    if (a == 0 && b == cols_) continue;  // a view of the bottom's value
    pieces.push_back({top(i).value().data(), a, b - a});
  }
  detail::split_columns(on_cuda(), bottom(0).dtype(), rows_, cols_, bottom(0).value().data(),
                        pieces, stream_or_default(stream));
}

// One pass over the bottom's gradient: each element the sum of the tops' gradients that cover
// its column (DCN's and DeepFM's two whole-width tops add up; DeepFM's 10 + 1 split of 11-wide
// rows is put back together), zero where no top does.
void SliceLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  std::vector<detail::ColumnPiece> pieces;
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    const auto [a, b] = ranges_[i];
    if (top(i).requires_grad()) pieces.push_back({top(i).grad().data(), a, b - a});
  }
  detail::join_columns(on_cuda(), bottom(0).dtype(), rows_, cols_, pieces, bottom(0).grad().data(),
                       false, stream_or_default(stream));
}

// ---- Gather ---------------------------------------------------------------------------------

GatherLayer::GatherLayer(const LayerSpec& spec, BuildContext& ctx,
                         std::vector<std::int64_t> indices)
    : Layer(spec, ctx), indices_(std::move(indices)) {
  require_bottoms(1, 1);
  require_tops(1);
  require_rank(0, 2, "[rows, features]");
  require_supported_dtype(0, true);
  rows_ = bottom(0).shape()[0];
  row_len_ = bottom(0).shape()[1];
  if (indices_.empty()) fail("\"indices\" must not be empty");
  for (std::int64_t i : indices_) {
    if (i < 0 || i >= rows_)
      fail("index ", i, " is outside [0, ", rows_, ") of ", bottom(0).describe());
  }
  // Inverse map (CSR by source row) so the backward sums duplicates without atomics.
  offsets_.assign(static_cast<std::size_t>(rows_ + 1), 0);
  for (std::int64_t i : indices_)
    ++offsets_[static_cast<std::size_t>(i + 1)];
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows_); ++r)
    offsets_[r + 1] += offsets_[r];
  inverse_.resize(indices_.size());
  std::vector<std::int64_t> fill(offsets_.begin(), offsets_.end() - 1);
  for (std::size_t j = 0; j < indices_.size(); ++j) {
    inverse_[static_cast<std::size_t>(fill[static_cast<std::size_t>(indices_[j])]++)] =
        static_cast<std::int64_t>(j);
  }
  add_top(0, {static_cast<std::int64_t>(indices_.size()), row_len_}, bottom(0).dtype());
  if (on_cuda()) {
    indices_slot_ = add_workspace({static_cast<std::int64_t>(indices_.size())}, DType::I64);
    offsets_slot_ = add_workspace({rows_ + 1}, DType::I64);
    inverse_slot_ = add_workspace({static_cast<std::int64_t>(inverse_.size())}, DType::I64);
  }
}

void GatherLayer::bind() {
  Layer::bind();
  if (!on_cuda()) return;
  d_indices_ = indices_slot_.tensor();
  d_offsets_ = offsets_slot_.tensor();
  d_inverse_ = inverse_slot_.tensor();
  d_indices_.copy_from(Tensor::from_vector(indices_));
  d_offsets_.copy_from(Tensor::from_vector(offsets_));
  d_inverse_.copy_from(Tensor::from_vector(inverse_));
}

void GatherLayer::do_forward(bool, StreamHandle stream) {
  const DType t = bottom(0).dtype();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::gather_rows(t, static_cast<std::int64_t>(indices_.size()), row_len_,
                      d_indices_.data<std::int64_t>(), bottom(0).value().data(),
                      top(0).value().data(), stream_or_default(stream));
#endif
    return;
  }
  for (std::size_t j = 0; j < indices_.size(); ++j) {
    detail::copy_3d(false, t, 1, 1, row_len_,
                    element(bottom(0).value().data(), t, indices_[j] * row_len_), 0, 0,
                    element(top(0).value().data(), t, static_cast<std::int64_t>(j) * row_len_), 0,
                    0, false, nullptr);
  }
}

void GatherLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const DType t = bottom(0).dtype();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::gather_rows_backward(t, rows_, row_len_, d_offsets_.data<std::int64_t>(),
                               d_inverse_.data<std::int64_t>(), top(0).grad().data(),
                               bottom(0).grad().data(), stream_or_default(stream));
#endif
    return;
  }
  void* din = bottom(0).grad().data();
  detail::fill_zero(false, t, rows_ * row_len_, din, nullptr);
  for (std::size_t j = 0; j < indices_.size(); ++j) {
    detail::copy_3d(false, t, 1, 1, row_len_,
                    element(top(0).grad().data(), t, static_cast<std::int64_t>(j) * row_len_), 0, 0,
                    element(din, t, indices_[j] * row_len_), 0, 0, true, nullptr);
  }
}

// ---- FusedReshapeConcat -----------------------------------------------------------------------

FusedReshapeConcatLayer::FusedReshapeConcatLayer(const LayerSpec& spec, BuildContext& ctx)
    : Layer(spec, ctx) {
  require_bottoms(1, 1u << 20);
  require_tops(2);
  for (std::size_t i = 0; i < bottoms().size(); ++i) {
    require_rank(i, 3, "[batch, slots, width]");
    require_supported_dtype(i, true);
    const Shape& s = bottom(i).shape();
    if (i == 0) {
      batch_ = s[0];
      slots_ = s[1];
    } else if (s[0] != batch_ || s[1] != slots_ || bottom(i).dtype() != bottom(0).dtype()) {
      fail("bottoms must share batch, slots and dtype: ", bottom(0).describe(), " vs ",
           bottom(i).describe());
    }
    widths_.push_back(s[2]);
    offsets_.push_back(total_);
    total_ += s[2];
  }
  if (slots_ < 2) fail("needs at least 2 slots (items and the ad), got ", slots_);
  add_top(0, {batch_ * (slots_ - 1), total_}, bottom(0).dtype());
  add_top(1, {batch_, total_}, bottom(0).dtype());
}

void FusedReshapeConcatLayer::move(bool forward, StreamHandle stream) {
  const DType t = bottom(0).dtype();
  const bool cuda = on_cuda();
  for (std::size_t i = 0; i < bottoms().size(); ++i) {
    if (!forward && !bottom(i).requires_grad()) continue;
    const std::int64_t w = widths_[i];
    void* in = forward ? bottom(i).value().data() : bottom(i).grad().data();
    void* item = forward ? top(0).value().data() : top(0).grad().data();
    void* ad = forward ? top(1).value().data() : top(1).grad().data();
    void* item_at = element(item, t, offsets_[i]);
    void* ad_at = element(ad, t, offsets_[i]);
    void* in_ad = element(in, t, (slots_ - 1) * w);
    // Items: slots 0..s-2 of sample b -> rows b (s-1) .. of `item`.
    if (forward) {
      detail::copy_3d(cuda, t, batch_, slots_ - 1, w, in, slots_ * w, w, item_at,
                      (slots_ - 1) * total_, total_, false, stream);
      detail::copy_3d(cuda, t, batch_, 1, w, in_ad, slots_ * w, 0, ad_at, total_, 0, false, stream);
    } else {
      detail::copy_3d(cuda, t, batch_, slots_ - 1, w, item_at, (slots_ - 1) * total_, total_, in,
                      slots_ * w, w, false, stream);
      detail::copy_3d(cuda, t, batch_, 1, w, ad_at, total_, 0, in_ad, slots_ * w, 0, false, stream);
    }
  }
}

void FusedReshapeConcatLayer::do_forward(bool, StreamHandle stream) {
  move(true, stream_or_default(stream));
}
void FusedReshapeConcatLayer::do_backward(StreamHandle stream) {
  move(false, stream_or_default(stream));
}

// ---- FusedReshapeConcatGeneral -----------------------------------------------------------------

FusedReshapeConcatGeneralLayer::FusedReshapeConcatGeneralLayer(const LayerSpec& spec,
                                                               BuildContext& ctx)
    : Layer(spec, ctx) {
  require_bottoms(1, 1u << 20);
  require_tops(1);
  for (std::size_t i = 0; i < bottoms().size(); ++i) {
    require_rank(i, 3, "[batch, slots, width]");
    require_supported_dtype(i, true);
    const Shape& s = bottom(i).shape();
    const Shape& first = bottom(0).shape();
    if (s[0] != first[0] || s[1] != first[1] || bottom(i).dtype() != bottom(0).dtype()) {
      fail("bottoms must share batch, slots and dtype: ", bottom(0).describe(), " vs ",
           bottom(i).describe());
    }
    widths_.push_back(s[2]);
    offsets_.push_back(total_);
    total_ += s[2];
  }
  rows_ = bottom(0).shape()[0] * bottom(0).shape()[1];
  add_top(0, {rows_, total_}, bottom(0).dtype());
}

void FusedReshapeConcatGeneralLayer::do_forward(bool, StreamHandle stream) {
  const DType t = top(0).dtype();
  for (std::size_t i = 0; i < bottoms().size(); ++i) {
    detail::copy_3d(on_cuda(), t, 1, rows_, widths_[i], bottom(i).value().data(), 0, widths_[i],
                    element(top(0).value().data(), t, offsets_[i]), 0, total_, false,
                    stream_or_default(stream));
  }
}

void FusedReshapeConcatGeneralLayer::do_backward(StreamHandle stream) {
  const DType t = top(0).dtype();
  for (std::size_t i = 0; i < bottoms().size(); ++i) {
    if (!bottom(i).requires_grad()) continue;
    detail::copy_3d(on_cuda(), t, 1, rows_, widths_[i],
                    element(top(0).grad().data(), t, offsets_[i]), 0, total_,
                    bottom(i).grad().data(), 0, widths_[i], false, stream_or_default(stream));
  }
}

// ---- Scale ----------------------------------------------------------------------------------

namespace {
template <class T>
void cpu_repeat(std::int64_t rows, std::int64_t cols, int axis, std::int64_t f, const T* x, T* y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      for (std::int64_t k = 0; k < f; ++k) {
        const std::int64_t at = axis == 0 ? (r * cols + c) * f + k : (r * f + k) * cols + c;
        y[at] = x[r * cols + c];
      }
    }
  }
}
template <class T>
void cpu_repeat_backward(std::int64_t rows, std::int64_t cols, int axis, std::int64_t f,
                         const T* dy, T* dx) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      T s = 0;
      for (std::int64_t k = 0; k < f; ++k) {
        s += dy[axis == 0 ? (r * cols + c) * f + k : (r * f + k) * cols + c];
      }
      dx[r * cols + c] = s;
    }
  }
}
}  // namespace

ScaleLayer::ScaleLayer(const LayerSpec& spec, BuildContext& ctx, int axis, std::int64_t factor)
    : Layer(spec, ctx), axis_(axis), factor_(factor) {
  require_bottoms(1, 1);
  require_tops(1);
  require_rank(0, 2, "[batch, features]");
  require_supported_dtype(0, true);
  if (axis != 0 && axis != 1) fail("scale_param.axis must be 0 or 1, got ", axis);
  if (factor < 1) fail("scale_param.factor must be a positive integer, got ", factor);
  rows_ = bottom(0).shape()[0];
  cols_ = bottom(0).shape()[1];
  add_top(0, axis == 0 ? Shape{rows_, cols_ * factor} : Shape{rows_ * factor, cols_},
          bottom(0).dtype());
}

void ScaleLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::repeat_forward(x.dtype(), rows_, cols_, axis_, static_cast<int>(factor_), x.data(),
                         y.data(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "Scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_repeat<T>(rows_, cols_, axis_, factor_, x.data<T>(), y.data<T>());
  });
}

void ScaleLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const Tensor& dy = top(0).grad();
  const Tensor& dx = bottom(0).grad();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::repeat_backward(dy.dtype(), rows_, cols_, axis_, static_cast<int>(factor_), dy.data(),
                          dx.data(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(dy.dtype(), "Scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_repeat_backward<T>(rows_, cols_, axis_, factor_, dy.data<T>(), dx.data<T>());
  });
}

// ---- configuration ----------------------------------------------------------------------------

namespace factories {

LayerPtr concat(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  const auto axis = json.integer_or("axis", 1);
  return std::make_unique<ConcatLayer>(spec, ctx, static_cast<int>(axis));
}

LayerPtr reshape(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  if (json.has("selected")) {
    if (json.has("leading_dim") || json.has("time_step")) {
      json.fail("selected", "cannot be combined with leading_dim or time_step");
    }
    return std::make_unique<ReshapeLayer>(spec, ctx, json.integers("selected"));
  }
  const std::int64_t leading = json.integer_or("leading_dim", 0, IntRange::at_least(0));
  const std::int64_t time_step = json.integer_or("time_step", 0, IntRange::at_least(0));
  return std::make_unique<ReshapeLayer>(spec, ctx, leading, time_step);
}

LayerPtr slice(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<SliceLayer>(spec, ctx, json.integer_pairs("ranges"));
}

LayerPtr gather(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<GatherLayer>(spec, ctx, json.integers("indices"));
}

LayerPtr fused_reshape_concat(ConfigReader&, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<FusedReshapeConcatLayer>(spec, ctx);
}

LayerPtr fused_reshape_concat_general(ConfigReader&, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<FusedReshapeConcatGeneralLayer>(spec, ctx);
}

LayerPtr scale(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  ConfigReader p = json.object("scale_param");
  const std::int64_t axis = p.integer("axis", IntRange::between(0, 1));
  const std::int64_t factor = p.integer("factor");
  p.finish();
  return std::make_unique<ScaleLayer>(spec, ctx, static_cast<int>(axis), factor);
}

}  // namespace factories

}  // namespace ember::network
