// TEMPORARY stand-in for ember::Arena (src/ember/core/arena.hpp, being written on another
// branch), with the subset of its interface the network layer uses: standalone reservations,
// named contiguous blocks, one allocation, 256-byte aligned starts and zero-filled blocks.
// When the arena lands on main this file becomes `using ember::Arena; ...` and nothing else in
// the network layer changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/core/allocation.hpp"
#include "ember/core/dtype.hpp"
#include "ember/core/place.hpp"

namespace ember::nn::compat {

inline constexpr std::size_t kArenaAlignment = 256;

struct ArenaState;

class Reservation {
 public:
  Reservation() = default;
  std::size_t offset() const;  // bytes from the start of the allocation
  const AllocationPtr& allocation() const;
  bool allocated() const;
  std::int64_t numel() const;
  DType dtype() const;
  explicit operator bool() const { return state_ != nullptr; }

 private:
  friend class Arena;
  friend class ArenaBlock;
  Reservation(std::shared_ptr<ArenaState> s, std::size_t i) : state_(std::move(s)), index_(i) {}
  std::shared_ptr<ArenaState> state_;
  std::size_t index_ = 0;
};

struct ArenaRegion {
  AllocationPtr allocation;
  std::size_t offset = 0;
  std::size_t bytes = 0;
  DType dtype = DType::F32;
  std::int64_t numel = 0;
  void* data = nullptr;
};

class ArenaBlock {
 public:
  ArenaBlock() = default;
  Reservation reserve(std::vector<std::int64_t> dims, DType dtype);
  std::size_t size() const;
  ArenaRegion region() const;

 private:
  friend class Arena;
  ArenaBlock(std::shared_ptr<ArenaState> s, std::size_t i) : state_(std::move(s)), index_(i) {}
  std::shared_ptr<ArenaState> state_;
  std::size_t index_ = 0;
};

class Arena {
 public:
  explicit Arena(Place place);
  Place place() const;
  Reservation reserve(std::vector<std::int64_t> dims, DType dtype);
  ArenaBlock block(const std::string& name);
  void allocate();
  bool allocated() const;
  std::size_t total_bytes() const;

 private:
  std::shared_ptr<ArenaState> state_;
};

}  // namespace ember::nn::compat
