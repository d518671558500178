#include "ember/tensor/ops.hpp"

#include "ember/core/stream.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops {

namespace {

// All operands on out's place; names the op and both places otherwise.
[[maybe_unused]] void check_same_place(const char* op, const Tensor& out, const Tensor& in) {
  EMBER_CHECK(out.place() == in.place(), op, ": operands are on different places (",
              out.place(), " and ", in.place(), "); move one with to()");
}

// `in` expanded to out's shape; an error showing both shapes when it does not broadcast.
Tensor broadcast_to(const char* op, const Tensor& in, const Tensor& out) {
  if (in.shape() == out.shape()) return in;
  const Shape b = broadcast_shapes(in.shape(), out.shape());
  EMBER_CHECK(b == out.shape(), op, ": input shape ", in.shape(),
              " does not broadcast to output shape ", out.shape());
  return in.expand(out.shape());
}

StreamHandle resolve_stream(const Tensor& out, StreamHandle stream) {
  return stream != nullptr ? stream : current_stream(out.place().device());
}

}  // namespace

void fill(const Tensor& out, double value, StreamHandle stream) {
  EMBER_CHECK(out.defined(), "fill: undefined tensor");
  if (out.numel() == 0) return;
  if (out.place().is_cuda()) {
#if EMBER_WITH_CUDA
    detail::fill_cuda(out, value, resolve_stream(out, stream));
#else
    throw_cuda_unavailable("ops::fill");
#endif
    return;
  }
  detail::fill_cpu(out, value);
}

void copy(const Tensor& out, const Tensor& in, StreamHandle stream) {
  EMBER_CHECK(out.defined() && in.defined(), "copy: undefined tensor");
  if (out.place() != in.place()) {
    // Across places: move the bytes in the input's dtype, then convert at the destination.
    if (out.dtype() == in.dtype()) {
      out.copy_from(in, stream);
    } else {
      copy(out, broadcast_to("copy", in, out).to(out.place(), stream), stream);
    }
    return;
  }
  const Tensor src = broadcast_to("copy", in, out);
  if (out.numel() == 0) return;
  if (out.place().is_cuda()) {
#if EMBER_WITH_CUDA
    detail::copy_cuda(out, src, resolve_stream(out, stream));
#else
    throw_cuda_unavailable("ops::copy");
#endif
    return;
  }
  detail::copy_cpu(out, src);
}

Tensor cast(const Tensor& in, DType dtype, StreamHandle stream) {
  Tensor out = Tensor::empty(in.shape(), dtype, in.place());
  copy(out, in, stream);
  return out;
}

}  // namespace ember::ops
