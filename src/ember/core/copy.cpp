#include "ember/core/copy.hpp"

#include <cstring>

#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"

#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ember {

void copy_bytes(void* dst, Place dst_place, const void* src, Place src_place, std::size_t bytes,
                StreamHandle stream) {
  if (bytes == 0) return;
  EMBER_CHECK(dst != nullptr && src != nullptr, "copy_bytes of ", bytes,
              " bytes with a null pointer");
  if (dst_place.host_accessible() && src_place.host_accessible() &&
      !(dst_place.kind() == PlaceKind::Managed || src_place.kind() == PlaceKind::Managed)) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if EMBER_WITH_CUDA
  const int device = dst_place.is_cuda() ? dst_place.device()
                     : src_place.is_cuda() ? src_place.device() : 0;
  DeviceGuard guard(device);
  const StreamHandle s = stream != nullptr ? stream : current_stream(device);
  if (dst_place.is_cuda() && src_place.is_cuda() && dst_place.device() != src_place.device()) {
    EMBER_CUDA_CHECK(
        cudaMemcpyPeerAsync(dst, dst_place.device(), src, src_place.device(), bytes, s));
  } else {
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  }
  if (stream == nullptr) synchronize_stream(s);
#else
  (void)stream;
  throw_cuda_unavailable(("copy from " + src_place.to_string() + " to " + dst_place.to_string())
                             .c_str());
#endif
}

}  // namespace ember
