#include "ember/tensor/reduce.hpp"

#include <limits>

#include "ember/core/stream.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/reduce_kernels.hpp"

namespace ember::ops {

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

namespace {

std::string describe(ReduceOp op) {
  return std::string("reduce(") + op_name(op) + ")";
}

void check_input(const std::string& name, const Tensor& in) {
  EMBER_CHECK(in.defined(), name, ": undefined tensor");
  EMBER_CHECK(in.dtype() != DType::Bool, name,
              " does not take bool tensors (cast to an integer dtype to count)");
}

// What an empty reduction gives, or an error.
double empty_result(const std::string& name, ReduceOp op, DType dtype) {
  EMBER_CHECK(op == ReduceOp::Sum || (op == ReduceOp::Mean && is_floating(dtype)), name,
              " over no elements", op == ReduceOp::Mean ? " of an integer dtype" : "",
              " has no value");
  return op == ReduceOp::Sum ? 0.0 : std::numeric_limits<double>::quiet_NaN();
}

StreamHandle resolve(const Tensor& t, StreamHandle stream) {
  return stream != nullptr ? stream : current_stream(t.place().device());
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, int dim, StreamHandle stream) {
  const std::string name = describe(op);
  check_input(name, in);
  EMBER_CHECK(out.defined(), name, ": undefined output");
  EMBER_CHECK(in.rank() >= 1, name, " along a dimension of a rank-0 tensor");
  const int d = normalize_dim(dim, in.rank(), name.c_str());
  EMBER_CHECK(out.place() == in.place(), name, ": operands are on different places (", out.place(),
              " and ", in.place(), ")");
  EMBER_CHECK(out.dtype() == in.dtype(), name, ": out is ", dtype_name(out.dtype()), " but in is ",
              dtype_name(in.dtype()), " (the result keeps the input's dtype)");
  Shape dropped = in.shape();
  dropped.erase(d);
  Shape kept = in.shape();
  kept[d] = 1;
  EMBER_CHECK(out.shape() == dropped || out.shape() == kept, name, " along dimension ", d, " of ",
              in.shape(), ": output shape ", out.shape(), " should be ", dropped, " or ", kept);
  const Tensor target = out.shape() == dropped ? out : out.squeeze(d);
  if (target.numel() == 0) return;
  if (in.size(d) == 0) {
    fill(target, empty_result(name, op, in.dtype()), stream);
    return;
  }
  if (in.place().is_cuda()) {
#if EMBER_WITH_CUDA
    detail::reduce_dim_cuda(op, target, in, d, resolve(in, stream));
#else
    throw_cuda_unavailable(name.c_str());
#endif
    return;
  }
  detail::reduce_dim_cpu(op, target, in, d);
}

Tensor reduce(ReduceOp op, const Tensor& in, int dim, bool keep_dim, StreamHandle stream) {
  const std::string name = describe(op);
  check_input(name, in);
  EMBER_CHECK(in.rank() >= 1, name, " along a dimension of a rank-0 tensor");
  const int d = normalize_dim(dim, in.rank(), name.c_str());
  Shape shape = in.shape();
  if (keep_dim) {
    shape[d] = 1;
  } else {
    shape.erase(d);
  }
  Tensor out = Tensor::empty(shape, in.dtype(), in.place());
  reduce(op, out, in, d, stream);
  return out;
}

Tensor reduce_all(ReduceOp op, const Tensor& in, StreamHandle stream) {
  const std::string name = describe(op);
  check_input(name, in);
  Tensor out = Tensor::empty({}, in.dtype(), in.place());
  if (in.numel() == 0) {
    fill(out, empty_result(name, op, in.dtype()), stream);
    return out;
  }
  if (in.place().is_cuda()) {
#if EMBER_WITH_CUDA
    detail::reduce_all_cuda(op, out, in, resolve(in, stream));
#else
    throw_cuda_unavailable(name.c_str());
#endif
    return out;
  }
  detail::reduce_all_cpu(op, out, in);
  return out;
}

}  // namespace ember::ops
