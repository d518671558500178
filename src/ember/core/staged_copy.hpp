// Copies between pageable host memory and a device through pinned staging slots.
//
// A copy from pageable memory makes the driver stage it through its own small pinned buffer,
// one piece at a time with a synchronisation each: about a seventh of what the link can do.
// Here several host threads (one core cannot keep up with a PCIe 5 link) copy chunks into a
// ring of pinned slots while the DMA engine drains the slots filled before; each slot has an
// event, so it is refilled only once its previous transfer is done (staging_pipeline.hpp has
// the scheme). Each device has its own ring. copy_bytes() takes this path for large pageable
// copies.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ember/core/device.hpp"

namespace ember::detail {

// Pageable copies of at least this many bytes go through the staging slots.
inline constexpr std::size_t kStagingThreshold = std::size_t{4} << 20;

// The staging setup. Zero fields take the device's defaults, which come from the machine
// (staging_calibration): threads enough for the host's memcpy to outrun the link, slots of
// at most 64 us of the link each, threads + 4 slots (so that the DMA engine has filled slots to
// drain while every thread fills one).
struct StagingConfig {
  std::size_t slot_bytes = 0;
  int slots = 0;
  int threads = 0;
};
// When nothing could be measured: what a PCIe 5 link (55 GB/s) gets from the rule above.
inline constexpr std::size_t kDefaultStagingSlot = std::size_t{2} << 20;

// What a device's default setup was chosen from, measured once per process at the device's
// first staged copy (some 100 ms): the pinned host-to-device bandwidth and the staged pageable
// host-to-device rate by thread count (choose_staging_threads in staging_pipeline.hpp).
// EMBER_COPY_THREADS, when set, fixes the threads instead.
struct StagingCalibration {
  bool measured = false;  // false: the measurement failed; the fixed fallbacks are in force
  double link_gbs = 0;    // pinned host-to-device, GB/s
  std::vector<std::pair<int, double>> staged_gbs;  // (threads, GB/s) as tried
  int threads = 0;
  std::size_t slot_bytes = 0;
  std::string note;  // why not measured, or what fixed the threads
};
const StagingCalibration& staging_calibration(int device);
// One line: the figures and the choice.
std::string describe(const StagingCalibration& calibration);

// The setup in force on `device`, defaults filled in.
StagingConfig staging_config(int device = 0);
// Changes the setup (benchmarks compare setups); the slots of every device are reallocated at
// their next use. Waits for nothing: copies already running keep their slots.
void set_staging_config(const StagingConfig& config);

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
// Threads the staged copies and parallel_memcpy use by default: EMBER_COPY_THREADS, else half
// the cores up to 8.
int copy_threads();

}  // namespace ember::detail
