#include "ember/core/staged_copy.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ember/core/allocator.hpp"
#include "ember/core/copy_thread_pool.hpp"
#include "ember/core/error.hpp"
#include "ember/core/per_device.hpp"
#include "ember/core/runtime_options.hpp"
#include "ember/core/staging_pipeline.hpp"
#include "ember/core/stream.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ember::detail {

int copy_threads() {
  static const int threads = [] {
    if (const int n = RuntimeOptions::get().copy_threads(); n > 0) return n;
    return std::clamp(omp_get_num_procs() / 2, 1, 8);
  }();
  return threads;
}

void parallel_memcpy(void* dst, const void* src, std::size_t bytes) {
  parallel_memcpy(dst, src, bytes, copy_threads(), CopyThreadPool::shared());
}

namespace {

std::mutex g_config_mutex;
StagingConfig g_config;  // as set; zeros mean defaults
unsigned g_config_generation = 1;

StagingCalibration measure_staging(int device);

// The fixed setup used when nothing could be measured: half the cores up to 8, 2 MiB slots.
StagingCalibration fallback_calibration(std::string why) {
  StagingCalibration c;
  c.threads = copy_threads();
  c.slot_bytes = kDefaultStagingSlot;
  c.note = std::move(why);
  return c;
}

StagingConfig filled(StagingConfig c, int device) {
  if (c.slot_bytes == 0 || c.threads <= 0) {
    const StagingCalibration& cal = staging_calibration(device);
    if (c.slot_bytes == 0) c.slot_bytes = cal.slot_bytes;
    if (c.threads <= 0) c.threads = cal.threads;
  }
  if (c.slots <= 0) c.slots = c.threads + 4;
  return c;
}

}  // namespace

const StagingCalibration& staging_calibration(int device) {
  static PerDevice<StagingCalibration> all(
      [](int d) { return std::make_unique<StagingCalibration>(measure_staging(d)); });
  return all.get(device);
}

std::string describe(const StagingCalibration& c) {
  std::string text;
  if (c.measured) {
    text = cat("pinned host->device ", c.link_gbs, " GB/s; staged pageable host->device");
    for (const auto& [threads, gbs] : c.staged_gbs)
      text += cat(" ", threads, ":", gbs);
    text += " GB/s; ";
  } else {
    text = "not measured; ";
  }
  text += cat(c.threads, " copy threads, slots of ", c.slot_bytes >> 20, " MiB");
  if (!c.note.empty()) text += cat(" (", c.note, ")");
  return text;
}

StagingConfig staging_config(int device) {
  StagingConfig c;
  {
    std::lock_guard<std::mutex> lock(g_config_mutex);
    c = g_config;
  }
  return filled(c, device);
}

void set_staging_config(const StagingConfig& config) {
  EMBER_CHECK(config.slot_bytes == 0 || config.slot_bytes >= kMinStagingChunk, "staging slots of ",
              config.slot_bytes, " bytes are smaller than the ", kMinStagingChunk,
              "-byte minimum chunk");
  std::lock_guard<std::mutex> lock(g_config_mutex);
  g_config = config;
  ++g_config_generation;
}

#if EMBER_WITH_CUDA

namespace {

// One device's ring of pinned slots, each with the event of its last transfer.
struct Staging {
  std::mutex mutex;  // one staged copy per device at a time
  unsigned generation = 0;
  StagingConfig config;
  std::vector<void*> slots;
  std::vector<Event> events;

  // Makes the ring match the current setup (under `mutex`).
  void refresh(int device) {
    StagingConfig wanted;
    unsigned generation_now;
    {
      std::lock_guard<std::mutex> lock(g_config_mutex);
      wanted = g_config;
      generation_now = g_config_generation;
    }
    wanted = filled(wanted, device);
    if (generation == generation_now) return;
    if (!slots.empty() && wanted.slot_bytes == config.slot_bytes &&
        static_cast<int>(slots.size()) == wanted.slots) {
      config = wanted;
      generation = generation_now;
      return;
    }
    Allocator& pinned = raw_allocator(Place::pinned());
    std::vector<void*> new_slots;
    std::vector<Event> new_events;
    try {
      for (int k = 0; k < wanted.slots; ++k) {
        new_events.push_back(Event::create(device));
        new_slots.push_back(pinned.allocate(wanted.slot_bytes));
      }
    } catch (...) {
      for (void* p : new_slots)
        pinned.deallocate(p, wanted.slot_bytes);
      throw;
    }
    for (std::size_t k = 0; k < slots.size(); ++k) {
      events[k].synchronize();
      pinned.deallocate(slots[k], config.slot_bytes);
    }
    slots = std::move(new_slots);
    events = std::move(new_events);
    config = wanted;
    generation = generation_now;
  }
};

Staging& staging(int device) {
  static PerDevice<Staging> all([](int) { return std::make_unique<Staging>(); });
  return all.get(device);
}

// The slots' transfers on one stream, each slot's last one marked by its event.
class CudaTransport final : public StagingTransport {
 public:
  CudaTransport(std::vector<Event>& events, StreamHandle stream)
      : events_(events), stream_(stream) {}
  void upload(int slot, void* dst, const void* staging, std::size_t bytes) override {
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, staging, bytes, cudaMemcpyHostToDevice, stream_));
    events_[slot].record(stream_);
  }
  void download(int slot, void* staging, const void* src, std::size_t bytes) override {
    EMBER_CUDA_CHECK(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToHost, stream_));
    events_[slot].record(stream_);
  }
  void wait(int slot) override { events_[slot].synchronize(); }

 private:
  std::vector<Event>& events_;
  StreamHandle stream_;
};

// Runs the pipeline with each pool thread switched to `device` for the duration.
class DeviceTransport final : public StagingTransport {
 public:
  DeviceTransport(StagingTransport& inner, int device) : inner_(inner), device_(device) {}
  void upload(int slot, void* dst, const void* staging, std::size_t bytes) override {
    DeviceGuard guard(device_);
    inner_.upload(slot, dst, staging, bytes);
  }
  void download(int slot, void* staging, const void* src, std::size_t bytes) override {
    DeviceGuard guard(device_);
    inner_.download(slot, staging, src, bytes);
  }
  void wait(int slot) override { inner_.wait(slot); }

 private:
  StagingTransport& inner_;
  int device_;
};

}  // namespace

namespace {

// Runs `copy(transport, slots, slot_bytes, threads)` with the device's staging ring, one staged
// copy per device at a time.
template <typename Copy>
void with_staging(int device, StreamHandle stream, Copy&& copy) {
  DeviceGuard guard(device);
  Staging& s = staging(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.refresh(device);
  CudaTransport cuda(s.events, stream);
  DeviceTransport transport(cuda, device);
  copy(transport, s.slots, s.config.slot_bytes, s.config.threads);
}

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

// At most three quarters of the cores copy: the data pipeline's readers need some too.
int max_staging_threads() {
  return std::max(1, omp_get_num_procs() * 3 / 4);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The calibration's pinned slots and their events; each slot goes back once its last transfer
// is done.
struct CalibrationRing {
  Allocator& alloc;
  std::size_t slot_bytes;
  std::vector<void*> slots;
  std::vector<Event> events;
  CalibrationRing(Allocator& a, std::size_t bytes) : alloc(a), slot_bytes(bytes) {}
  CalibrationRing(const CalibrationRing&) = delete;
  CalibrationRing& operator=(const CalibrationRing&) = delete;
  ~CalibrationRing() {
    for (std::size_t k = 0; k < slots.size(); ++k) {
      try {
        events[k].synchronize();
      } catch (...) {
        // A failed device: its error reaches the caller through the measurement itself.
      }
      alloc.deallocate(slots[k], slot_bytes);
    }
  }
};

// Times the pinned link, then staged copies with each thread count tried, on `device` (see
// StagingCalibration).
StagingCalibration measure_on_device(int device) {
  constexpr std::size_t kLinkBytes = std::size_t{32} << 20;
  // Staged copies long enough for their start (the first slot's fill) and end (the last slot's
  // transfer) to weigh little, as in a batch's or a table's copy.
  constexpr std::size_t kStagedBytes = std::size_t{64} << 20;
  constexpr int kReps = 3;
  DeviceGuard guard(device);
  Allocator& pinned_alloc = raw_allocator(Place::pinned());
  Allocator& device_alloc = raw_allocator(Place::cuda(device));
  std::unique_ptr<void, std::function<void(void*)>> pinned(
      pinned_alloc.allocate(kLinkBytes), [&](void* p) { pinned_alloc.deallocate(p, kLinkBytes); });
  std::unique_ptr<void, std::function<void(void*)>> dev(
      device_alloc.allocate(kStagedBytes),
      [&](void* p) { device_alloc.deallocate(p, kStagedBytes); });
  std::memset(pinned.get(), 1, kLinkBytes);
  Stream stream = Stream::create(device);
  StagingCalibration c;
  std::vector<double> link;
  for (int r = 0; r <= kReps; ++r) {
    const auto t0 = Clock::now();
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dev.get(), pinned.get(), kLinkBytes, cudaMemcpyHostToDevice,
                                     stream.handle()));
    stream.synchronize();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r > 0) link.push_back(static_cast<double>(kLinkBytes) / s / 1e9);  // the first warms up
  }
  c.link_gbs = median(link);
  c.slot_bytes = choose_staging_slot_bytes(c.link_gbs);
  if (const int fixed = RuntimeOptions::get().copy_threads(); fixed > 0) {
    c.threads = fixed;
    c.note = "EMBER_COPY_THREADS";
    c.measured = true;
    return c;
  }
  // A ring for the most threads tried (threads + 4 slots, as in use), and a source larger than
  // the caches, each repetition reading a part not read before.
  const int max_threads = max_staging_threads();
  CalibrationRing ring(pinned_alloc, c.slot_bytes);
  for (int k = 0; k < max_threads + 4; ++k) {
    ring.events.push_back(Event::create(device));
    ring.slots.push_back(pinned_alloc.allocate(c.slot_bytes));
  }
  std::vector<char> pageable(kStagedBytes * kReps, 1);
  CudaTransport cuda(ring.events, stream.handle());
  DeviceTransport transport(cuda, device);
  auto rate = [&](int threads) {
    const std::vector<void*> ring_of(ring.slots.begin(), ring.slots.begin() + threads + 4);
    std::vector<double> v;
    for (int r = 0; r < kReps; ++r) {
      const auto t0 = Clock::now();
      const int ran = pipeline_to_device(transport, ring_of, c.slot_bytes, dev.get(),
                                         pageable.data() + kStagedBytes * r, kStagedBytes, threads,
                                         CopyThreadPool::shared());
      stream.synchronize();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (ran < threads) return -1.0;  // the pool was busy with another copy
      v.push_back(static_cast<double>(kStagedBytes) / s / 1e9);
    }
    const double gbs = median(v);
    c.staged_gbs.emplace_back(threads, gbs);
    return gbs;
  };
  c.threads = choose_staging_threads(c.link_gbs, rate, max_threads);
  c.measured = true;
  return c;
}

StagingCalibration measure_staging(int device) {
  try {
    return measure_on_device(device);
  } catch (const std::exception& e) {
    return fallback_calibration(cat("measurement failed: ", e.what()));
  }
}

}  // namespace

void staged_host_to_device(void* dst, int device, const void* src, std::size_t bytes,
                           StreamHandle stream, bool wait) {
  with_staging(device, stream,
               [&](StagingTransport& transport, const std::vector<void*>& slots,
                   std::size_t slot_bytes, int threads) {
                 pipeline_to_device(transport, slots, slot_bytes, dst, src, bytes, threads,
                                    CopyThreadPool::shared());
               });
  if (wait) synchronize_stream(stream);
}

void staged_device_to_host(void* dst, const void* src, int device, std::size_t bytes,
                           StreamHandle stream) {
  with_staging(device, stream,
               [&](StagingTransport& transport, const std::vector<void*>& slots,
                   std::size_t slot_bytes, int threads) {
                 pipeline_to_host(transport, slots, slot_bytes, dst, src, bytes, threads,
                                  CopyThreadPool::shared());
               });
}

#else

namespace {
StagingCalibration measure_staging(int) {
  return fallback_calibration("no CUDA");
}
}  // namespace

void staged_host_to_device(void*, int, const void*, std::size_t, StreamHandle, bool) {
  throw_cuda_unavailable("a staged host-to-device copy");
}
void staged_device_to_host(void*, const void*, int, std::size_t, StreamHandle) {
  throw_cuda_unavailable("a staged device-to-host copy");
}

#endif

}  // namespace ember::detail
