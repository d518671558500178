// Internal: the per-device halves of ops.hpp. ops.cpp checks arguments, resolves broadcasting and
// the stream, then calls these; they trust their arguments.
#pragma once

#include "ember/core/device.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::ops::detail {

// All tensors already have out's shape (inputs expanded); `stream` is resolved (CUDA only).
void fill_cpu(const Tensor& out, double value);
void copy_cpu(const Tensor& out, const Tensor& in);

#if EMBER_WITH_CUDA
void fill_cuda(const Tensor& out, double value, StreamHandle stream);
void copy_cuda(const Tensor& out, const Tensor& in, StreamHandle stream);
#endif

}  // namespace ember::ops::detail
