// CUDA pooling of the embedding forward (see embedding_kernels.hpp): a warp per bag (or per
// group of bags) with 16-byte loads (4 floats a lane, 128 columns a warp pass) and several rows
// in flight; each bag adds its rows in entry order, as the CPU does.
#include "ember/embedding/embedding_cuda.cuh"

namespace ember::embedding::kernels::cuda {

namespace {

__device__ inline void add4(float4& acc, const float4& v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

template <class V>
__device__ inline float4 load_row4(const V* values, std::int64_t row, std::int64_t vec_size,
                                   std::int64_t c) {
  if (row < 0) return make_float4(0.f, 0.f, 0.f, 0.f);
  return ldg4(values + row * vec_size + c);
}

// A warp per group of kBagsPerWarp bags; lane l covers columns 4l..4l+3 of each 128-column
// pass. The bags' row indices are loaded together (a lane per entry, 32 entries of each bag at a
// time) and shuffled out, so a warp has one 16-byte row load per bag in flight at each step;
// with pooling 1 the chain offsets -> row index -> row is otherwise all latency. Each bag adds
// its rows in entry order (the CPU's order).
constexpr int kBagsPerWarp = 4;

template <class V>
__global__ void pool4_kernel(const std::int64_t* __restrict__ offsets,
                             const std::int64_t* __restrict__ rows, const float* __restrict__ scale,
                             std::int64_t bags, const V* __restrict__ values, std::int64_t vec_size,
                             float* __restrict__ out) {
  constexpr int G = kBagsPerWarp;
  const int lane = threadIdx.x & 31;
  const std::int64_t passes = (vec_size + 127) / 128;  // uniform over the warp (shuffles)
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  for (std::int64_t group = global_warp(); group * G < bags; group += warp_count()) {
    std::int64_t begin[G], count[G];
    float s[G];
#pragma unroll
    for (int q = 0; q < G; ++q) {
      const std::int64_t bag = group * G + q;
      const bool valid = bag < bags;
      begin[q] = valid ? offsets[bag] : 0;
      count[q] = valid ? offsets[bag + 1] - begin[q] : 0;
      s[q] = valid ? scale[bag] : 0.f;
    }
    for (std::int64_t pass = 0; pass < passes; ++pass) {
      const std::int64_t c = 4 * lane + 128 * pass;
      const bool active = c < vec_size;
      float4 acc[G];
#pragma unroll
      for (int q = 0; q < G; ++q)
        acc[q] = zero;
      for (std::int64_t k = 0;; k += 32) {
        std::int64_t mine[G];
        int n[G];
        int m = 0;
#pragma unroll
        for (int q = 0; q < G; ++q) {
          const std::int64_t left = count[q] - k;
          n[q] = static_cast<int>(left <= 0 ? 0 : (left < 32 ? left : 32));
          m = n[q] > m ? n[q] : m;
          mine[q] = lane < n[q] ? rows[begin[q] + k + lane] : -1;
        }
        if (m == 0) break;
        for (int j = 0; j < m; ++j) {
          float4 v[G];
#pragma unroll
          for (int q = 0; q < G; ++q) {
            const std::int64_t r = __shfl_sync(0xffffffffu, mine[q], j);
            v[q] = (active && j < n[q]) ? load_row4(values, r, vec_size, c) : zero;
          }
#pragma unroll
          for (int q = 0; q < G; ++q) {
            if (j < n[q]) add4(acc[q], v[q]);
          }
        }
      }
      if (active) {
#pragma unroll
        for (int q = 0; q < G; ++q) {
          const std::int64_t bag = group * G + q;
          if (bag < bags) {
            float4 o = acc[q];
            o.x *= s[q];
            o.y *= s[q];
            o.z *= s[q];
            o.w *= s[q];
            *reinterpret_cast<float4*>(out + bag * vec_size + c) = o;
          }
        }
      }
    }
  }
}

// Any vec_size: a lane per column.
template <class V>
__global__ void pool1_kernel(const std::int64_t* __restrict__ offsets,
                             const std::int64_t* __restrict__ rows, const float* __restrict__ scale,
                             std::int64_t bags, const V* __restrict__ values, std::int64_t vec_size,
                             float* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t bag = global_warp(); bag < bags; bag += warp_count()) {
    const std::int64_t begin = offsets[bag], end = offsets[bag + 1];
    const float s = scale[bag];
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      float acc = 0.f;
      for (std::int64_t e = begin; e < end; ++e) {
        const std::int64_t r = rows[e];
        if (r >= 0) acc += ldg1(values + r * vec_size + c);
      }
      out[bag * vec_size + c] = acc * s;
    }
  }
}

}  // namespace

void pool(const std::int64_t* local_offsets, const std::int64_t* rows, const float* scale,
          std::int64_t bags, const Values& values, std::int64_t vec_size, float* out,
          StreamHandle stream) {
  if (bags == 0) return;
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    const V* table = static_cast<const V*>(values.data);
    const bool aligned = vec_size % 4 == 0 && aligned4<V>(table) && aligned4<float>(out);
    if (aligned) {
      pool4_kernel<V>
          <<<blocks_for_warps((bags + kBagsPerWarp - 1) / kBagsPerWarp), kThreads, 0, stream>>>(
              local_offsets, rows, scale, bags, table, vec_size, out);
    } else {
      pool1_kernel<V><<<blocks_for_warps(bags), kThreads, 0, stream>>>(local_offsets, rows, scale,
                                                                       bags, table, vec_size, out);
    }
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::embedding::kernels::cuda
