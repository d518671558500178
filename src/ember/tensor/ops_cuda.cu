// CUDA halves of the pointwise ops (see ops_kernels.hpp).
#include <cuda_runtime.h>

#include "ember/core/error.hpp"
#include "ember/tensor/convert.hpp"
#include "ember/tensor/iteration.hpp"
#include "ember/tensor/ops_kernels.hpp"

namespace ember::ops::detail {

namespace {

constexpr int kThreads = 256;

template <int N>
struct DeviceStrides {
  int rank;
  std::int64_t sizes[kMaxRank];
  std::int64_t strides[N][kMaxRank];
};

template <int N>
DeviceStrides<N> to_device(const IterationPlan<N>& plan) {
  DeviceStrides<N> d{};
  d.rank = plan.rank;
  for (int i = 0; i < plan.rank; ++i) {
    d.sizes[i] = plan.sizes[i];
    for (int k = 0; k < N; ++k) d.strides[k][i] = plan.strides[k][i];
  }
  return d;
}

template <int N>
__device__ inline void offsets_of(const DeviceStrides<N>& s, std::int64_t linear,
                                  std::int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    const std::int64_t i = linear % s.sizes[d];
    linear /= s.sizes[d];
    for (int k = 0; k < N; ++k) off[k] += i * s.strides[k][d];
  }
}

template <class T>
__global__ void fill_kernel(T* out, DeviceStrides<1> s, std::int64_t n, T value) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t off[1];
    offsets_of<1>(s, i, off);
    out[off[0]] = value;
  }
}

template <class O, class I>
__global__ void copy_kernel(O* out, const I* in, DeviceStrides<2> s, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t off[2];
    offsets_of<2>(s, i, off);
    out[off[0]] = convert<O>(in[off[1]]);
  }
}

unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

}  // namespace

void fill_cuda(const Tensor& out, double value, StreamHandle stream) {
  const auto plan = make_iteration_plan<1>(out.shape(), {out.strides()});
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_kernel<T><<<grid_for(plan.numel), kThreads, 0, stream>>>(
        static_cast<T*>(out.data()), to_device(plan), plan.numel, convert<T>(value));
    EMBER_CUDA_CHECK_LAUNCH();
  });
}

void copy_cuda(const Tensor& out, const Tensor& in, StreamHandle stream) {
  const auto plan = make_iteration_plan<2>(out.shape(), {out.strides(), in.strides()});
  dispatch_dtype(out.dtype(), [&](auto out_tag) {
    using O = typename decltype(out_tag)::type;
    dispatch_dtype(in.dtype(), [&](auto in_tag) {
      using I = typename decltype(in_tag)::type;
      copy_kernel<O, I><<<grid_for(plan.numel), kThreads, 0, stream>>>(
          static_cast<O*>(out.data()), static_cast<const I*>(in.data()), to_device(plan),
          plan.numel);
      EMBER_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace ember::ops::detail
