#include <array>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "ember/core/allocator.hpp"
#include "ember/core/caching_allocators.hpp"
#include "ember/core/error.hpp"

namespace ember {

namespace {
constexpr int kMaxDevices = 64;

bool read_caching_enabled() {
  const char* env = std::getenv("EMBER_ALLOCATOR");
  if (env == nullptr || *env == '\0') return true;
  const std::string_view value(env);
  if (value == "raw") return false;
  if (value == "caching") return true;
  EMBER_THROW_AS(ConfigError, "EMBER_ALLOCATOR='", value,
                 "' is not understood: use 'caching' (the default) or 'raw'");
}
}  // namespace

bool caching_allocators_enabled() {
  static const bool enabled = read_caching_enabled();
  return enabled;
}

CachingDeviceAllocator& caching_device_allocator(int device) {
  EMBER_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device,
              " is out of range [0, ", kMaxDevices, ")");
  require_cuda_device(device, "the caching device allocator");
  // Never destroyed: memory may be returned during static destruction, and freeing segments at
  // exit would race the CUDA runtime's own teardown.
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<CachingDeviceAllocator*, kMaxDevices> allocators{};
  std::call_once(once[device], [device] {
    allocators[device] =
        new CachingDeviceAllocator(make_cuda_device_backend(device), Place::cuda(device));
  });
  return *allocators[device];
}

CachingPinnedAllocator& caching_pinned_allocator() {
  require_cuda_device(0, "the caching pinned allocator");
  static CachingPinnedAllocator* allocator = new CachingPinnedAllocator(make_cuda_pinned_backend());
  return *allocator;
}

Allocator& default_allocator(Place place) {
  if (caching_allocators_enabled()) {
    if (place.is_cuda()) return caching_device_allocator(place.device());
    if (place.kind() == PlaceKind::Pinned) return caching_pinned_allocator();
  }
  return raw_allocator(place);
}

}  // namespace ember
