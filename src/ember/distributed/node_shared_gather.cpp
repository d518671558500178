#include "ember/distributed/node_shared_gather.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/core/staged_copy.hpp"
#include "ember/distributed/mpi_check.hpp"
#include "ember/distributed/process_world.hpp"

namespace ember::distributed {

#if EMBER_WITH_MPI

// Two slots per process, used by batch parity: a process writes slot k % 2 of call k only after
// the barrier of call k - 1, which every process passes after reading call k - 2's pieces from
// that slot. So one barrier per call suffices.
namespace {

// Free bytes of the file system that backs MPI's shared windows on this machine: /dev/shm
// (OpenMPI's osc_sm_backing_directory on Linux), else TMPDIR or /tmp.
std::int64_t shared_memory_free_bytes() {
  std::vector<std::string> dirs = {"/dev/shm"};
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0')
    dirs.emplace_back(tmp);
  dirs.emplace_back("/tmp");
  for (const std::string& dir : dirs) {
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) == 0)
      return static_cast<std::int64_t>(fs.f_bavail) * static_cast<std::int64_t>(fs.f_frsize);
  }
  return 0;
}

}  // namespace

struct NodeSharedGather::Window {
  MPI_Comm node = MPI_COMM_NULL;
  std::int64_t room_bytes = -1;  // cap on the machine's window bytes; below 0, the free space
  bool unusable = false;         // no room once: every later call says so too
  MPI_Win win = MPI_WIN_NULL;
  std::int64_t slot_bytes = 0;   // capacity of each of the two slots of each process
  std::vector<std::byte*> base;  // per process: the start of its two slots
  std::int64_t calls = 0;

  void free_window() {
    if (win != MPI_WIN_NULL) {
      MPI_Win_unlock_all(win);
      MPI_Win_free(&win);
    }
    base.clear();
    slot_bytes = 0;
  }

  // Collective: every process asks for the same size (the largest piece of the call). False
  // where the machine has no room for it (decided by all processes together).
  bool grow(std::int64_t bytes, int size) {
    free_window();
    // Whole MiB, with room to spare, so that multi-hot batches of varying size grow it rarely.
    const std::int64_t want = ((bytes + bytes / 4) + (1 << 20) - 1) / (1 << 20) * (1 << 20);
    const std::int64_t needed = 2 * want * size;
    const std::int64_t room = room_bytes >= 0 ? room_bytes : shared_memory_free_bytes();
    int fits = needed <= room ? 1 : 0;
    EMBER_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, node));
    if (fits == 0) {
      unusable = true;
      EMBER_LOG_WARN(
          "key exchange: its shared memory would take {} MiB on this machine ({} processes, two "
          "batches of keys each), more than is free ({} MiB here, /dev/shm or TMPDIR); the keys "
          "go by MPI instead, which is slower (a larger /dev/shm, e.g. docker run --shm-size, "
          "brings it back)",
          needed >> 20, size, room >> 20);
      return false;
    }
    std::byte* mine = nullptr;
    EMBER_MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(2 * want), 1, MPI_INFO_NULL, node,
                                            &mine, &win));
    EMBER_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    base.assign(static_cast<std::size_t>(size), nullptr);
    for (int p = 0; p < size; ++p) {
      MPI_Aint seg = 0;
      int unit = 0;
      void* at = nullptr;
      EMBER_MPI_CHECK(MPI_Win_shared_query(win, p, &seg, &unit, &at));
      base[static_cast<std::size_t>(p)] = static_cast<std::byte*>(at);
    }
    slot_bytes = want;
    return true;
  }
};

std::unique_ptr<NodeSharedGather> NodeSharedGather::open(bool wanted, std::int64_t room_bytes) {
  const ProcessWorld w = process_world();
  if (!w.mpi || w.size <= 1) return nullptr;
  auto window = std::make_unique<Window>();
  EMBER_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &window->node));
  int node_size = 0, node_rank = 0;
  EMBER_MPI_CHECK(MPI_Comm_size(window->node, &node_size));
  EMBER_MPI_CHECK(MPI_Comm_rank(window->node, &node_rank));
  // Every process must take the same way: all on one machine (in the world's order) and all
  // asking for it, or none uses the window.
  int all_local = wanted && node_size == w.size && node_rank == w.rank ? 1 : 0;
  EMBER_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all_local, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (all_local == 0) {
    MPI_Comm_free(&window->node);
    return nullptr;
  }
  window->room_bytes = room_bytes;
  return std::unique_ptr<NodeSharedGather>(new NodeSharedGather(std::move(window), w.rank, w.size));
}

NodeSharedGather::~NodeSharedGather() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  window_->free_window();
  if (window_->node != MPI_COMM_NULL) MPI_Comm_free(&window_->node);
}

bool NodeSharedGather::all_gather_in_place(std::byte* buffer,
                                           const std::vector<std::int64_t>& counts,
                                           const std::vector<std::int64_t>& displs) {
  const auto n = static_cast<std::size_t>(size_);
  EMBER_CHECK(counts.size() == n && displs.size() == n, "a shared-memory all-gather of ",
              counts.size(), " pieces among ", n, " processes");
  Window& w = *window_;
  if (w.unusable) return false;
  const std::int64_t largest = *std::max_element(counts.begin(), counts.end());
  if (largest > w.slot_bytes) {
    // Every process sees the same counts, so all grow at this call; the barrier orders the old
    // slots' last reads before their release.
    EMBER_MPI_CHECK(MPI_Barrier(w.node));
    if (!w.grow(largest, size_)) return false;
  }
  const std::int64_t slot = (w.calls++ % 2) * w.slot_bytes;
  const auto me = static_cast<std::size_t>(rank_);
  detail::parallel_memcpy(w.base[me] + slot, buffer + displs[me],
                          static_cast<std::size_t>(counts[me]));
  EMBER_MPI_CHECK(MPI_Win_sync(w.win));
  EMBER_MPI_CHECK(MPI_Barrier(w.node));
  EMBER_MPI_CHECK(MPI_Win_sync(w.win));
  for (std::size_t p = 0; p < n; ++p) {
    if (p == me || counts[p] == 0) continue;
    detail::parallel_memcpy(buffer + displs[p], w.base[p] + slot,
                            static_cast<std::size_t>(counts[p]));
  }
  return true;
}

#else

struct NodeSharedGather::Window {};

std::unique_ptr<NodeSharedGather> NodeSharedGather::open(bool, std::int64_t) {
  return nullptr;
}

NodeSharedGather::~NodeSharedGather() = default;

bool NodeSharedGather::all_gather_in_place(std::byte*, const std::vector<std::int64_t>&,
                                           const std::vector<std::int64_t>&) {
  EMBER_THROW("a shared-memory all-gather in a build without MPI");
}

#endif

NodeSharedGather::NodeSharedGather(std::unique_ptr<Window> window, int rank, int size)
    : window_(std::move(window)), rank_(rank), size_(size) {}

}  // namespace ember::distributed
