#include "ember/network/arena_compat.hpp"

#include "ember/core/error.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::nn::compat {

struct ArenaState {
  struct Entry {
    std::int64_t numel = 0;
    DType dtype = DType::F32;
    std::size_t offset = 0;
  };
  struct Block {
    std::string name;
    std::vector<std::size_t> members;
    DType dtype = DType::F32;
    bool typed = false;
    std::size_t offset = 0, bytes = 0;
  };
  struct Item {
    bool is_block;
    std::size_t index;
  };
  Place place;
  std::vector<Entry> entries;
  std::vector<Block> blocks;
  std::vector<Item> items;
  AllocationPtr allocation;
  bool allocated = false;

  static std::size_t align(std::size_t n) {
    return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  }
  std::size_t lay_out() {
    std::size_t at = 0;
    auto place_entry = [&](std::size_t i) {
      Entry& e = entries[i];
      e.offset = at = align(at);
      at += static_cast<std::size_t>(e.numel) * dtype_size(e.dtype);
    };
    for (const Item& item : items) {
      if (!item.is_block) {
        place_entry(item.index);
        continue;
      }
      Block& b = blocks[item.index];
      b.offset = at = align(at);
      for (std::size_t m : b.members) place_entry(m);
      b.bytes = at - b.offset;
    }
    return align(at);
  }
  std::size_t add(const std::vector<std::int64_t>& dims, DType dtype) {
    EMBER_CHECK(!allocated, "arena at ", place, ": cannot reserve after allocate()");
    std::int64_t numel = 1;
    for (std::int64_t d : dims) {
      EMBER_CHECK(d >= 0, "arena: negative dimension in a reservation");
      numel *= d;
    }
    entries.push_back({numel, dtype, 0});
    return entries.size() - 1;
  }
  void check_allocated() const {
    EMBER_CHECK(allocated, "arena at ", place, ": offsets are only known after allocate()");
  }
};

std::size_t Reservation::offset() const {
  state_->check_allocated();
  return state_->entries[index_].offset;
}
const AllocationPtr& Reservation::allocation() const {
  state_->check_allocated();
  return state_->allocation;
}
bool Reservation::allocated() const { return state_ != nullptr && state_->allocated; }
std::int64_t Reservation::numel() const { return state_->entries[index_].numel; }
DType Reservation::dtype() const { return state_->entries[index_].dtype; }

Reservation ArenaBlock::reserve(std::vector<std::int64_t> dims, DType dtype) {
  auto& b = state_->blocks[index_];
  EMBER_CHECK(!b.typed || b.dtype == dtype, "arena block '", b.name, "' holds ",
              dtype_name(b.dtype), " tensors, not ", dtype_name(dtype));
  const std::size_t i = state_->add(dims, dtype);
  b.typed = true;
  b.dtype = dtype;
  b.members.push_back(i);
  return Reservation(state_, i);
}

std::size_t ArenaBlock::size() const { return state_->blocks[index_].members.size(); }

ArenaRegion ArenaBlock::region() const {
  state_->check_allocated();
  const auto& b = state_->blocks[index_];
  ArenaRegion r;
  r.allocation = state_->allocation;
  r.offset = b.offset;
  r.bytes = b.bytes;
  r.dtype = b.dtype;
  r.numel = static_cast<std::int64_t>(b.bytes / dtype_size(b.dtype));
  r.data = b.bytes == 0 ? nullptr : state_->allocation->bytes() + b.offset;
  return r;
}

Arena::Arena(Place place) : state_(std::make_shared<ArenaState>()) { state_->place = place; }
Place Arena::place() const { return state_->place; }

Reservation Arena::reserve(std::vector<std::int64_t> dims, DType dtype) {
  const std::size_t i = state_->add(dims, dtype);
  state_->items.push_back({false, i});
  return Reservation(state_, i);
}

ArenaBlock Arena::block(const std::string& name) {
  for (std::size_t i = 0; i < state_->blocks.size(); ++i) {
    if (state_->blocks[i].name == name) return ArenaBlock(state_, i);
  }
  EMBER_CHECK(!state_->allocated, "arena: cannot create block '", name, "' after allocate()");
  state_->blocks.push_back({name, {}, DType::F32, false, 0, 0});
  state_->items.push_back({true, state_->blocks.size() - 1});
  return ArenaBlock(state_, state_->blocks.size() - 1);
}

void Arena::allocate() {
  EMBER_CHECK(!state_->allocated, "arena at ", state_->place, ": allocate() called twice");
  const std::size_t total = state_->lay_out();
  state_->allocation = Allocation::create(state_->place, std::max<std::size_t>(total, 1));
  state_->allocated = true;
  // Zero everything once: blocks (and their padding) must start zeroed.
  Tensor bytes = Tensor::from_allocation(state_->allocation, DType::U8,
                                         {static_cast<std::int64_t>(total)});
  if (total > 0) ops::fill(bytes, 0.0);
}

bool Arena::allocated() const { return state_->allocated; }
std::size_t Arena::total_bytes() const { return state_->lay_out(); }

}  // namespace ember::nn::compat
