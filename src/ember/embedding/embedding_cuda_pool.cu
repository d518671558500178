// CUDA pooling of the embedding forward (see embedding_kernels.hpp). Each bag adds its rows in
// entry order in f32, as the CPU does, and writes its vector once, in the output's own type (f32,
// or f16 / bf16 rounded to nearest even: the network's mixed-precision input, with no f32 copy
// and cast pass between). The kernel is chosen by what the width and the pointers allow:
//  - short_bags: one entry a bag or fewer on average (or no offsets), 32-byte row pieces
//    (vec_size % 8 == 0 for f32, % 16 for a 16-bit table; 16-byte aligned): four bags' first
//    rows a thread in flight;
//  - pool8: 8 columns a thread (vec_size % 8 == 0, 16-byte aligned table and output), 16 for a
//    16-bit table whose width allows it: a thread per (bag, piece), each reading its row piece
//    with two 16-byte loads (one for a 16-bit table's 8 columns) and writing 16 to 64 bytes; up
//    to 4 rows of a bag in flight (more than one entry a bag on average);
//  - pool4: a warp per group of bags, 4 columns a lane (vec_size % 4 == 0);
//  - pool_columns: any vec_size, a thread per (bag, column) over the flattened output (pool1, a
//    warp per bag, past 2^31 output values).
#include "ember/embedding/embedding_cuda.cuh"
#include "ember/tensor/fast_divmod.hpp"

namespace ember::embedding::kernels::cuda {

namespace {

__device__ inline void add4(float4& acc, const float4& v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

// A bag's entries: [offsets[bag], offsets[bag + 1]), or the one entry `bag` without offsets.
__device__ inline void bag_range(const std::int64_t* offsets, std::int64_t bag, std::int64_t& begin,
                                 std::int64_t& end) {
  begin = offsets == nullptr ? bag : __ldg(offsets + bag);
  end = offsets == nullptr ? bag + 1 : __ldg(offsets + bag + 1);
}
__device__ inline float bag_scale(const float* scale, std::int64_t bag) {
  return scale == nullptr ? 1.f : __ldg(scale + bag);
}

template <class V>
__device__ inline float4 load_row4(const V* values, std::int64_t row, std::int64_t vec_size,
                                   std::int64_t c) {
  if (row < 0) return make_float4(0.f, 0.f, 0.f, 0.f);
  return ldg4(values + row * vec_size + c);
}

// Four pooled values, rounded into O and stored with one 16- or 8-byte store.
template <class O>
__device__ inline void store_out4(O* p, const float4& v) {
  const O o[4] = {O(v.x), O(v.y), O(v.z), O(v.w)};
  store4(p, o);
}

// Eight consecutive table values (16-byte aligned) as f32.
template <class V>
__device__ inline void ldg8(const V* p, float (&v)[8]) {
  if constexpr (sizeof(V) == 4) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    const float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    const float wide[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      v[i] = wide[i];
  } else {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
    const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = static_cast<float>(V::from_bits(words[i] & 0xffffu));
      v[2 * i + 1] = static_cast<float>(V::from_bits(words[i] >> 16));
    }
  }
}

// Eight pooled values rounded into O (16-byte aligned): two 16-byte stores of f32 or one of a
// 16-bit type.
template <class O>
__device__ inline void store8(O* p, const float (&v)[8]) {
  if constexpr (sizeof(O) == 4) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    unsigned words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      words[i] = O(v[2 * i]).bits | (static_cast<unsigned>(O(v[2 * i + 1]).bits) << 16);
    }
    *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// Rows of one bag each thread keeps in flight (pooling > 1).
constexpr int kPoolRowsInFlight = 4;

// A thread per (bag, 8 * P columns); consecutive threads take consecutive column pieces of a bag
// and then the next bag, so loads of a row and stores of the output are coalesced. The bag's
// offsets and row indices are the same for its vec_size / (8 P) threads (one transaction each).
// The grid covers all items where it can (no grid-stride chain of dependent loads per thread): a
// thread's offsets -> row index -> row loads are all latency, hidden by the other resident
// threads. P = 2 for 16-bit tables, so that a thread's row piece is 32 bytes behind its chain of
// index loads, as an f32 table's 8 columns are (with one 16-byte piece the 16-bit table's
// forward ran at 37-47 % of copy on the H100, below the f32 table's 63-71 %).
template <class V, class O, int P>
__global__ void pool8_kernel(const std::int64_t* __restrict__ offsets,
                             const std::int64_t* __restrict__ rows, const float* __restrict__ scale,
                             std::int64_t bags, const V* __restrict__ values, std::int64_t vec_size,
                             O* __restrict__ out) {
  const std::int64_t pieces = vec_size / (8 * P);
  const std::int64_t items = bags * pieces;
  for (std::int64_t i = global_thread(); i < items; i += thread_count()) {
    const std::int64_t bag = i / pieces;
    const std::int64_t c = (i - bag * pieces) * (8 * P);
    std::int64_t begin = 0, end = 0;
    bag_range(offsets, bag, begin, end);
    float acc[P][8];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int k = 0; k < 8; ++k)
        acc[p][k] = 0.f;
    for (std::int64_t e = begin; e < end; e += kPoolRowsInFlight) {
      std::int64_t r[kPoolRowsInFlight];
      float v[kPoolRowsInFlight][P][8];
#pragma unroll
      for (int q = 0; q < kPoolRowsInFlight; ++q) {
        r[q] = e + q < end ? __ldg(rows + e + q) : -1;
        if (r[q] >= 0) {
#pragma unroll
          for (int p = 0; p < P; ++p)
            ldg8(values + r[q] * vec_size + c + 8 * p, v[q][p]);
        }
      }
      // Absent rows (-1) are skipped, not added as zeros (-0 + 0 would turn a -0 sum into +0).
#pragma unroll
      for (int q = 0; q < kPoolRowsInFlight; ++q) {
        if (r[q] < 0) continue;
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
          for (int k = 0; k < 8; ++k)
            acc[p][k] += v[q][p][k];
      }
    }
    const float s = bag_scale(scale, bag);
#pragma unroll
    for (int p = 0; p < P; ++p) {
#pragma unroll
      for (int k = 0; k < 8; ++k)
        acc[p][k] *= s;
      store8(out + bag * vec_size + c + 8 * p, acc[p]);
    }
  }
}

// Items (bag, 32-byte row piece) a thread of short_bags_kernel keeps in flight.
constexpr int kShortBagItems = 4;

// The items a short-bag thread takes: first + q * stride for q < kShortBagItems, each split by
// `split` into its bag and its part of the bag (a piece or a column), with the bag's entries and
// its first row (-1 where the bag is empty or the item is past `items`). All the offsets are
// loaded before any row index, so that a thread has kShortBagItems loads in flight at each link
// of the chain offsets -> row index.
struct ShortBagItems {
  std::uint32_t bag[kShortBagItems], part[kShortBagItems];
  std::int64_t begin[kShortBagItems], end[kShortBagItems], first_row[kShortBagItems];
};

__device__ __forceinline__ void locate_short_bag_items(const std::int64_t* __restrict__ offsets,
                                                       const std::int64_t* __restrict__ rows,
                                                       std::uint32_t first, std::uint32_t stride,
                                                       std::uint32_t items, FastDivmod split,
                                                       ShortBagItems& it) {
#pragma unroll
  for (int q = 0; q < kShortBagItems; ++q) {
    const std::uint32_t i = first + q * stride;
    it.bag[q] = 0;
    it.part[q] = 0;
    it.begin[q] = it.end[q] = 0;
    if (i < items) {
      split.divmod(i, it.bag[q], it.part[q]);
      bag_range(offsets, it.bag[q], it.begin[q], it.end[q]);
    }
  }
#pragma unroll
  for (int q = 0; q < kShortBagItems; ++q)
    it.first_row[q] = it.begin[q] < it.end[q] ? __ldg(rows + it.begin[q]) : -1;
}

// A 32-byte row piece (two 16-byte loads) as f32: 8 columns of an f32 table, 16 of a 16-bit one.
template <class V>
__device__ inline void widen_piece(const uint4 (&raw)[2], float (&v)[32 / sizeof(V)]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const unsigned words[4] = {raw[h].x, raw[h].y, raw[h].z, raw[h].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (sizeof(V) == 4) {
        v[4 * h + i] = __uint_as_float(words[i]);
      } else {
        v[8 * h + 2 * i] = static_cast<float>(V::from_bits(words[i] & 0xffffu));
        v[8 * h + 2 * i + 1] = static_cast<float>(V::from_bits(words[i] >> 16));
      }
    }
  }
}

// store8 with the streaming (evict-first) hint: the pooled output is written once and is far
// larger than L2 (hundreds of MB a batch), so its lines should be the ones L2 drops, not a small
// table's rows that the next bags read again.
template <class O>
__device__ inline void store8_streaming(O* p, const float* v) {
  if constexpr (sizeof(O) == 4) {
    __stcs(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
    __stcs(reinterpret_cast<float4*>(p) + 1, make_float4(v[4], v[5], v[6], v[7]));
  } else {
    unsigned words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      words[i] = O(v[2 * i]).bits | (static_cast<unsigned>(O(v[2 * i + 1]).bits) << 16);
    }
    __stcs(reinterpret_cast<uint4*>(p), make_uint4(words[0], words[1], words[2], words[3]));
  }
}

// One pooled value rounded into O, with the streaming hint of store8_streaming.
template <class O>
__device__ inline void store1_streaming(O* p, float v) {
  if constexpr (sizeof(O) == 4) {
    __stcs(reinterpret_cast<float*>(p), v);
  } else {
    __stcs(reinterpret_cast<unsigned short*>(p), O(v).bits);
  }
}

// Bags of one entry or fewer on average (one-hot slots, the hybrid's frequent rows and the rows
// it sends; no offsets: bag i's one entry is i). pool8 spends 64 registers on a bag's rows in
// flight, so at pooling 1 a thread has one 32-byte piece in flight at half occupancy and the
// kernel runs at the pace of its chain of loads (offsets -> row index -> row) whatever the bytes.
// Here a thread takes kShortBagItems items (bag, 32-byte piece) a grid apart (each coalesced over
// the grid): their offsets are loaded together, then their first row indices, then those rows
// (raw, 8 registers each), so four pieces per thread are in flight. A bag's further entries
// follow one by one, in entry order, from the sum of the first (rare at this pooling). `pieces`
// divides the item index (items < 2^31; the caller checks). As in pool, the sum starts from 0:
// absent rows (-1) are skipped and a lone -0 gives +0.
template <class V, class O>
__global__ void __launch_bounds__(kThreads)
    short_bags_kernel(const std::int64_t* __restrict__ offsets,
                      const std::int64_t* __restrict__ rows, const float* __restrict__ scale,
                      std::uint32_t items, const V* __restrict__ values, std::int64_t vec_size,
                      FastDivmod pieces, O* __restrict__ out) {
  constexpr int kCols = 32 / sizeof(V);  // a 32-byte piece: 8 f32 or 16 16-bit columns
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t first = blockIdx.x * blockDim.x + threadIdx.x; first < items;
       first += stride * kShortBagItems) {
    ShortBagItems it;
    locate_short_bag_items(offsets, rows, first, stride, items, pieces, it);
    uint4 raw[kShortBagItems][2];
#pragma unroll
    for (int q = 0; q < kShortBagItems; ++q) {
      raw[q][0] = raw[q][1] = make_uint4(0u, 0u, 0u, 0u);
      if (it.first_row[q] >= 0) {
        const uint4* p = reinterpret_cast<const uint4*>(values + it.first_row[q] * vec_size +
                                                        it.part[q] * kCols);
        raw[q][0] = __ldg(p);
        raw[q][1] = __ldg(p + 1);
      }
    }
#pragma unroll
    for (int q = 0; q < kShortBagItems; ++q) {
      if (first + q * stride >= items) continue;
      const std::int64_t column = static_cast<std::int64_t>(it.part[q]) * kCols;
      float acc[kCols];
      widen_piece<V>(raw[q], acc);
#pragma unroll
      for (int k = 0; k < kCols; ++k)
        acc[k] = it.first_row[q] >= 0 ? 0.f + acc[k] : 0.f;
      for (std::int64_t e = it.begin[q] + 1; e < it.end[q]; ++e) {
        const std::int64_t row = __ldg(rows + e);
        if (row < 0) continue;
        const uint4* p = reinterpret_cast<const uint4*>(values + row * vec_size + column);
        const uint4 more[2] = {__ldg(p), __ldg(p + 1)};
        float v[kCols];
        widen_piece<V>(more, v);
#pragma unroll
        for (int k = 0; k < kCols; ++k)
          acc[k] += v[k];
      }
      const float s = bag_scale(scale, it.bag[q]);
#pragma unroll
      for (int k = 0; k < kCols; ++k)
        acc[k] *= s;
      O* o = out + static_cast<std::int64_t>(it.bag[q]) * vec_size + column;
#pragma unroll
      for (int h = 0; h < kCols / 8; ++h)
        store8_streaming(o + 8 * h, acc + 8 * h);
    }
  }
}

// A warp per group of kBagsPerWarp bags; lane l covers columns 4l..4l+3 of each 128-column
// pass. The bags' row indices are loaded together (a lane per entry, 32 entries of each bag at a
// time) and shuffled out, so a warp has one 16-byte row load per bag in flight at each step;
// with pooling 1 the chain offsets -> row index -> row is otherwise all latency. Each bag adds
// its rows in entry order (the CPU's order).
constexpr int kBagsPerWarp = 4;

template <class V, class O>
__global__ void pool4_kernel(const std::int64_t* __restrict__ offsets,
                             const std::int64_t* __restrict__ rows, const float* __restrict__ scale,
                             std::int64_t bags, const V* __restrict__ values, std::int64_t vec_size,
                             O* __restrict__ out) {
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
      std::int64_t end = 0;
      begin[q] = 0;
      if (valid) bag_range(offsets, bag, begin[q], end);
      count[q] = end - begin[q];
      s[q] = valid ? bag_scale(scale, bag) : 0.f;
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
          std::int64_t r[G];
#pragma unroll
          for (int q = 0; q < G; ++q) {
            r[q] = __shfl_sync(0xffffffffu, mine[q], j);
            v[q] = (active && j < n[q]) ? load_row4(values, r[q], vec_size, c) : zero;
          }
#pragma unroll
          for (int q = 0; q < G; ++q) {
            if (j < n[q] && r[q] >= 0) add4(acc[q], v[q]);
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
            store_out4(out + bag * vec_size + c, o);
          }
        }
      }
    }
  }
}

// Any vec_size: a thread per (bag, column), consecutive threads on consecutive columns of
// consecutive bags, so that every lane works and the output is written in whole lines whatever
// the width (a warp per bag left 21 of 32 lanes idle at DeepFM's 11 columns, with one bag's
// dependent offset, row and value loads in flight per warp). A bag's offsets, scale and row
// indices are the same for its vec_size threads: one transaction each. As in short_bags_kernel,
// a thread takes kShortBagItems items a grid apart and loads their offsets together, then their
// first row indices, then those values: with one item a thread, DeepFM's pooling ran at the pace
// of that chain of three loads (105 us for 65536 x 26 bags of 11 columns on an H200, about six
// times its bytes' time). A bag's further entries follow one by one, in entry order. `cols`
// divides the item index (bags * vec_size < 2^31; the caller checks).
template <class V, class O>
__global__ void __launch_bounds__(kThreads)
    pool_columns_kernel(const std::int64_t* __restrict__ offsets,
                        const std::int64_t* __restrict__ rows, const float* __restrict__ scale,
                        std::int64_t bags, const V* __restrict__ values, FastDivmod cols,
                        O* __restrict__ out) {
  const auto items = static_cast<std::uint32_t>(bags * cols.divisor);
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t first = blockIdx.x * blockDim.x + threadIdx.x; first < items;
       first += stride * kShortBagItems) {
    ShortBagItems it;
    locate_short_bag_items(offsets, rows, first, stride, items, cols, it);
    float acc[kShortBagItems];
#pragma unroll
    for (int q = 0; q < kShortBagItems; ++q)
      acc[q] = it.first_row[q] >= 0
                   ? 0.f + ldg1(values + it.first_row[q] * cols.divisor + it.part[q])
                   : 0.f;
#pragma unroll
    for (int q = 0; q < kShortBagItems; ++q) {
      const std::uint32_t i = first + q * stride;
      if (i >= items) continue;
      std::int64_t e = it.begin[q] + 1;
      // Two rows in flight: their loads do not wait on each other.
      for (; e + 1 < it.end[q]; e += 2) {
        const std::int64_t r0 = __ldg(rows + e), r1 = __ldg(rows + e + 1);
        const float v0 = r0 >= 0 ? ldg1(values + r0 * cols.divisor + it.part[q]) : 0.f;
        const float v1 = r1 >= 0 ? ldg1(values + r1 * cols.divisor + it.part[q]) : 0.f;
        acc[q] += v0;
        acc[q] += v1;
      }
      if (e < it.end[q]) {
        const std::int64_t row = __ldg(rows + e);
        if (row >= 0) acc[q] += ldg1(values + row * cols.divisor + it.part[q]);
      }
      store1_streaming(out + i, acc[q] * bag_scale(scale, it.bag[q]));
    }
  }
}

// Any vec_size, any number of items: a warp per bag, a lane per column (the fallback past 2^31
// items).
template <class V, class O>
__global__ void pool1_kernel(const std::int64_t* __restrict__ offsets,
                             const std::int64_t* __restrict__ rows, const float* __restrict__ scale,
                             std::int64_t bags, const V* __restrict__ values, std::int64_t vec_size,
                             O* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  for (std::int64_t bag = global_warp(); bag < bags; bag += warp_count()) {
    std::int64_t begin = 0, end = 0;
    bag_range(offsets, bag, begin, end);
    const float s = bag_scale(scale, bag);
    for (std::int64_t c = lane; c < vec_size; c += 32) {
      float acc = 0.f;
      for (std::int64_t e = begin; e < end; ++e) {
        const std::int64_t r = rows[e];
        if (r >= 0) acc += ldg1(values + r * vec_size + c);
      }
      out[bag * vec_size + c] = O(acc * s);
    }
  }
}

// A warp per 32 bags, a lane per bag: each bag's code (see gather_codes in
// embedding_kernels.hpp); then the bags the lanes found to pool, one at a time, a column a lane,
// their entries added in order from 0 as pool adds them.
template <class V, class O>
__global__ void gather_codes_kernel(const std::int64_t* __restrict__ offsets,
                                    const std::int64_t* __restrict__ rows,
                                    const float* __restrict__ scale, std::int64_t bags,
                                    const V* __restrict__ values, std::int64_t vec_size,
                                    std::int32_t* __restrict__ codes, O* __restrict__ out) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (std::int64_t first = global_warp() * 32; first < bags; first += warp_count() * 32) {
    const std::int64_t bag = first + lane;
    bool pooled = false;
    if (bag < bags) {
      const std::int64_t begin = __ldg(offsets + bag), end = __ldg(offsets + bag + 1);
      const std::int64_t row = end - begin == 1 ? __ldg(rows + begin) : -1;
      if (end - begin == 1 && (scale == nullptr || __ldg(scale + bag) == 1.f)) {
        codes[bag] = row >= 0 ? static_cast<std::int32_t>(row) : kGatherZeroRow;
      } else if (end == begin) {
        codes[bag] = kGatherZeroRow;
      } else {
        codes[bag] = gather_dense_code(bag);
        pooled = true;
      }
    }
    for (unsigned left = __ballot_sync(0xffffffffu, pooled); left != 0; left &= left - 1) {
      const std::int64_t p = first + __ffs(static_cast<int>(left)) - 1;
      const std::int64_t begin = __ldg(offsets + p), end = __ldg(offsets + p + 1);
      const float s = scale == nullptr ? 1.f : __ldg(scale + p);
      for (std::int64_t c = lane; c < vec_size; c += 32) {
        float acc = 0.f;
        for (std::int64_t e = begin; e < end; ++e) {
          const std::int64_t r = __ldg(rows + e);
          if (r >= 0) acc += ldg1(values + r * vec_size + c);
        }
        out[p * vec_size + c] = O(acc * s);
      }
    }
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// pool8's grid: a thread per item up to 2^31 - 1 blocks' worth (the kernel strides past that).
int blocks_for_items(std::int64_t items) {
  return static_cast<int>(std::min<std::int64_t>((items + kThreads - 1) / kThreads, INT32_MAX));
}

}  // namespace

void pool(const std::int64_t* local_offsets, const std::int64_t* rows, const float* scale,
          std::int64_t bags, std::int64_t entries, const Values& values, std::int64_t vec_size,
          void* out, ValueType out_type, StreamHandle stream) {
  if (bags == 0 || vec_size == 0) return;
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    with_value_type(out_type, [&](auto out_tag) {
      using O = decltype(out_tag);
      const V* table = static_cast<const V*>(values.data);
      O* o = static_cast<O*>(out);
      constexpr std::int64_t kPieceCols = 32 / sizeof(V);
      const bool short_bags = local_offsets == nullptr || entries <= bags;
      if (short_bags && vec_size % kPieceCols == 0 && aligned16(table) && aligned16(o) &&
          bags * (vec_size / kPieceCols) <= FastDivmod::kMaxNumerator) {
        const std::int64_t items = bags * (vec_size / kPieceCols);
        short_bags_kernel<V, O><<<blocks_for_items((items + kShortBagItems - 1) / kShortBagItems),
                                  kThreads, 0, stream>>>(
            local_offsets, rows, scale, static_cast<std::uint32_t>(items), table, vec_size,
            FastDivmod(static_cast<std::uint32_t>(vec_size / kPieceCols)), o);
      } else if (sizeof(V) == 2 && vec_size % 16 == 0 && aligned16(table) && aligned16(o)) {
        pool8_kernel<V, O, 2><<<blocks_for_items(bags * (vec_size / 16)), kThreads, 0, stream>>>(
            local_offsets, rows, scale, bags, table, vec_size, o);
      } else if (vec_size % 8 == 0 && aligned16(table) && aligned16(o)) {
        pool8_kernel<V, O, 1><<<blocks_for_items(bags * (vec_size / 8)), kThreads, 0, stream>>>(
            local_offsets, rows, scale, bags, table, vec_size, o);
      } else if (vec_size % 4 == 0 && aligned4<V>(table) && aligned4<O>(o)) {
        pool4_kernel<V, O>
            <<<blocks_for_warps((bags + kBagsPerWarp - 1) / kBagsPerWarp), kThreads, 0, stream>>>(
                local_offsets, rows, scale, bags, table, vec_size, o);
      } else if (bags * vec_size <= FastDivmod::kMaxNumerator) {
        pool_columns_kernel<V, O>
            <<<blocks_for_items((bags * vec_size + kShortBagItems - 1) / kShortBagItems), kThreads,
               0, stream>>>(local_offsets, rows, scale, bags, table,
                            FastDivmod(static_cast<std::uint32_t>(vec_size)), o);
      } else {
        pool1_kernel<V, O><<<blocks_for_warps(bags), kThreads, 0, stream>>>(
            local_offsets, rows, scale, bags, table, vec_size, o);
      }
    });
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

void gather_codes(const std::int64_t* local_offsets, const std::int64_t* rows, const float* scale,
                  std::int64_t bags, const Values& values, std::int64_t vec_size,
                  std::int32_t* codes, void* out, ValueType out_type, StreamHandle stream) {
  if (bags == 0) return;
  with_value_type(values.type, [&](auto tag) {
    using V = decltype(tag);
    with_value_type(out_type, [&](auto out_tag) {
      using O = decltype(out_tag);
      gather_codes_kernel<V, O><<<blocks_for_warps((bags + 31) / 32), kThreads, 0, stream>>>(
          local_offsets, rows, scale, bags, static_cast<const V*>(values.data), vec_size, codes,
          static_cast<O*>(out));
    });
  });
  EMBER_CUDA_CHECK_LAUNCH();
}

}  // namespace ember::embedding::kernels::cuda
