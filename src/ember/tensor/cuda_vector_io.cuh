// Vector memory access for the memory-bound kernels (pointwise ops in cuda_apply.cuh, the
// all-element reduction in reduce_cuda.cu): V elements moved as one aligned access of up to 16
// bytes, each access carrying an L2 eviction policy.
//
// Why a policy: an op whose operands are larger than the L2 cache streams them through it; each
// line is touched once, so keeping it only pushes out lines that something else will read again
// (embedding rows, weights, the next op's small inputs). Such launches mark their accesses
// evict-first; smaller ones use the normal priority, so that an output the next op reads can stay
// in L2. The policy is a run-time value (createpolicy), so both cases are one kernel, not two
// instantiations.
//
// Include from .cu files only; fmt-free.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace ember::cuda_apply {

// V elements of T, aligned to their size (at most 16 bytes): one memory access.
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// The policy of a launch's streaming accesses: evict-first when the launch moves more bytes than
// the L2 holds, otherwise the normal priority.
__device__ __forceinline__ std::uint64_t l2_policy(bool evict_first) {
  std::uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (evict_first) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  }
#else
  (void)evict_first;
#endif
  return policy;
}

// One vector from global memory (`p` aligned to sizeof(VecT)). The loads and stores are volatile
// asm, so they stay in program order relative to each other: a step issues all its loads before
// its first use, which is the point.
template <class VecT>
__device__ __forceinline__ VecT load_vector(const VecT* p, std::uint64_t policy) {
  static_assert(sizeof(VecT) == 2 || sizeof(VecT) == 4 || sizeof(VecT) == 8 || sizeof(VecT) == 16,
                "vector accesses are 2, 4, 8 or 16 bytes");
  VecT value;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(VecT) == 16) {
    uint4 r;
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p), "l"(policy));
    std::memcpy(&value, &r, sizeof(VecT));
  } else if constexpr (sizeof(VecT) == 8) {
    uint2 r;
    asm volatile("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
                 : "=r"(r.x), "=r"(r.y)
                 : "l"(p), "l"(policy));
    std::memcpy(&value, &r, sizeof(VecT));
  } else if constexpr (sizeof(VecT) == 4) {
    unsigned r;
    asm volatile("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "l"(policy));
    std::memcpy(&value, &r, sizeof(VecT));
  } else {
    unsigned short r;
    asm volatile("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(r) : "l"(p), "l"(policy));
    std::memcpy(&value, &r, sizeof(VecT));
  }
#else
  (void)policy;
  value = *p;
#endif
  return value;
}

template <class VecT>
__device__ __forceinline__ void store_vector(VecT* p, const VecT& value, std::uint64_t policy) {
  static_assert(sizeof(VecT) == 2 || sizeof(VecT) == 4 || sizeof(VecT) == 8 || sizeof(VecT) == 16,
                "vector accesses are 2, 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(VecT) == 16) {
    uint4 r;
    std::memcpy(&r, &value, sizeof(VecT));
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(r.x),
                 "r"(r.y), "r"(r.z), "r"(r.w), "l"(policy)
                 : "memory");
  } else if constexpr (sizeof(VecT) == 8) {
    uint2 r;
    std::memcpy(&r, &value, sizeof(VecT));
    asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1, %2}, %3;" ::"l"(p), "r"(r.x), "r"(r.y),
                 "l"(policy)
                 : "memory");
  } else if constexpr (sizeof(VecT) == 4) {
    unsigned r;
    std::memcpy(&r, &value, sizeof(VecT));
    asm volatile("st.global.L2::cache_hint.u32 [%0], %1, %2;" ::"l"(p), "r"(r), "l"(policy)
                 : "memory");
  } else {
    unsigned short r;
    std::memcpy(&r, &value, sizeof(VecT));
    asm volatile("st.global.L2::cache_hint.u16 [%0], %1, %2;" ::"l"(p), "h"(r), "l"(policy)
                 : "memory");
  }
#else
  (void)policy;
  *p = value;
#endif
}

}  // namespace ember::cuda_apply
