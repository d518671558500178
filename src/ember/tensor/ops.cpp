#include "ember/tensor/ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/core/stream.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops {

const char* op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
      return "neg";
    case UnaryOp::Abs:
      return "abs";
    case UnaryOp::Exp:
      return "exp";
    case UnaryOp::Log:
      return "log";
    case UnaryOp::Sqrt:
      return "sqrt";
    case UnaryOp::Rsqrt:
      return "rsqrt";
    case UnaryOp::Tanh:
      return "tanh";
    case UnaryOp::Sigmoid:
      return "sigmoid";
    case UnaryOp::Relu:
      return "relu";
    case UnaryOp::Square:
      return "square";
    case UnaryOp::Reciprocal:
      return "reciprocal";
    case UnaryOp::Sign:
      return "sign";
  }
  return "?";
}

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "add";
    case BinaryOp::Sub:
      return "sub";
    case BinaryOp::Mul:
      return "mul";
    case BinaryOp::Div:
      return "div";
    case BinaryOp::Max:
      return "max";
    case BinaryOp::Min:
      return "min";
    case BinaryOp::Eq:
      return "eq";
    case BinaryOp::Ne:
      return "ne";
    case BinaryOp::Lt:
      return "lt";
    case BinaryOp::Le:
      return "le";
    case BinaryOp::Gt:
      return "gt";
    case BinaryOp::Ge:
      return "ge";
  }
  return "?";
}

namespace {

// "binary(add)", for messages.
std::string describe(const char* family, const char* op) {
  return std::string(family) + "(" + op + ")";
}

void check_defined(const std::string& op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    EMBER_CHECK(t->defined(), op, ": undefined tensor");
}

// All operands on out's place; names the op and both places otherwise.
void check_same_place(const std::string& op, const Tensor& out, const Tensor& in) {
  EMBER_CHECK(out.place() == in.place(), op, ": operands are on different places (", out.place(),
              " and ", in.place(), "); move one with to()");
}

// No implicit promotion: `in` must have out's dtype.
void check_same_dtype(const std::string& op, const char* out_name, const Tensor& out,
                      const char* in_name, const Tensor& in) {
  EMBER_CHECK(out.dtype() == in.dtype(), op, ": ", in_name, " is ", dtype_name(in.dtype()), " but ",
              out_name, " is ", dtype_name(out.dtype()),
              " (no implicit promotion; convert one with ops::cast)");
}

void check_arithmetic_dtype(const std::string& op, const Tensor& t) {
  EMBER_CHECK(t.dtype() != DType::Bool, op,
              " does not take bool tensors (cast to a numeric dtype)");
}

// `in` expanded to out's shape; an error showing both shapes when it does not broadcast.
Tensor broadcast_to(const std::string& op, const Tensor& in, const Tensor& out) {
  if (in.shape() == out.shape()) return in;
  bool ok = in.rank() <= out.rank();
  for (int d = 0; ok && d < in.rank(); ++d) {
    const std::int64_t have = in.shape()[d], want = out.shape()[out.rank() - in.rank() + d];
    ok = have == want || have == 1;
  }
  EMBER_CHECK(ok, op, ": input shape ", in.shape(), " does not broadcast to output shape ",
              out.shape());
  return in.expand(out.shape());
}

// The elements a view covers, as a half-open range of element offsets in its allocation.
struct Extent {
  std::int64_t begin, end;
};
Extent extent_of(const Tensor& t) {
  std::int64_t last = t.offset();
  for (int d = 0; d < t.rank(); ++d)
    last += (t.shape()[d] - 1) * t.strides()[d];
  return {t.offset(), last + 1};
}

// `out` may be the very view `in` is (in place), but must not otherwise share elements with it:
// a kernel would read elements it has already overwritten. Detected exactly for dense views (the
// usual mistake, such as x[1:] = f(x[:-1])); interleaved strided views are the caller's to keep
// apart, as documented in ops.hpp.
void check_no_partial_overlap(const std::string& op, const Tensor& out, const Tensor& in) {
  if (out.allocation() != in.allocation() || out.numel() == 0 || in.numel() == 0) return;
  if (in.dtype() == out.dtype() && in.offset() == out.offset() && in.strides() == out.strides()) {
    return;  // the same view: element i is read and written by the same step
  }
  const std::int64_t in_size = static_cast<std::int64_t>(in.element_size());
  const std::int64_t out_size = static_cast<std::int64_t>(out.element_size());
  const Extent a = extent_of(out), b = extent_of(in);
  const bool disjoint =
      a.end * out_size <= b.begin * in_size || b.end * in_size <= a.begin * out_size;
  if (disjoint) return;
  EMBER_CHECK(!(covers_extent_once(out.shape(), out.strides()) &&
                covers_extent_once(in.shape(), in.strides())),
              op, ": the output overlaps an input without being the same view (output shape ",
              out.shape(), " strides ", out.strides(), " offset ", out.offset(), "; input strides ",
              in.strides(), " offset ", in.offset(), "); write to a separate tensor");
}

StreamHandle resolve_stream(const Tensor& out, StreamHandle stream) {
  return stream != nullptr ? stream : current_stream(out.place().device());
}

// A temporary at `place` used by work on `stream`.
Tensor scratch(const Shape& shape, DType dtype, Place place, StreamHandle stream) {
  Tensor t = Tensor::empty(shape, dtype, place);
  if (place.is_cuda() && stream != nullptr && stream != current_stream(place.device())) {
    t.allocation()->record_stream(stream);
  }
  return t;
}

// Runs `cpu()` or `cuda(stream)` by out's place.
template <class Cpu, class Cuda>
void on_place(const std::string& op, const Tensor& out, StreamHandle stream, Cpu&& cpu,
              Cuda&& cuda) {
  if (out.place().is_cuda()) {
#if EMBER_WITH_CUDA
    cuda(resolve_stream(out, stream));
#else
    (void)cuda;
    (void)stream;
    throw_cuda_unavailable(op.c_str());
#endif
    return;
  }
  cpu();
}

// `value` as an operand of a `dtype` op: for integer dtypes it must be a whole number within the
// dtype's range (a silent truncation of 0.5 to 0 would be a wrong answer, not an error).
void check_scalar_fits(const std::string& op, const char* what, double value, DType dtype) {
  if (is_floating(dtype)) return;
  if (dtype == DType::Bool) {
    EMBER_CHECK(value == 0.0 || value == 1.0, op, ": ", what, " ", value,
                " is not a bool (0 or 1)");
    return;
  }
  const int bits = static_cast<int>(dtype_size(dtype)) * 8;
  const double lo = is_signed(dtype) ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi = is_signed(dtype) ? std::ldexp(1.0, bits - 1) : std::ldexp(1.0, bits);
  EMBER_CHECK(std::isfinite(value) && value == std::trunc(value) && value >= lo && value < hi, op,
              ": ", what, " ", value, " is not a whole number within the range of ",
              dtype_name(dtype));
}

}  // namespace

// ---- fill / copy ------------------------------------------------------------------------------

void fill(const Tensor& out, double value, StreamHandle stream) {
  check_defined("fill", {&out});
  if (out.dtype() != DType::Bool) check_scalar_fits("fill", "value", value, out.dtype());
  if (out.numel() == 0) return;
  on_place(
      "ops::fill", out, stream, [&] { detail::fill_cpu(out, value); },
      [&](StreamHandle s) {
#if EMBER_WITH_CUDA
        detail::fill_cuda(out, value, s);
#endif
      });
}

void copy(const Tensor& out, const Tensor& in, StreamHandle stream) {
  check_defined("copy", {&out, &in});
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
  check_no_partial_overlap("copy", out, src);
  if (out.numel() == 0) return;
  on_place(
      "ops::copy", out, stream, [&] { detail::copy_cpu(out, src); },
      [&](StreamHandle s) {
#if EMBER_WITH_CUDA
        detail::copy_cuda(out, src, s);
#endif
      });
}

Tensor cast(const Tensor& in, DType dtype, StreamHandle stream) {
  Tensor out = Tensor::empty(in.shape(), dtype, in.place());
  copy(out, in, stream);
  return out;
}

// ---- unary ------------------------------------------------------------------------------------

void unary(UnaryOp op, const Tensor& out, const Tensor& in, StreamHandle stream) {
  const std::string name = describe("unary", op_name(op));
  check_defined(name, {&out, &in});
  check_same_place(name, out, in);
  check_same_dtype(name, "out", out, "in", in);
  check_arithmetic_dtype(name, in);
  if (unary_needs_floating(op)) {
    EMBER_CHECK(is_floating(in.dtype()), name,
                " supports floating dtypes (f32, f16, bf16, f64), not ", dtype_name(in.dtype()));
  }
  const Tensor src = broadcast_to(name, in, out);
  check_no_partial_overlap(name, out, src);
  if (out.numel() == 0) return;
  on_place(
      name, out, stream, [&] { detail::unary_cpu(op, out, src); },
      [&](StreamHandle s) {
#if EMBER_WITH_CUDA
        detail::unary_cuda(op, out, src, s);
#endif
      });
}

Tensor unary(UnaryOp op, const Tensor& in, StreamHandle stream) {
  check_defined(describe("unary", op_name(op)), {&in});
  Tensor out = Tensor::empty(in.shape(), in.dtype(), in.place());
  unary(op, out, in, stream);
  return out;
}

// ---- binary -----------------------------------------------------------------------------------

namespace {
// A comparison into a non-bool out: compare into a bool temporary, then convert.
template <class Compare>
void compare_via_bool(const Tensor& out, StreamHandle stream, Compare&& compare) {
  Tensor flags = scratch(out.shape(), DType::Bool, out.place(),
                         out.place().is_cuda() ? resolve_stream(out, stream) : nullptr);
  compare(flags);
  copy(out, flags, stream);
}
}  // namespace

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, StreamHandle stream) {
  const std::string name = describe("binary", op_name(op));
  check_defined(name, {&out, &a, &b});
  check_same_place(name, out, a);
  check_same_place(name, out, b);
  check_same_dtype(name, "a", a, "b", b);
  if (is_comparison(op)) {
    if (out.dtype() != DType::Bool) {
      compare_via_bool(out, stream, [&](const Tensor& flags) { binary(op, flags, a, b, stream); });
      return;
    }
  } else {
    check_same_dtype(name, "out", out, "a", a);
    check_arithmetic_dtype(name, a);
  }
  const Tensor ea = broadcast_to(name, a, out), eb = broadcast_to(name, b, out);
  check_no_partial_overlap(name, out, ea);
  check_no_partial_overlap(name, out, eb);
  if (out.numel() == 0) return;
  on_place(
      name, out, stream, [&] { detail::binary_cpu(op, out, ea, eb); },
      [&](StreamHandle s) {
#if EMBER_WITH_CUDA
        detail::binary_cuda(op, out, ea, eb, s);
#endif
      });
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, StreamHandle stream) {
  const std::string name = describe("binary", op_name(op));
  check_defined(name, {&a, &b});
  check_same_place(name, a, b);
  check_same_dtype(name, "a", a, "b", b);
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape()),
                             is_comparison(op) ? DType::Bool : a.dtype(), a.place());
  binary(op, out, a, b, stream);
  return out;
}

void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double scalar,
                   StreamHandle stream) {
  const std::string name = describe("binary_scalar", op_name(op));
  check_defined(name, {&out, &a});
  check_same_place(name, out, a);
  if (is_comparison(op)) {
    if (out.dtype() != DType::Bool) {
      compare_via_bool(out, stream,
                       [&](const Tensor& flags) { binary_scalar(op, flags, a, scalar, stream); });
      return;
    }
  } else {
    check_same_dtype(name, "out", out, "a", a);
    check_arithmetic_dtype(name, a);
  }
  check_scalar_fits(name, "scalar", scalar, a.dtype());
  const Tensor ea = broadcast_to(name, a, out);
  check_no_partial_overlap(name, out, ea);
  if (out.numel() == 0) return;
  on_place(
      name, out, stream, [&] { detail::binary_scalar_cpu(op, out, ea, scalar); },
      [&](StreamHandle s) {
#if EMBER_WITH_CUDA
        detail::binary_scalar_cuda(op, out, ea, scalar, s);
#endif
      });
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, double scalar, StreamHandle stream) {
  check_defined(describe("binary_scalar", op_name(op)), {&a});
  Tensor out = Tensor::empty(a.shape(), is_comparison(op) ? DType::Bool : a.dtype(), a.place());
  binary_scalar(op, out, a, scalar, stream);
  return out;
}

// ---- axpy, clamp, where -------------------------------------------------------------------------

void axpy(const Tensor& y, double alpha, const Tensor& x, StreamHandle stream) {
  const std::string name = "axpy";
  check_defined(name, {&y, &x});
  check_same_place(name, y, x);
  check_same_dtype(name, "y", y, "x", x);
  check_arithmetic_dtype(name, y);
  check_scalar_fits(name, "alpha", alpha, y.dtype());
  const Tensor ex = broadcast_to(name, x, y);
  check_no_partial_overlap(name, y, ex);
  if (y.numel() == 0) return;
  on_place(
      name, y, stream, [&] { detail::axpy_cpu(y, alpha, ex); },
      [&](StreamHandle s) {
#if EMBER_WITH_CUDA
        detail::axpy_cuda(y, alpha, ex, s);
#endif
      });
}

void clamp(const Tensor& out, const Tensor& in, double low, double high, StreamHandle stream) {
  const std::string name = "clamp";
  check_defined(name, {&out, &in});
  check_same_place(name, out, in);
  check_same_dtype(name, "out", out, "in", in);
  check_arithmetic_dtype(name, in);
  EMBER_CHECK(!std::isnan(low) && !std::isnan(high) && low <= high, name, ": low ", low,
              " and high ", high, " do not form a range");
  if (!is_floating(in.dtype())) {
    // Round the bounds inward to the dtype's values, saturating at its range.
    const int bits = static_cast<int>(dtype_size(in.dtype())) * 8;
    const double type_lo = is_signed(in.dtype()) ? -std::ldexp(1.0, bits - 1) : 0.0;
    // The largest value below 2^k that a double holds exactly enough for comparisons.
    const double type_hi =
        is_signed(in.dtype()) ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1;
    const double l = std::max(std::ceil(low), type_lo);
    const double h = std::min(std::floor(high), type_hi);
    EMBER_CHECK(l <= h, name, ": no ", dtype_name(in.dtype()), " value lies in [", low, ", ", high,
                "]");
    low = l;
    high = h;
  }
  const Tensor src = broadcast_to(name, in, out);
  check_no_partial_overlap(name, out, src);
  if (out.numel() == 0) return;
  on_place(
      name, out, stream, [&] { detail::clamp_cpu(out, src, low, high); },
      [&](StreamHandle s) {
#if EMBER_WITH_CUDA
        detail::clamp_cuda(out, src, low, high, s);
#endif
      });
}

Tensor clamp(const Tensor& in, double low, double high, StreamHandle stream) {
  check_defined("clamp", {&in});
  Tensor out = Tensor::empty(in.shape(), in.dtype(), in.place());
  clamp(out, in, low, high, stream);
  return out;
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b,
           StreamHandle stream) {
  const std::string name = "where";
  check_defined(name, {&out, &cond, &a, &b});
  check_same_place(name, out, cond);
  check_same_place(name, out, a);
  check_same_place(name, out, b);
  check_same_dtype(name, "out", out, "a", a);
  check_same_dtype(name, "out", out, "b", b);
  // A non-bool condition becomes bool first (at its own, unbroadcast, size).
  Tensor flags = cond;
  if (cond.dtype() != DType::Bool) {
    flags = scratch(cond.shape(), DType::Bool, cond.place(),
                    out.place().is_cuda() ? resolve_stream(out, stream) : nullptr);
    copy(flags, cond, stream);
  }
  const Tensor ec = broadcast_to(name, flags, out);
  const Tensor ea = broadcast_to(name, a, out), eb = broadcast_to(name, b, out);
  check_no_partial_overlap(name, out, ec);
  check_no_partial_overlap(name, out, ea);
  check_no_partial_overlap(name, out, eb);
  if (out.numel() == 0) return;
  on_place(
      name, out, stream, [&] { detail::where_cpu(out, ec, ea, eb); },
      [&](StreamHandle s) {
#if EMBER_WITH_CUDA
        detail::where_cuda(out, ec, ea, eb, s);
#endif
      });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, StreamHandle stream) {
  check_defined("where", {&cond, &a, &b});
  check_same_dtype("where", "a", a, "b", b);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape()), b.shape());
  Tensor out = Tensor::empty(shape, a.dtype(), a.place());
  where(out, cond, a, b, stream);
  return out;
}

}  // namespace ember::ops
