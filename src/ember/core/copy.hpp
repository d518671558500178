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
//
// Large copies between pageable host memory and a device go through pinned staging buffers
// (see staged_copy.hpp); they read a pageable source before returning, and a copy to pageable
// memory has always finished when the call returns. Pinned memory from the caching pinned
// allocator that a queued copy uses is recorded as in use on the stream, so it is not handed
// out again before the copy is done.
void copy_bytes(void* dst, Place dst_place, const void* src, Place src_place, std::size_t bytes,
                StreamHandle stream = nullptr);

// Sets `bytes` at `dst` to zero. Device memory is cleared on `stream` (or the device's current
// stream, then waited for when no stream is given).
void zero_bytes(void* dst, Place place, std::size_t bytes, StreamHandle stream = nullptr);

}  // namespace ember
