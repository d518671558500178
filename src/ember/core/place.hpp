// Where bytes live: host pageable, host pinned, host managed (CUDA unified memory), or CUDA
// device N. A small value type: comparable, hashable, printable, parseable.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace ember {

enum class PlaceKind : std::uint8_t { Host, Pinned, Managed, Cuda };

class Place {
 public:
  constexpr Place() = default;
  static constexpr Place host() { return Place(PlaceKind::Host, 0); }
  static constexpr Place pinned() { return Place(PlaceKind::Pinned, 0); }
  static constexpr Place managed() { return Place(PlaceKind::Managed, 0); }
  static constexpr Place cuda(int device = 0) { return Place(PlaceKind::Cuda, device); }

  // Parses "host" / "cpu", "pinned", "managed", "cuda" (device 0) and "cuda:N".
  static Place parse(std::string_view text);

  constexpr PlaceKind kind() const { return kind_; }
  // The CUDA device for Cuda places (and the device a Managed allocation prefers); 0 otherwise.
  constexpr int device() const { return device_; }
  constexpr bool is_cuda() const { return kind_ == PlaceKind::Cuda; }
  constexpr bool is_host() const { return kind_ == PlaceKind::Host; }
  // Host code may dereference pointers at this place.
  constexpr bool host_accessible() const { return kind_ != PlaceKind::Cuda; }
  // Memory at this place needs the CUDA runtime to allocate.
  constexpr bool needs_cuda() const { return kind_ != PlaceKind::Host; }

  std::string to_string() const;

  constexpr auto operator<=>(const Place&) const = default;

 private:
  constexpr Place(PlaceKind kind, int device) : kind_(kind), device_(device) {}
  PlaceKind kind_ = PlaceKind::Host;
  int device_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Place& place);

}  // namespace ember

template <>
struct std::hash<ember::Place> {
  std::size_t operator()(const ember::Place& p) const noexcept {
    return (static_cast<std::size_t>(p.kind()) << 16) ^ static_cast<std::size_t>(p.device());
  }
};
