// One block of memory at one place, owned or borrowed, shared by every tensor that views it
// (the model of PaddlePaddle's early "Majel" design: a view is allocation + offset + shape).
#pragma once

#include <cstddef>
#include <memory>

#include "ember/core/allocator.hpp"
#include "ember/core/place.hpp"

namespace ember {

class Allocation {
 public:
  // Owned memory from the default allocator of `place`, for use on that device's current stream.
  static std::shared_ptr<Allocation> create(Place place, std::size_t bytes);
  // Owned memory from a given allocator; `stream` matters to stream-ordered allocators only.
  static std::shared_ptr<Allocation> create(Allocator& allocator, std::size_t bytes,
                                            StreamHandle stream = nullptr);
  // Memory someone else owns; Ember never frees it. `keep_alive`, if given, is held for as long
  // as the allocation lives (e.g. the mapping of a memory-mapped file).
  static std::shared_ptr<Allocation> borrow(void* data, std::size_t bytes, Place place,
                                            std::shared_ptr<const void> keep_alive = nullptr);

  ~Allocation();
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  void* data() const { return data_; }
  std::byte* bytes() const { return static_cast<std::byte*>(data_); }
  std::size_t size() const { return size_; }
  Place place() const { return place_; }
  bool owned() const { return allocator_ != nullptr; }
  // The allocator that will free the memory; nullptr when borrowed.
  Allocator* allocator() const { return allocator_; }

  // Tells the allocator that this memory is also used on `stream` until it is freed, so it is not
  // handed out again before the work queued there by then is done (PyTorch's record_stream;
  // `stream` must outlive the allocation).
  void record_stream(StreamHandle stream);
  // Tells the allocator that the work queued on `stream` so far uses this memory (an event is
  // recorded now; `stream` may go away afterwards). See Allocator::record_use.
  void record_use(StreamHandle stream);

 private:
  Allocation(void* data, std::size_t size, Place place, Allocator* allocator,
             std::shared_ptr<const void> keep_alive);

  void* data_;
  std::size_t size_;
  Place place_;
  Allocator* allocator_;
  std::shared_ptr<const void> keep_alive_;
};

using AllocationPtr = std::shared_ptr<Allocation>;

}  // namespace ember
