// A communicator of its own between the processes of a job, for exchanges that another thread
// than the main one makes while the main thread goes on with its own (the input pipeline's key
// exchange, on its collector thread). MPI orders collectives per communicator, so two threads
// must not share one: each channel duplicates the world's.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace ember::distributed {

class ProcessChannel {
 public:
  // Made by every process, in the same order with respect to the other process-level calls
  // (it duplicates the world's communicator, a collective call). In a world of one process (no
  // MPI) the channel is local.
  static std::unique_ptr<ProcessChannel> open();
  ~ProcessChannel();
  ProcessChannel(const ProcessChannel&) = delete;
  ProcessChannel& operator=(const ProcessChannel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Every process's bytes, in process order (sizes may differ). One thread per channel; every
  // process makes the same calls in the same order. More than 2 GiB in all is an error.
  std::vector<std::vector<std::byte>> all_gather(const std::vector<std::byte>& mine);
  // The same back to back into `bytes` (process p's are [offsets[p], offsets[p + 1])), whose
  // memory is reused from call to call: an exchange per batch faults in no new pages once the
  // sizes are reached, and the messages are not copied apart.
  void all_gather(const std::vector<std::byte>& mine, std::vector<std::byte>& bytes,
                  std::vector<std::int64_t>& offsets);
  // Every process's piece of one buffer into its place, where each process already holds its
  // own: process p's counts[p] bytes at displs[p] (sizes known to every process), with no copy
  // in or out of a message. A piece over 2 GiB, or the whole past 2^63, is an error.
  void all_gather_in_place(std::byte* buffer, const std::vector<std::int64_t>& counts,
                           const std::vector<std::int64_t>& displs);

 private:
  struct Comm;
  ProcessChannel(std::unique_ptr<Comm> comm, int rank, int size);

  std::unique_ptr<Comm> comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace ember::distributed
