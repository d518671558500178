// Layers that move elements without arithmetic (beyond summing gradients that meet):
//   Concat               along `axis` (default 1) of same-rank bottoms
//   Reshape              a view (leading_dim / time_step), or "selected" slots of [b, slots, w]
//   Slice                column ranges [a, b) of a [batch, n] bottom, one top each (ranges may
//                        overlap: that is how configurations duplicate a tensor)
//   Gather               rows `indices` of a 2-D bottom
//   FusedReshapeConcat   [b, s, w_i] bottoms -> concatenated rows split into "item" rows
//                        [b (s-1), W] (slots 0..s-2) and "ad" rows [b, W] (slot s-1)
//   FusedReshapeConcatGeneral  [b, s, w_i] bottoms -> their rows concatenated, [b s, W]
//   Scale                repeats elements (axis 0: [b, n] -> [b, n f]) or rows (axis 1:
//                        [b, n] -> [b f, n]); backward sums the copies (HugeCTR's keeps only the
//                        first copy's gradient, which is not the derivative)
#pragma once

#include <utility>
#include <vector>

#include "ember/network/layer.hpp"

namespace ember::network {

class ConcatLayer : public Layer {
 public:
  ConcatLayer(const LayerSpec& spec, BuildContext& ctx, int axis);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  std::int64_t outer_ = 1, inner_ = 1, total_ = 0;
  std::vector<std::int64_t> mids_, offsets_;
};

class ReshapeLayer : public Layer {
 public:
  // View mode: `leading_dim` 0 means numel / batch; `time_step` 0 means a 2-D top.
  ReshapeLayer(const LayerSpec& spec, BuildContext& ctx, std::int64_t leading_dim,
               std::int64_t time_step);
  // Selected-slots mode.
  ReshapeLayer(const LayerSpec& spec, BuildContext& ctx, std::vector<std::int64_t> selected);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;
  bool is_view() const { return selected_.empty(); }

 private:
  std::vector<std::int64_t> selected_;
  std::int64_t batch_ = 0, slots_ = 0, width_ = 0;
};

class SliceLayer : public Layer {
 public:
  SliceLayer(const LayerSpec& spec, BuildContext& ctx,
             std::vector<std::pair<std::int64_t, std::int64_t>> ranges);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges_;
  std::int64_t rows_ = 0, cols_ = 0;
};

class GatherLayer : public Layer {
 public:
  GatherLayer(const LayerSpec& spec, BuildContext& ctx, std::vector<std::int64_t> indices);
  void bind() override;
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  std::vector<std::int64_t> indices_, offsets_, inverse_;
  std::int64_t rows_ = 0, row_len_ = 0;
  TensorSlot indices_slot_, offsets_slot_, inverse_slot_;
  Tensor d_indices_, d_offsets_, d_inverse_;
};

class FusedReshapeConcatLayer : public Layer {
 public:
  FusedReshapeConcatLayer(const LayerSpec& spec, BuildContext& ctx);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  void move(bool forward, StreamHandle stream);
  std::int64_t batch_ = 0, slots_ = 0, total_ = 0;
  std::vector<std::int64_t> widths_, offsets_;
};

class FusedReshapeConcatGeneralLayer : public Layer {
 public:
  FusedReshapeConcatGeneralLayer(const LayerSpec& spec, BuildContext& ctx);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  std::int64_t rows_ = 0, total_ = 0;
  std::vector<std::int64_t> widths_, offsets_;
};

class ScaleLayer : public Layer {
 public:
  ScaleLayer(const LayerSpec& spec, BuildContext& ctx, int axis, std::int64_t factor);
  void do_forward(bool training, StreamHandle stream) override;
  void do_backward(StreamHandle stream) override;

 private:
  int axis_;
  std::int64_t factor_, rows_ = 0, cols_ = 0;
};

}  // namespace ember::network
