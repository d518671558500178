// The CUDA kernels of a pointwise op: an element function (op_functors.hpp) applied over an
// output and up to three inputs of one shape (inputs expanded to it, or immediate values). Which
// kernel runs on which piece is decided by plan_pointwise (pointwise_plan.hpp, where the paths
// are described); this header holds the two kernels and the small typed loop that launches them,
// so that each (functor, dtypes) instantiation adds little host code to compile.
//
// Include from .cu files only; fmt-free.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "ember/core/error.hpp"
#include "ember/tensor/convert.hpp"
#include "ember/tensor/cuda_launch.hpp"
#include "ember/tensor/fast_divmod.hpp"
#include "ember/tensor/pointwise_plan.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::cuda_apply {

inline constexpr int kThreads = 256;

// ---- a minimal tuple usable as a kernel argument (trivially copyable aggregate) -----------------
template <std::size_t I, class T>
struct PackLeaf {
  T value;
};
template <class Seq, class... T>
struct PackImpl;
template <std::size_t... I, class... T>
struct PackImpl<std::index_sequence<I...>, T...> : PackLeaf<I, T>... {};
// A class template (not an alias) so that T... deduces from it.
template <class... T>
struct Pack : PackImpl<std::index_sequence_for<T...>, T...> {};

template <std::size_t I, class T>
__host__ __device__ __forceinline__ T& get(PackLeaf<I, T>& p) {
  return p.value;
}
template <std::size_t I, class T>
__host__ __device__ __forceinline__ const T& get(const PackLeaf<I, T>& p) {
  return p.value;
}

// ---- operands -------------------------------------------------------------------------------
// An input as a kernel sees it: memory, or (ptr == nullptr) an immediate value, held in OpMath so
// that a scalar operand of an f16 op keeps its f32 precision.
template <class T>
struct Operand {
  const T* ptr;
  OpMath<T> value;
  // Vectorised path: false when the input is one repeated value (stride 0, or an immediate).
  bool dense;
};

template <class T>
__device__ __forceinline__ OpMath<T> load_at(const Operand<T>& o, std::uint32_t offset) {
  return o.ptr != nullptr ? static_cast<OpMath<T>>(o.ptr[offset]) : o.value;
}

// ---- path 2: strided --------------------------------------------------------------------------
template <class F, class Out, class... In, std::size_t... K>
__device__ __forceinline__ void strided_loop(const F& f, Out* out, const Pack<Operand<In>...>& in,
                                             const StridedGeometry& g, std::uint32_t n,
                                             std::index_sequence<K...>) {
  constexpr int N = 1 + sizeof...(In);
  const std::uint32_t step = gridDim.x * kThreads;
  for (std::uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += step) {
    std::uint32_t offset[N];
    offsets_of<N>(g, i, offset);
    out[offset[0]] = convert<Out>(f(load_at(get<K>(in), offset[K + 1])...));
  }
}

template <class F, class Out, class... In>
__global__ void __launch_bounds__(kThreads)
    strided_kernel(F f, Out* out, Pack<Operand<In>...> in, StridedGeometry g, std::uint32_t n) {
  strided_loop<F, Out, In...>(f, out, in, g, n, std::index_sequence_for<In...>{});
}

// ---- path 1: vectorised -----------------------------------------------------------------------
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <class T, int V>
struct Lanes {
  OpMath<T> v[V];
};

template <int V, class T>
__device__ __forceinline__ void load_lanes(const Operand<T>& o, std::uint32_t first,
                                           Lanes<T, V>& lanes) {
  if (o.dense) {
    const Vec<T, V> raw = *reinterpret_cast<const Vec<T, V>*>(o.ptr + first);
#pragma unroll
    for (int j = 0; j < V; ++j)
      lanes.v[j] = static_cast<OpMath<T>>(raw.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j)
      lanes.v[j] = o.value;
  }
}

template <int V, class F, class Out, class... In, std::size_t... K>
__device__ __forceinline__ void vector_loop(const F& f, Out* out, Pack<Operand<In>...> in,
                                            std::uint32_t head, std::uint32_t vectors,
                                            std::uint32_t n, std::index_sequence<K...>) {
  // A repeated value from memory is read once per thread, not once per element.
  ((get<K>(in).value = (!get<K>(in).dense && get<K>(in).ptr != nullptr)
                           ? static_cast<OpMath<In>>(get<K>(in).ptr[0])
                           : get<K>(in).value),
   ...);
  const std::uint32_t thread = blockIdx.x * kThreads + threadIdx.x;
  const std::uint32_t step = gridDim.x * kThreads;
  for (std::uint32_t v = thread; v < vectors; v += step) {
    const std::uint32_t first = head + v * V;
    Pack<Lanes<In, V>...> x;
    (load_lanes<V>(get<K>(in), first, get<K>(x)), ...);
    Vec<Out, V> result;
#pragma unroll
    for (int j = 0; j < V; ++j)
      result.v[j] = convert<Out>(f(get<K>(x).v[j]...));
    *reinterpret_cast<Vec<Out, V>*>(out + first) = result;
  }
  // The head (before the first vector boundary) and the tail (after the last whole vector): fewer
  // than 2V elements, one per thread.
  const std::uint32_t tail_begin = head + vectors * V;
  const std::uint32_t singles = head + (n - tail_begin);
  if (thread < singles) {
    const std::uint32_t i = thread < head ? thread : tail_begin + (thread - head);
    out[i] = convert<Out>(
        f((get<K>(in).dense ? static_cast<OpMath<In>>(get<K>(in).ptr[i]) : get<K>(in).value)...));
  }
}

template <int V, class F, class Out, class... In>
__global__ void __launch_bounds__(kThreads)
    vector_kernel(F f, Out* out, Pack<Operand<In>...> in, std::uint32_t head, std::uint32_t vectors,
                  std::uint32_t n) {
  vector_loop<V, F, Out, In...>(f, out, in, head, vectors, n, std::index_sequence_for<In...>{});
}

// ---- host side --------------------------------------------------------------------------------

// An input of a launch: a tensor expanded to the output's shape, or an immediate value.
template <class T>
struct Arg {
  const Tensor* tensor = nullptr;
  OpMath<T> value{};
};
template <class T>
Arg<T> tensor_arg(const Tensor& t) {
  return {&t, OpMath<T>{}};
}
template <class T>
Arg<T> immediate_arg(OpMath<T> value) {
  return {nullptr, value};
}

// V for a set of operand types: the widest moves 16 bytes per access.
template <class Out, class... In>
constexpr int vector_width() {
  constexpr std::size_t widest = std::max({sizeof(Out), sizeof(In)...});
  return static_cast<int>(16 / widest);
}

namespace detail {

template <bool Vectorise, class Out, class... In, class F>
void pointwise(F f, const Tensor& out, cudaStream_t stream, const Arg<In>&... args) {
  constexpr int V = Vectorise ? vector_width<Out, In...>() : 1;
  if (out.numel() == 0) return;
  PointwiseOperands ops;
  ops.count = 1 + static_cast<int>(sizeof...(In));
  ops.data = {out.data(), (args.tensor != nullptr ? args.tensor->data() : nullptr)...};
  ops.strides = {out.strides(), (args.tensor != nullptr ? args.tensor->strides() : Strides{})...};
  ops.element_size = {sizeof(Out), sizeof(In)...};
  for (const PointwiseLaunch& launch : plan_pointwise(out.shape(), ops, V)) {
    Out* const o = static_cast<Out*>(out.data()) + launch.offset[0];
    Pack<Operand<In>...> operands;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((get<K>(operands) =
            Operand<In>{args.tensor != nullptr
                            ? static_cast<const In*>(args.tensor->data()) + launch.offset[K + 1]
                            : nullptr,
                        args.value, launch.dense[K + 1]}),
       ...);
    }
    (std::index_sequence_for<In...>{});
    if constexpr (V > 1) {
      if (launch.vectorised) {
        const auto kernel = vector_kernel<V, F, Out, In...>;
        const unsigned grid = grid_for(reinterpret_cast<const void*>(kernel), kThreads,
                                       std::max<std::int64_t>(launch.vectors, 2 * V));
        kernel<<<grid, kThreads, 0, stream>>>(f, o, operands, launch.head, launch.vectors,
                                              launch.n);
        EMBER_CUDA_CHECK_LAUNCH();
        continue;
      }
    }
    const auto kernel = strided_kernel<F, Out, In...>;
    const unsigned grid = grid_for(reinterpret_cast<const void*>(kernel), kThreads, launch.n);
    kernel<<<grid, kThreads, 0, stream>>>(f, o, operands, launch.geometry, launch.n);
    EMBER_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace detail

// Applies out = f(in...) element-wise on `stream`; the caller has made out's device current.
// `f` takes OpMath<In>... and returns something convertible to Out.
template <class Out, class... In, class F>
void pointwise(F f, const Tensor& out, cudaStream_t stream, const Arg<In>&... args) {
  detail::pointwise<true, Out, In...>(f, out, stream, args...);
}

// The same with the strided kernel alone: for rarely used (functor, dtypes) combinations, at
// half the compile cost. Dense operands still coalesce; they just move one element per access.
template <class Out, class... In, class F>
void pointwise_unvectorised(F f, const Tensor& out, cudaStream_t stream, const Arg<In>&... args) {
  detail::pointwise<false, Out, In...>(f, out, stream, args...);
}

}  // namespace ember::cuda_apply
