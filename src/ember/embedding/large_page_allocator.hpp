// An allocator for the host-cache bookkeeping's large arrays (a record per table row and per
// cache slot, hundreds of MB at Criteo-Kaggle size), read and written at random: a batch touches
// a few rows in a million. With 4 KiB pages nearly every such access also misses the TLB; arrays
// of 2 MiB and more are mapped on their own and marked for transparent huge pages (Linux's
// madvise mode, the common default, gives them only on request), which took about a fifth off a
// pass of random reads over a 95 MB array on the development machine. Where the system has no
// huge pages the mapping simply stays in small pages.
//
// Elements are default-initialised (a vector's resize() leaves plain values such as ints
// unwritten; class types with default member initialisers still get them): arrays that grow by
// the batch and are then written whole need no second pass of zeros.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace ember::embedding {

template <class T>
class LargePageAllocator {
 public:
  using value_type = T;

  LargePageAllocator() = default;
  template <class U>
  LargePageAllocator(const LargePageAllocator<U>&) {}  // NOLINT: rebinding converts implicitly

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes));
    void* p =
        ::mmap(nullptr, mapped(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    (void)::madvise(p, mapped(bytes), MADV_HUGEPAGE);  // a hint: failing changes nothing
#endif
    return static_cast<T*>(p);
  }

  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) {
      ::operator delete(p);
    } else {
      (void)::munmap(p, mapped(bytes));
    }
  }

  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  template <class U>
  bool operator==(const LargePageAllocator<U>&) const {
    return true;
  }

 private:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static std::size_t mapped(std::size_t bytes) {
    return (bytes + kHugePage - 1) / kHugePage * kHugePage;
  }
};

}  // namespace ember::embedding
