#include "ember/core/allocator.hpp"

namespace ember {

// TODO(issue 2): route CUDA and pinned places through the caching allocators.
Allocator& default_allocator(Place place) { return raw_allocator(place); }

}  // namespace ember
