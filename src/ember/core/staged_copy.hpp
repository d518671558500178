// Copies between pageable host memory and a device through pinned staging buffers.
//
// A copy from pageable memory makes the driver stage it through its own small pinned buffer,
// one piece at a time with a synchronisation each: about a seventh of what the link can do.
// Here the host copies into one of two pinned chunks (with several threads: one core cannot
// keep up with the link) while the DMA engine drains the other, so the link stays busy. Each
// device has its own pair of chunks, guarded by events so a chunk is refilled only once its
// previous transfer has finished. copy_bytes() takes this path for large pageable copies.
#pragma once

#include <cstddef>

#include "ember/core/device.hpp"

namespace ember::detail {

// Pageable copies of at least this many bytes go through the staging chunks.
inline constexpr std::size_t kStagingThreshold = std::size_t{4} << 20;
inline constexpr std::size_t kStagingChunk = std::size_t{8} << 20;

// Copies host `src` to `dst` on `device`, queued on `stream`. The call returns once `src` has
// been read (it may be reused); with `wait` it also waits for the device copy to finish.
void staged_host_to_device(void* dst, int device, const void* src, std::size_t bytes,
                           StreamHandle stream, bool wait);
// Copies `src` on `device` to host `dst` after the work queued on `stream`; returns when `dst`
// holds the data.
void staged_device_to_host(void* dst, const void* src, int device, std::size_t bytes,
                           StreamHandle stream);

// memcpy with up to copy_threads() threads for large sizes.
void parallel_memcpy(void* dst, const void* src, std::size_t bytes);
// Threads parallel_memcpy uses: EMBER_COPY_THREADS, else half the cores up to 8.
int copy_threads();

}  // namespace ember::detail
