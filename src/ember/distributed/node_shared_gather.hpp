// An in-place all-gather between processes of one machine through memory they share (an MPI-3
// shared window): each process copies its piece in, all meet at a barrier, and each copies the
// others' pieces out, both over the copy threads. MPI's own all-gather moves bytes through its
// shared-memory transport one fragment at a time on the calling thread, at about 2 GB/s on the
// 2026 GPU hosts: the key exchange of one process per GPU ran at that pace and held the GPUs to
// it (issue 14). Several MPI channels at once, each on its own thread, were slower still there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ember::distributed {

class NodeSharedGather {
 public:
  // Made by every process of the job in the same order (collective, in a job of several
  // processes). Null where the processes are not all on one machine, where any process passes
  // `wanted` false, where the build has no MPI, or in a job of one process.
  // `room_bytes` caps the shared memory the window may take on the machine (all processes'
  // slots together); below 0, the free space of the file system MPI maps it from (/dev/shm,
  // else TMPDIR or /tmp) at each growth.
  static std::unique_ptr<NodeSharedGather> open(bool wanted = true, std::int64_t room_bytes = -1);
  ~NodeSharedGather();
  NodeSharedGather(const NodeSharedGather&) = delete;
  NodeSharedGather& operator=(const NodeSharedGather&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // As ProcessChannel::all_gather_in_place: process p's counts[p] bytes at displs[p] of
  // `buffer`, this process's own already in place; every process passes the same counts. The
  // shared memory grows (a collective step, taken by every process at once, since all have the
  // counts) when a piece outgrows it. False, on every process alike, where the machine lacks
  // the room for it (a container's small /dev/shm, where a mapping past the free space would
  // end the process at its first touch): nothing is moved, the caller moves the pieces another
  // way, and so do all later calls (a warning says why, once).
  bool all_gather_in_place(std::byte* buffer, const std::vector<std::int64_t>& counts,
                           const std::vector<std::int64_t>& displs);

 private:
  struct Window;
  NodeSharedGather(std::unique_ptr<Window> window, int rank, int size);
  std::unique_ptr<Window> window_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace ember::distributed
