// The caching device allocator's placement against a plain model of its policy: best fit on
// (size, address), the split and merge rules, segment sizes, and the growth of expandable
// segments. The allocator splits and merges in place where the order of its free set allows
// (caching_blocks.hpp: the rest of a split keeps the tree node of the block it came from, a
// merged block the node of its free neighbour); the model has no such shortcut, so any block
// placed differently, or any size or cache figure that differs, is a fault of the shortcut.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "core/fake_device_backend.hpp"
#include "ember/core/caching_device_allocator.hpp"
#include "ember/core/expandable_segments.hpp"
#include "support/test_support.hpp"

namespace ember {
namespace {

using testing::fake_stream;
using testing::FakeDeviceBackend;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * 1024;
constexpr std::size_t kGranule = 2 * MiB;

// One pool (small or large) of one stream.
class PoolModel {
 public:
  explicit PoolModel(bool growing) : growing_(growing) {}

  // Where the allocator must place a request rounded to `size`; `fresh` is the pointer the
  // allocator returned, used only to learn where new memory lies. Returns the block's address
  // and records it as handed out.
  std::uintptr_t allocate(std::size_t size, std::uintptr_t fresh) {
    auto best = blocks_.end();
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      if (!it->second.free || it->second.size < size) continue;
      if (best == blocks_.end() || it->second.size < best->second.size) best = it;
    }
    if (best == blocks_.end()) best = new_memory(size, fresh);
    Block& b = best->second;
    const std::size_t rest = b.size - size;
    const bool at_end = growing_ && best->first + b.size == base_ + mapped_;
    const bool small = size <= CachingDeviceAllocator::kSmallRequest;
    const bool split = (small || at_end) ? rest >= CachingDeviceAllocator::kRoundBytes
                                         : rest > CachingDeviceAllocator::kLargeSplitRemainder;
    if (split) {
      blocks_[best->first + size] = {rest, true, b.segment};
      b.size = size;
    }
    b.free = false;
    return best->first;
  }

  std::size_t size_of(std::uintptr_t p) const { return blocks_.at(p).size; }

  void free(std::uintptr_t p) {
    auto it = blocks_.find(p);
    it->second.free = true;
    auto next = std::next(it);
    if (next != blocks_.end() && next->second.free && next->second.segment == it->second.segment &&
        it->first + it->second.size == next->first) {
      it->second.size += next->second.size;
      blocks_.erase(next);
    }
    if (it != blocks_.begin()) {
      auto prev = std::prev(it);
      if (prev->second.free && prev->second.segment == it->second.segment &&
          prev->first + prev->second.size == it->first) {
        prev->second.size += it->second.size;
        blocks_.erase(it);
      }
    }
  }

  std::size_t cached() const {
    std::size_t n = 0;
    for (const auto& [p, b] : blocks_)
      n += b.free ? b.size : 0;
    return n;
  }
  std::size_t largest_free() const {
    std::size_t n = 0;
    for (const auto& [p, b] : blocks_)
      n = std::max(n, b.free ? b.size : 0);
    return n;
  }
  std::size_t reserved() const { return reserved_; }

 private:
  struct Block {
    std::size_t size;
    bool free;
    int segment;
  };

  std::map<std::uintptr_t, Block>::iterator new_memory(std::size_t size, std::uintptr_t fresh) {
    if (!growing_) {
      // An ordinary segment: the allocator's pointer is its start.
      const std::size_t segment = CachingDeviceAllocator::segment_size(size);
      reserved_ += segment;
      return blocks_.insert({fresh, Block{segment, true, ++segments_}}).first;
    }
    if (mapped_ == 0) base_ = fresh;  // the first growth learns where the reservation lies
    auto last = blocks_.empty() ? blocks_.end() : std::prev(blocks_.end());
    const bool end_free = last != blocks_.end() && last->second.free;
    const std::size_t needed = end_free ? size - last->second.size : size;
    const std::size_t step = detail::ExpandableSegments::kMinGrowth;
    const std::size_t more = (std::max(needed, step) + kGranule - 1) / kGranule * kGranule;
    reserved_ += more;
    if (end_free) {
      last->second.size += more;
      mapped_ += more;
      return last;
    }
    auto it = blocks_.insert({base_ + mapped_, Block{more, true, 0}}).first;
    mapped_ += more;
    return it;
  }

  bool growing_;
  std::map<std::uintptr_t, Block> blocks_;
  int segments_ = 0;
  std::size_t reserved_ = 0;
  std::uintptr_t base_ = 0;  // growing: the segment's start and its mapped bytes
  std::size_t mapped_ = 0;
};

// Sizes that repeat (ties between equal free blocks, splits that leave equal rests) and sizes
// that do not.
std::size_t request(std::mt19937_64& rng) {
  static const std::size_t kRepeated[] = {1,       512,         1000,    4 * KiB,       64 * KiB,
                                          1 * MiB, 1 * MiB + 1, 3 * MiB, 12 * MiB - 512};
  switch (rng() % 4) {
    case 0:
    case 1:
      return kRepeated[rng() % (sizeof kRepeated / sizeof kRepeated[0])];
    case 2:
      return 1 + rng() % (256 * KiB);
    default:
      return 1 + rng() % (16 * MiB);
  }
}

void run_against_model(bool expandable) {
  auto rng = testing::make_rng(expandable ? 1 : 0);
  auto owned = std::make_unique<FakeDeviceBackend>();
  FakeDeviceBackend* fake = owned.get();
  fake->set_capacity(std::size_t{8} << 30);
  if (expandable) fake->enable_virtual_memory(kGranule);
  CachingDeviceAllocator::Options options;
  options.expandable_segments = expandable;
  CachingDeviceAllocator a(std::move(owned), Place::cuda(0), options);
  ASSERT_EQ(a.expandable_segments(), expandable);

  PoolModel small(expandable), large(expandable);
  auto pool_for = [&](std::size_t rounded) -> PoolModel& {
    return rounded <= CachingDeviceAllocator::kSmallRequest ? small : large;
  };
  struct Live {
    std::uintptr_t p;
    std::size_t rounded;
  };
  std::vector<Live> live;
  for (int op = 0; op < 6000; ++op) {
    if (live.empty() || rng() % 100 < 55) {
      const std::size_t n = request(rng);
      const std::size_t rounded = CachingDeviceAllocator::round_size(n);
      const auto p = reinterpret_cast<std::uintptr_t>(a.allocate(n, fake_stream(0)));
      PoolModel& m = pool_for(rounded);
      ASSERT_EQ(p, m.allocate(rounded, p)) << "request " << n << " at op " << op;
      ASSERT_EQ(a.allocated_size(reinterpret_cast<void*>(p)), m.size_of(p)) << "op " << op;
      live.push_back({p, rounded});
    } else {
      const std::size_t i = rng() % live.size();
      const Live l = live[i];
      live[i] = live.back();
      live.pop_back();
      a.deallocate(reinterpret_cast<void*>(l.p), 0);
      pool_for(l.rounded).free(l.p);
    }
    if (op % 25 == 0) {
      const auto s = a.stats();
      ASSERT_EQ(s.cached_bytes, static_cast<std::int64_t>(small.cached() + large.cached()))
          << "op " << op;
      ASSERT_EQ(s.largest_free_block,
                static_cast<std::int64_t>(std::max(small.largest_free(), large.largest_free())));
      ASSERT_EQ(s.reserved_bytes.current,
                static_cast<std::int64_t>(small.reserved() + large.reserved()));
    }
  }
  for (const Live& l : live)
    a.deallocate(reinterpret_cast<void*>(l.p), 0);
  const auto s = a.stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.cached_bytes, s.reserved_bytes.current);
}

TEST(CachingAllocatorPolicyModel, OrdinarySegmentsPlaceEveryBlockAsTheModel) {
  run_against_model(false);
}

TEST(CachingAllocatorPolicyModel, ExpandableSegmentsPlaceEveryBlockAsTheModel) {
  run_against_model(true);
}

}  // namespace
}  // namespace ember
