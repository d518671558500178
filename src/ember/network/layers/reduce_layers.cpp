#include "ember/network/layers/reduce_layers.hpp"

#include <cmath>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"

namespace ember::network {

ReduceLayer::ReduceLayer(const LayerSpec& spec, BuildContext& ctx, int axis, bool mean)
    : Layer(spec, ctx), mean_(mean) {
  require_bottoms(1, 1);
  require_tops(1);
  require_supported_dtype(0, true);
  const Shape& in = bottom(0).shape();
  const int rank = in.size();
  if (axis < 0 || axis >= rank)
    fail("axis must be in [0, ", rank, ") for ", bottom(0).describe(), ", got ", axis);
  for (int d = 0; d < axis; ++d)
    outer_ *= in[d];
  axis_size_ = in[axis];
  for (int d = axis + 1; d < rank; ++d)
    inner_ *= in[d];
  if (axis_size_ == 0) fail("cannot reduce the empty axis ", axis, " of ", bottom(0).describe());
  Shape out = in;
  out[axis] = 1;
  add_top(0, out, bottom(0).dtype());
}

namespace {
template <class T>
void cpu_reduce(std::int64_t outer, std::int64_t axis, std::int64_t inner, T scale, const T* in,
                T* out) {
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      T s = 0;
      for (std::int64_t a = 0; a < axis; ++a)
        s += in[(o * axis + a) * inner + i];
      out[o * inner + i] = s * scale;
    }
  }
}
template <class T>
void cpu_reduce_backward(std::int64_t outer, std::int64_t axis, std::int64_t inner, T scale,
                         const T* dout, T* din) {
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t a = 0; a < axis; ++a) {
      for (std::int64_t i = 0; i < inner; ++i) {
        din[(o * axis + a) * inner + i] = dout[o * inner + i] * scale;
      }
    }
  }
}
}  // namespace

void ReduceLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  const double scale = mean_ ? 1.0 / static_cast<double>(axis_size_) : 1.0;
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::reduce_axis(x.dtype(), outer_, axis_size_, inner_, static_cast<float>(scale), x.data(),
                      y.data(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "ReduceSum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_reduce<T>(outer_, axis_size_, inner_, static_cast<T>(scale), x.data<T>(), y.data<T>());
  });
}

void ReduceLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const Tensor& dy = top(0).grad();
  const Tensor& dx = bottom(0).grad();
  const double scale = mean_ ? 1.0 / static_cast<double>(axis_size_) : 1.0;
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::reduce_axis_backward(dy.dtype(), outer_, axis_size_, inner_, static_cast<float>(scale),
                               dy.data(), dx.data(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(dy.dtype(), "ReduceSum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_reduce_backward<T>(outer_, axis_size_, inner_, static_cast<T>(scale), dy.data<T>(),
                           dx.data<T>());
  });
}

// ---- Softmax --------------------------------------------------------------------------------

SoftmaxLayer::SoftmaxLayer(const LayerSpec& spec, BuildContext& ctx) : Layer(spec, ctx) {
  require_bottoms(1, 1);
  require_tops(1);
  require_supported_dtype(0, true);
  const Shape& in = bottom(0).shape();
  if (in.size() < 1 || in.back() == 0)
    fail("bottom ", bottom(0).describe(), " has an empty last dimension");
  cols_ = in.back();
  rows_ = in.numel() / cols_;
  add_top(0, in, bottom(0).dtype());
}

namespace {
template <class T>
void cpu_softmax(std::int64_t rows, std::int64_t cols, const T* x, T* y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    T m = xr[0];
    for (std::int64_t c = 1; c < cols; ++c)
      m = std::max(m, xr[c]);
    T s = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - m);
      s += yr[c];
    }
    for (std::int64_t c = 0; c < cols; ++c)
      yr[c] /= s;
  }
}
template <class T>
void cpu_softmax_backward(std::int64_t rows, std::int64_t cols, const T* y, const T* dy, T* dx) {
  for (std::int64_t r = 0; r < rows; ++r) {
    T dot = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      dot += dy[r * cols + c] * y[r * cols + c];
    for (std::int64_t c = 0; c < cols; ++c) {
      dx[r * cols + c] = y[r * cols + c] * (dy[r * cols + c] - dot);
    }
  }
}
}  // namespace

void SoftmaxLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::softmax(x.dtype(), rows_, cols_, x.data(), y.data(), stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "Softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_softmax<T>(rows_, cols_, x.data<T>(), y.data<T>());
  });
}

void SoftmaxLayer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const Tensor& y = top(0).value();
  const Tensor& dy = top(0).grad();
  const Tensor& dx = bottom(0).grad();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::softmax_backward(y.dtype(), rows_, cols_, y.data(), dy.data(), dx.data(),
                           stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(y.dtype(), "Softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_softmax_backward<T>(rows_, cols_, y.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

namespace factories {
LayerPtr reduce_sum(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<ReduceLayer>(spec, ctx, static_cast<int>(json.integer("axis")), false);
}
LayerPtr reduce_mean(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<ReduceLayer>(spec, ctx, static_cast<int>(json.integer("axis")), true);
}
LayerPtr softmax(ConfigReader&, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<SoftmaxLayer>(spec, ctx);
}
}  // namespace factories

}  // namespace ember::network
