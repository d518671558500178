// A stream pool's table of live blocks (caching_live_blocks.hpp): open addressing with deletion
// by shifting back, checked against std::map over random inserts and removals, with addresses
// chosen to collide.
#include "ember/core/caching_live_blocks.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "support/test_support.hpp"

namespace ember {
namespace {

using detail::CachingBlock;
using detail::LiveBlocks;

TEST(CachingLiveBlocks, EmptyTableFindsNothing) {
  LiveBlocks live;
  EXPECT_EQ(live.find(reinterpret_cast<void*>(0x1000)), nullptr);
  EXPECT_EQ(live.extract(reinterpret_cast<void*>(0x1000)), nullptr);
  EXPECT_EQ(live.size(), 0u);
}

TEST(CachingLiveBlocks, MatchesAReferenceUnderRandomUse) {
  auto rng = testing::make_rng();
  // Block structs stay where they are (std::deque): the table keeps pointers to them.
  std::deque<CachingBlock> structs;
  LiveBlocks live;
  std::map<char*, CachingBlock*> ref;
  // Addresses on 512-byte boundaries in a small window (many share a home slot) and, now and
  // then, far away.
  char* const base = reinterpret_cast<char*>(std::uintptr_t{1} << 40);
  auto address = [&] {
    const std::uintptr_t slot = rng() % 4 == 0 ? rng() % (std::uintptr_t{1} << 30) : rng() % 3000;
    return base + slot * 512;
  };
  for (int op = 0; op < 200000; ++op) {
    const auto action = rng() % 8;
    if (action < 4) {
      char* p = address();
      if (ref.count(p) != 0) continue;
      structs.emplace_back();
      CachingBlock* b = &structs.back();
      b->ptr = p;
      live.reserve_one();
      live.insert(b);
      ref[p] = b;
    } else if (action < 7 && !ref.empty()) {
      auto it = ref.lower_bound(address());
      if (it == ref.end()) it = ref.begin();
      ASSERT_EQ(live.extract(it->first), it->second);
      ASSERT_EQ(live.find(it->first), nullptr);
      ref.erase(it);
    } else {
      char* p = address();
      auto it = ref.find(p);
      ASSERT_EQ(live.find(p), it == ref.end() ? nullptr : it->second);
      if (it == ref.end()) {
        ASSERT_EQ(live.extract(p), nullptr);
      }
    }
    ASSERT_EQ(live.size(), ref.size());
    if (op % 20000 == 0) {
      // Every block is still found after all the shifting back.
      for (const auto& [p, b] : ref)
        ASSERT_EQ(live.find(p), b);
      std::size_t visited = 0;
      live.for_each([&](CachingBlock* b) {
        ++visited;
        EXPECT_EQ(ref.at(b->ptr), b);
      });
      ASSERT_EQ(visited, ref.size());
    }
  }
  // Emptied in an order of its own, the table finds nothing.
  std::vector<char*> order;
  for (const auto& [p, b] : ref)
    order.push_back(p);
  std::shuffle(order.begin(), order.end(), rng);
  for (char* p : order)
    ASSERT_NE(live.extract(p), nullptr);
  EXPECT_EQ(live.size(), 0u);
  for (char* p : order)
    EXPECT_EQ(live.find(p), nullptr);
}

}  // namespace
}  // namespace ember
