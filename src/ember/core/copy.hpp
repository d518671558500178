// Moving bytes between places.
#pragma once

#include <cstddef>

#include "ember/core/device.hpp"
#include "ember/core/place.hpp"

namespace ember {

// Copies `bytes` from `src` (at `src_place`) to `dst` (at `dst_place`), any two places.
// With no stream the copy has finished when the call returns. With a stream it is queued there
// and the caller must keep both buffers alive until the stream reaches it; host-to-host copies
// are always done at once.
void copy_bytes(void* dst, Place dst_place, const void* src, Place src_place, std::size_t bytes,
                StreamHandle stream = nullptr);

}  // namespace ember
