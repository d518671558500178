#include "ember/network/layers/interaction_layers.hpp"

#include <vector>

#include "ember/network/kernels/launchers.hpp"
#include "ember/network/layers/factories.hpp"

namespace ember::network {

InteractionLayer::InteractionLayer(const LayerSpec& spec, BuildContext& ctx) : Layer(spec, ctx) {
  require_bottoms(2, 2);
  require_tops(1);
  require_rank(0, 2, "[batch, width] (the bottom MLP's output)");
  require_rank(1, 3, "[batch, embeddings, width]");
  require_supported_dtype(0, true);
  const Shape& m = bottom(0).shape();
  const Shape& e = bottom(1).shape();
  if (m[0] != e[0])
    fail("batch sizes differ: ", bottom(0).describe(), " vs ", bottom(1).describe());
  if (m[1] != e[2]) {
    fail("the MLP output width must equal the embedding width: ", bottom(0).describe(), " vs ",
         bottom(1).describe());
  }
  if (bottom(0).dtype() != bottom(1).dtype()) {
    fail("bottoms must share a dtype: ", bottom(0).describe(), " vs ", bottom(1).describe());
  }
  batch_ = m[0];
  width_ = m[1];
  num_emb_ = e[1];
  add_top(0, {batch_, output_width(num_emb_, width_)}, bottom(0).dtype());
}

namespace {

// Where sample b's embedding i - 1 is read from: emb's own row, or where its gather code says.
template <class T>
struct EmbeddingRows {
  const T* emb;
  const RowGather& gather;
  const T* zeros;  // w zeros
  std::int64_t f, w;
  const T* operator()(std::int64_t b, std::int64_t i) const {
    if (!gather.defined()) return emb + (b * f + i - 1) * w;
    const std::int32_t code = gather.index[b * f + i - 1];
    if (code >= 0) return static_cast<const T*>(gather.table) + code * w;
    if (code == kGatherZeroRow) return zeros;
    return emb + gather_dense_row(code) * w;
  }
};

template <class T>
void cpu_interaction(std::int64_t batch, std::int64_t f, std::int64_t w, const T* mlp,
                     const EmbeddingRows<T>& emb, T* out) {
  const std::int64_t ow = InteractionLayer::output_width(f, w);
#pragma omp parallel for schedule(static) if (batch >= 64)
  for (std::int64_t b = 0; b < batch; ++b) {
    auto row = [&](std::int64_t i) { return i == 0 ? mlp + b * w : emb(b, i); };
    T* o = out + b * ow;
    for (std::int64_t c = 0; c < w; ++c)
      o[c] = mlp[b * w + c];
    for (std::int64_t i = 1; i <= f; ++i) {
      for (std::int64_t j = 0; j < i; ++j) {
        const T* a = row(i);
        const T* c = row(j);
        T dot = 0;
        for (std::int64_t k = 0; k < w; ++k)
          dot += a[k] * c[k];
        o[w + i * (i - 1) / 2 + j] = dot;
      }
    }
    o[ow - 1] = T(0);
  }
}

template <class T>
void cpu_interaction_backward(std::int64_t batch, std::int64_t f, std::int64_t w, const T* mlp,
                              const EmbeddingRows<T>& emb, const T* dout, T* dmlp, T* demb) {
  const std::int64_t ow = InteractionLayer::output_width(f, w);
#pragma omp parallel for schedule(static) if (batch >= 64)
  for (std::int64_t b = 0; b < batch; ++b) {
    auto row = [&](std::int64_t i) { return i == 0 ? mlp + b * w : emb(b, i); };
    const T* g = dout + b * ow + w;
    std::vector<T> acc(static_cast<std::size_t>((f + 1) * w), T(0));
    for (std::int64_t i = 1; i <= f; ++i) {
      for (std::int64_t j = 0; j < i; ++j) {
        const T gij = g[i * (i - 1) / 2 + j];
        const T* ri = row(i);
        const T* rj = row(j);
        for (std::int64_t k = 0; k < w; ++k) {
          acc[static_cast<std::size_t>(i * w + k)] += gij * rj[k];
          acc[static_cast<std::size_t>(j * w + k)] += gij * ri[k];
        }
      }
    }
    if (dmlp != nullptr) {
      for (std::int64_t k = 0; k < w; ++k) {
        dmlp[b * w + k] = dout[b * ow + k] + acc[static_cast<std::size_t>(k)];
      }
    }
    if (demb != nullptr) {
      for (std::int64_t i = 1; i <= f; ++i) {
        for (std::int64_t k = 0; k < w; ++k) {
          demb[(b * f + i - 1) * w + k] = acc[static_cast<std::size_t>(i * w + k)];
        }
      }
    }
  }
}

}  // namespace

bool InteractionLayer::can_gather() const {
  if (!on_cuda()) return true;
#if EMBER_WITH_CUDA
  return cuda::interaction_gathers(bottom(0).dtype(), num_emb_, width_);
#else
  return false;
#endif
}

void InteractionLayer::gather_embeddings(const RowGather& gather) {
  if (gather.defined() && !can_gather()) {
    fail("cannot read its embeddings through an index: ", bottom(0).describe(),
         " takes no kernel that does on this device (16-bit activations, width a multiple of 16 "
         "and at most 31 embeddings on tensor cores do)");
  }
  if (gather.defined() && gather.table == nullptr) fail("an embedding gather without a table");
  gather_ = gather;
}

void InteractionLayer::do_forward(bool, StreamHandle stream) {
  const Tensor& mlp = bottom(0).value();
  const Tensor& emb = bottom(1).value();
  const Tensor& out = top(0).value();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::interaction_forward(mlp.dtype(), batch_, num_emb_, width_, mlp.data(), emb.data(),
                              out.data(), options_.allow_tf32, stream_or_default(stream), gather_);
#endif
    return;
  }
  dispatch_cpu(mlp.dtype(), "Interaction", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<T> zeros(static_cast<std::size_t>(width_), T(0));
    const EmbeddingRows<T> rows{emb.data<T>(), gather_, zeros.data(), num_emb_, width_};
    cpu_interaction<T>(batch_, num_emb_, width_, mlp.data<T>(), rows, out.data<T>());
  });
}

void InteractionLayer::do_backward(StreamHandle stream) {
  const bool want_mlp = bottom(0).requires_grad(), want_emb = bottom(1).requires_grad();
  if (!want_mlp && !want_emb) return;
  const Tensor& mlp = bottom(0).value();
  const Tensor& emb = bottom(1).value();
  const Tensor& dout = top(0).grad();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::interaction_backward(mlp.dtype(), batch_, num_emb_, width_, mlp.data(), emb.data(),
                               dout.data(), want_mlp ? bottom(0).grad().data() : nullptr,
                               want_emb ? bottom(1).grad().data() : nullptr, options_.allow_tf32,
                               stream_or_default(stream), gather_);
#endif
    return;
  }
  dispatch_cpu(mlp.dtype(), "Interaction", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<T> zeros(static_cast<std::size_t>(width_), T(0));
    const EmbeddingRows<T> rows{emb.data<T>(), gather_, zeros.data(), num_emb_, width_};
    cpu_interaction_backward<T>(batch_, num_emb_, width_, mlp.data<T>(), rows, dout.data<T>(),
                                want_mlp ? bottom(0).grad().data<T>() : nullptr,
                                want_emb ? bottom(1).grad().data<T>() : nullptr);
  });
}

// ---- FmOrder2 -------------------------------------------------------------------------------

FmOrder2Layer::FmOrder2Layer(const LayerSpec& spec, BuildContext& ctx, std::int64_t out_dim)
    : Layer(spec, ctx) {
  require_bottoms(1, 1);
  require_tops(1);
  require_supported_dtype(0, true);
  const Shape& in = bottom(0).shape();
  if (out_dim <= 0) fail("out_dim must be positive, got ", out_dim);
  if (in.size() == 2) {
    if (in[1] % out_dim != 0) {
      fail("out_dim ", out_dim, " does not divide the width of ", bottom(0).describe());
    }
    slots_ = in[1] / out_dim;
  } else if (in.size() == 3) {
    if (in[2] != out_dim)
      fail("out_dim ", out_dim, " must equal the last dimension of ", bottom(0).describe());
    slots_ = in[1];
  } else {
    fail("bottom ", bottom(0).describe(),
         " must be [batch, slots * width] or [batch, slots, width]");
  }
  batch_ = in[0];
  width_ = out_dim;
  add_top(0, {batch_, width_}, bottom(0).dtype());
}

namespace {
template <class T>
void cpu_fm(std::int64_t batch, std::int64_t slots, std::int64_t w, const T* in, T* out) {
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t k = 0; k < w; ++k) {
      T s = 0, sq = 0;
      for (std::int64_t i = 0; i < slots; ++i) {
        const T v = in[(b * slots + i) * w + k];
        s += v;
        sq += v * v;
      }
      out[b * w + k] = T(0.5) * (s * s - sq);
    }
  }
}
template <class T>
void cpu_fm_backward(std::int64_t batch, std::int64_t slots, std::int64_t w, const T* in,
                     const T* dout, T* din) {
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t k = 0; k < w; ++k) {
      T s = 0;
      for (std::int64_t i = 0; i < slots; ++i)
        s += in[(b * slots + i) * w + k];
      for (std::int64_t i = 0; i < slots; ++i) {
        din[(b * slots + i) * w + k] = dout[b * w + k] * (s - in[(b * slots + i) * w + k]);
      }
    }
  }
}
}  // namespace

void FmOrder2Layer::do_forward(bool, StreamHandle stream) {
  const Tensor& x = bottom(0).value();
  const Tensor& y = top(0).value();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::fm_order2_forward(x.dtype(), batch_, slots_, width_, x.data(), y.data(),
                            stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "FmOrder2", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_fm<T>(batch_, slots_, width_, x.data<T>(), y.data<T>());
  });
}

void FmOrder2Layer::do_backward(StreamHandle stream) {
  if (!bottom(0).requires_grad()) return;
  const Tensor& x = bottom(0).value();
  const Tensor& dy = top(0).grad();
  const Tensor& dx = bottom(0).grad();
  if (on_cuda()) {
#if EMBER_WITH_CUDA
    cuda::fm_order2_backward(x.dtype(), batch_, slots_, width_, x.data(), dy.data(), dx.data(),
                             stream_or_default(stream));
#endif
    return;
  }
  dispatch_cpu(x.dtype(), "FmOrder2", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_fm_backward<T>(batch_, slots_, width_, x.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

namespace factories {
LayerPtr interaction(ConfigReader&, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<InteractionLayer>(spec, ctx);
}
LayerPtr fm_order2(ConfigReader& json, const LayerSpec& spec, BuildContext& ctx) {
  return std::make_unique<FmOrder2Layer>(spec, ctx, json.integer("out_dim"));
}
}  // namespace factories

}  // namespace ember::network
