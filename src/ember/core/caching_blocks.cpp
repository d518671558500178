#include "ember/core/caching_blocks.hpp"

#include <algorithm>

namespace ember::detail {

CachingBlock* BlockPool::new_block_slow() {
  if (spare_ == nullptr) {
    constexpr std::size_t kChunk = 64;
    chunks_.push_back(std::make_unique<CachingBlock[]>(kChunk));
    CachingBlock* chunk = chunks_.back().get();
    for (std::size_t i = 0; i < kChunk; ++i) {
      chunk[i].next_spare = spare_;
      spare_ = &chunk[i];
    }
  }
  CachingBlock* b = spare_;
  if (b->set_node.empty()) b->set_node = node_maker_.extract(node_maker_.insert(b).first);
  spare_ = b->next_spare;
  b->next_spare = nullptr;
  return b;
}

void BlockPool::cache(CachingBlock* b) noexcept {
  b->set_node.value() = b;
  b->position = pool_of(b).insert(std::move(b->set_node)).position;
  b->cached = true;
}

void BlockPool::uncache(CachingBlock* b) noexcept {
  b->set_node = pool_of(b).extract(b->position);
  b->cached = false;
}

namespace {
// (size, ptr) < (b->size, b->ptr), as BlockLess orders.
bool key_before(std::size_t size, const char* ptr, const CachingBlock* b) {
  return size != b->size ? size < b->size : std::less<const char*>()(ptr, b->ptr);
}
bool key_after(std::size_t size, const char* ptr, const CachingBlock* b) {
  return size != b->size ? size > b->size : std::less<const char*>()(b->ptr, ptr);
}
}  // namespace

void BlockPool::rekey(CachingBlock* b, std::size_t size, char* ptr) noexcept {
  FreeSet& pool = pool_of(b);
  // Only the neighbour on the side the key moves to can come between: the other side is
  // ordered already.
  bool stays;
  if (key_before(size, ptr, b)) {
    stays = b->position == pool.begin() || key_after(size, ptr, *std::prev(b->position));
  } else {
    const auto next = std::next(b->position);
    stays = next == pool.end() || key_before(size, ptr, *next);
  }
  if (stays) {
    // The order of the set is the same with the new key: the node stays where it is.
    b->size = size;
    b->ptr = ptr;
    return;
  }
  uncache(b);
  b->size = size;
  b->ptr = ptr;
  cache(b);
}

CachingBlock* BlockPool::carve(CachingBlock* f, std::size_t size) {
  if (size_after_split(*f, size) == f->size) {
    uncache(f);
    return f;
  }
  CachingBlock* b = new_block();
  b->ptr = f->ptr;
  b->size = size;
  b->stream = f->stream;
  b->small = f->small;
  b->growing = f->growing;
  b->prev = f->prev;
  if (b->prev != nullptr) b->prev->next = b;
  b->next = f;
  f->prev = b;
  // `f` keeps the rest, and with it the end of a growing segment when it was there.
  rekey(f, f->size - size, f->ptr + size);
  return b;
}

void BlockPool::maybe_split(CachingBlock* b, std::size_t size) {
  if (size_after_split(*b, size) == b->size) return;
  const bool at_end = b->at_growing_end();
  CachingBlock* rest = new_block();
  rest->ptr = b->ptr + size;
  rest->size = b->size - size;
  rest->stream = b->stream;
  rest->small = b->small;
  rest->growing = b->growing;
  cache(rest);
  rest->prev = b;
  rest->next = b->next;
  if (b->next != nullptr) b->next->prev = rest;
  b->next = rest;
  b->size = size;
  if (at_end) b->growing->tail = rest;
}

void BlockPool::merge_and_cache(CachingBlock* b) noexcept {
  CachingBlock* p = b->prev;
  if (p != nullptr && !p->cached) p = nullptr;
  CachingBlock* n = b->next;
  if (n != nullptr && !n->cached) n = nullptr;
  if (p == nullptr && n == nullptr) {
    cache(b);
    return;
  }
  if (p == nullptr) {
    // The free block after `b` grows down over it.
    n->prev = b->prev;
    if (n->prev != nullptr) n->prev->next = n;
    const std::size_t size = n->size + b->size;
    char* ptr = b->ptr;
    recycle(b);
    rekey(n, size, ptr);
    return;
  }
  // The free block before `b` grows over it (and over the free block after it).
  CachingBlock* last = n != nullptr ? n : b;  // the last block merged
  std::size_t size = p->size + b->size;
  if (n != nullptr) {
    uncache(n);
    size += n->size;
  }
  if (last->at_growing_end()) last->growing->tail = p;
  p->next = last->next;
  if (p->next != nullptr) p->next->prev = p;
  if (n != nullptr) recycle(n);
  recycle(b);
  rekey(p, size, p->ptr);
}

std::size_t BlockPool::largest_free() const {
  std::size_t largest = 0;
  for (const FreeSet* pool : {&small_, &large_}) {
    for (const CachingBlock* b : *pool)
      largest = std::max(largest, b->size);
  }
  return largest;
}

std::size_t BlockPool::cached_total() const {
  std::size_t total = 0;
  for (const FreeSet* pool : {&small_, &large_}) {
    for (const CachingBlock* b : *pool)
      total += b->size;
  }
  return total;
}

}  // namespace ember::detail
