// The host side of a staged copy between pageable host memory and a device, independent of CUDA
// so that the CPU tests can drive it (staged_copy.cpp plugs in a CUDA stream and events).
//
// The copy is cut into chunks; chunk j goes through staging slot j % slots. Several threads each
// take the next chunk, wait until its slot is theirs (the chunk `slots` earlier has left it) and
// until the device is done with the slot's previous transfer, then:
//   to the device: memcpy the chunk into the slot and queue the slot's upload;
//   to the host:   queue the download into the slot, wait for it, memcpy the chunk out.
// So the DMA engine drains some slots while the threads fill (or empty) others, and no thread
// waits for the others between chunks. The threads hand slots on in chunk order, which makes
// the pipeline progress with any number of threads, one included.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "ember/core/copy_thread_pool.hpp"

namespace ember::detail {

// What the pipeline needs from the device. Calls for different slots may come from different
// threads at the same time; calls for one slot never overlap.
class StagingTransport {
 public:
  virtual ~StagingTransport() = default;
  // Queues a copy of `bytes` from the slot's buffer `staging` to device memory `dst`; the slot
  // stays busy until that copy is done.
  virtual void upload(int slot, void* dst, const void* staging, std::size_t bytes) = 0;
  // Queues a copy of `bytes` from device memory `src` into the slot's buffer `staging`.
  virtual void download(int slot, void* staging, const void* src, std::size_t bytes) = 0;
  // Blocks until every transfer queued for the slot so far is done (at once when none is).
  virtual void wait(int slot) = 0;
};

// Chunk size and thread count for one copy: chunks small enough that every thread gets about
// two (so mid-sized copies are parallel too), at least `kMinStagingChunk` (smaller transfers
// waste the link on per-copy overhead) and at most a slot.
struct StagingPlan {
  std::size_t chunk = 0;
  std::size_t chunks = 0;
  int threads = 1;
};
inline constexpr std::size_t kMinStagingChunk = std::size_t{1} << 20;
StagingPlan plan_staging(std::size_t bytes, std::size_t slot_bytes, int threads);

// Host `src` -> device `dst`, `bytes` bytes, through `slots` (pinned buffers of `slot_bytes`
// each). Returns once every chunk has been read from `src` and its upload queued, with the
// number of threads that took part (fewer than asked when the pool was busy with another copy;
// 0 for no bytes). The first exception any thread meets is rethrown (after the other threads
// have stopped).
int pipeline_to_device(StagingTransport& transport, const std::vector<void*>& slots,
                       std::size_t slot_bytes, void* dst, const void* src, std::size_t bytes,
                       int threads, CopyThreadPool& pool);
// Device `src` -> host `dst`; returns when `dst` holds the data, with the threads that took part.
int pipeline_to_host(StagingTransport& transport, const std::vector<void*>& slots,
                     std::size_t slot_bytes, void* dst, const void* src, std::size_t bytes,
                     int threads, CopyThreadPool& pool);

// --- choosing the setup from the machine --------------------------------------------------
// A staged host-to-device copy moves each byte three times through host memory (read from the
// pageable source, written into a slot, read again by the DMA engine): the threads must copy
// about as fast as the link, but every thread beyond that takes memory bandwidth the engine's
// reads need, and where that balance lies differs from host to host. A rule on the threads'
// memcpy rate alone (stop at 0.8 x the link) took the best count on two hosts and half the best
// on a third (bench_memory, 2 MiB slots: H100 host, 42.7 GB/s staged; H200 host, 45.1; the
// 4 x H100 host, 34.3 with the 6 threads it chose against 40.6 with 12). So the staged copy
// itself is timed for each thread count tried.
//
// The thread count for a link of `link_gbs` (pinned host-to-device), given `staged_gbs(threads)`:
// the measured rate of a staged pageable copy with that many threads (<= 0 when it could not be
// measured). Tries 1, 2, 3, 4, 6, 8, 12, 16, ... up to `max_threads`, ascending; a count is
// taken only when it beats the best so far by more than kStagingGain (fewer threads leave cores
// to the data pipeline), the search stops after two steps in a row that are not taken, or once
// the best reaches kStagingLinkShare of the link (nothing is left to gain).
inline constexpr double kStagingGain = 0.03;
inline constexpr double kStagingLinkShare = 0.95;
int choose_staging_threads(double link_gbs, const std::function<double(int)>& staged_gbs,
                           int max_threads);
// Slots that take at most 64 us to cross the link: the largest power of two from 1 MiB to
// 8 MiB whose transfer is no longer. The DMA engine idles until the first slot is full and the
// last slot crosses after every memcpy is done, so a copy pays about a slot's fill time (at the
// rate of one of several threads sharing the host's memory, a few GB/s) plus a slot's transfer
// time; per-transfer overhead (a few us) pays for slots that are too small. Rounding up (the
// first rule: 4 MiB on a 55 GB/s link) lost to rounding down on the H100 (12 threads: 79 % of
// pinned with 4 MiB slots, 86 % with 2 MiB); the H200 sweep had 2 and 4 MiB equal.
inline constexpr double kStagingSlotSeconds = 64e-6;
std::size_t choose_staging_slot_bytes(double link_gbs);

// memcpy with up to `threads` threads of `pool` (pieces taken dynamically, so every byte is
// copied whatever the split); small copies stay on the calling thread.
// Returns the number of threads that took part (fewer when the pool was busy).
int parallel_memcpy(void* dst, const void* src, std::size_t bytes, int threads,
                    CopyThreadPool& pool);

}  // namespace ember::detail
