#include "ember/core/staged_copy.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ember/core/allocator.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ember::detail {

int copy_threads() {
  static const int threads = [] {
    if (const char* env = std::getenv("EMBER_COPY_THREADS"); env != nullptr && *env != '\0') {
      return std::max(1, std::atoi(env));
    }
    return std::clamp(omp_get_num_procs() / 2, 1, 8);
  }();
  return threads;
}

void parallel_memcpy(void* dst, const void* src, std::size_t bytes) {
  // Below this a thread team costs more than it saves.
  constexpr std::size_t kParallelMin = std::size_t{1} << 20;
  const int threads = copy_threads();
  if (threads <= 1 || bytes < kParallelMin) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const std::size_t piece = (bytes / threads + 4095) / 4096 * 4096;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::size_t begin = static_cast<std::size_t>(t) * piece;
    if (begin < bytes) std::memcpy(d + begin, s + begin, std::min(piece, bytes - begin));
  }
}

#if EMBER_WITH_CUDA

namespace {

constexpr int kMaxDevices = 64;

struct Staging {
  std::mutex mutex;
  std::array<void*, 2> chunks{};
  std::array<Event, 2> events;
  std::array<bool, 2> in_flight{};
};

// One pair of chunks per device, created on first use and kept: pinning 16 MiB once is cheap,
// pinning it per copy is not.
Staging& staging(int device) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<Staging*, kMaxDevices> all{};
  EMBER_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device,
              " is out of range");
  std::call_once(once[device], [device] {
    auto* s = new Staging();
    Allocator& pinned = raw_allocator(Place::pinned());
    for (int k = 0; k < 2; ++k) {
      s->chunks[k] = pinned.allocate(kStagingChunk);
      s->events[k] = Event::create(device);
    }
    all[device] = s;
  });
  return *all[device];
}

}  // namespace

void staged_host_to_device(void* dst, int device, const void* src, std::size_t bytes,
                           StreamHandle stream, bool wait) {
  DeviceGuard guard(device);
  Staging& s = staging(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* d = static_cast<char*>(dst);
  const auto* h = static_cast<const char*>(src);
  int k = 0;
  for (std::size_t at = 0; at < bytes; at += kStagingChunk, k ^= 1) {
    const std::size_t n = std::min(kStagingChunk, bytes - at);
    if (s.in_flight[k]) {
      s.events[k].synchronize();
      s.in_flight[k] = false;
    }
    parallel_memcpy(s.chunks[k], h + at, n);
    EMBER_CUDA_CHECK(cudaMemcpyAsync(d + at, s.chunks[k], n, cudaMemcpyHostToDevice, stream));
    s.events[k].record(stream);
    s.in_flight[k] = true;
  }
  if (wait) synchronize_stream(stream);
}

void staged_device_to_host(void* dst, const void* src, int device, std::size_t bytes,
                           StreamHandle stream) {
  DeviceGuard guard(device);
  Staging& s = staging(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* h = static_cast<char*>(dst);
  const auto* d = static_cast<const char*>(src);
  // A chunk may still be the source of an earlier host-to-device copy.
  for (int k = 0; k < 2; ++k) {
    if (s.in_flight[k]) s.events[k].synchronize();
    s.in_flight[k] = false;
  }
  auto issue = [&](std::size_t at, int k) {
    const std::size_t n = std::min(kStagingChunk, bytes - at);
    EMBER_CUDA_CHECK(cudaMemcpyAsync(s.chunks[k], d + at, n, cudaMemcpyDeviceToHost, stream));
    s.events[k].record(stream);
    s.in_flight[k] = true;
  };
  issue(0, 0);
  int k = 0;
  for (std::size_t at = 0; at < bytes; at += kStagingChunk, k ^= 1) {
    // Keep the link busy with the next chunk while this one is copied out on the host.
    if (at + kStagingChunk < bytes) issue(at + kStagingChunk, k ^ 1);
    s.events[k].synchronize();
    s.in_flight[k] = false;
    parallel_memcpy(h + at, s.chunks[k], std::min(kStagingChunk, bytes - at));
  }
}

#else

void staged_host_to_device(void*, int, const void*, std::size_t, StreamHandle, bool) {
  throw_cuda_unavailable("a staged host-to-device copy");
}
void staged_device_to_host(void*, const void*, int, std::size_t, StreamHandle) {
  throw_cuda_unavailable("a staged device-to-host copy");
}

#endif

}  // namespace ember::detail
