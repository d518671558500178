// Internal: the per-device halves of ops.hpp. ops.cpp checks arguments (places, dtypes, shapes,
// scalar ranges), expands inputs to out's shape and resolves the stream, then calls these; they
// trust their arguments. Each op exists once for the CPU and once for CUDA, with these contracts
// (all inputs already have out's shape):
//   fill:          any dtype.
//   copy:          any two dtypes.
//   unary:         out and in of one numeric dtype that the op supports.
//   binary:        arithmetic: out, a, b of one numeric dtype; comparison: out bool, a and b of
//                  one dtype (any).
//   binary_scalar: as binary, with b the scalar (already checked to fit a's dtype).
//   axpy:          y and x of one numeric dtype (alpha checked to fit).
//   clamp:         out and in of one numeric dtype; low <= high, both representable.
//   where:         cond bool; out, a, b of one dtype.
#pragma once

#include "ember/core/device.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::ops::detail {

void fill_cpu(const Tensor& out, double value);
void copy_cpu(const Tensor& out, const Tensor& in);
void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& in);
void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void binary_scalar_cpu(BinaryOp op, const Tensor& out, const Tensor& a, double scalar);
void axpy_cpu(const Tensor& y, double alpha, const Tensor& x);
void clamp_cpu(const Tensor& out, const Tensor& in, double low, double high);
void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

#if EMBER_WITH_CUDA
void fill_cuda(const Tensor& out, double value, StreamHandle stream);
void copy_cuda(const Tensor& out, const Tensor& in, StreamHandle stream);
void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in, StreamHandle stream);
void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                 StreamHandle stream);
void binary_scalar_cuda(BinaryOp op, const Tensor& out, const Tensor& a, double scalar,
                        StreamHandle stream);
void axpy_cuda(const Tensor& y, double alpha, const Tensor& x, StreamHandle stream);
void clamp_cuda(const Tensor& out, const Tensor& in, double low, double high, StreamHandle stream);
void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b,
                StreamHandle stream);
// copy_cuda between different dtypes (ops_cuda_cast.cu); the device is already current.
void cast_cuda(const Tensor& out, const Tensor& in, StreamHandle stream);
#endif

}  // namespace ember::ops::detail
