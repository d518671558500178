#include "ember/distributed/process_channel.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "ember/core/error.hpp"
#include "ember/distributed/mpi_check.hpp"
#include "ember/distributed/process_world.hpp"

namespace ember::distributed {

#if EMBER_WITH_MPI

struct ProcessChannel::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
};

std::unique_ptr<ProcessChannel> ProcessChannel::open() {
  const ProcessWorld w = process_world();
  auto comm = std::make_unique<Comm>();
  if (w.mpi) EMBER_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm->comm));
  return std::unique_ptr<ProcessChannel>(new ProcessChannel(std::move(comm), w.rank, w.size));
}

ProcessChannel::~ProcessChannel() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_->comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_->comm);
}

std::vector<std::vector<std::byte>> ProcessChannel::all_gather(const std::vector<std::byte>& mine) {
  std::vector<std::byte> bytes;
  std::vector<std::int64_t> offsets;
  all_gather(mine, bytes, offsets);
  std::vector<std::vector<std::byte>> out(offsets.size() - 1);
  for (std::size_t p = 0; p < out.size(); ++p)
    out[p].assign(bytes.begin() + offsets[p], bytes.begin() + offsets[p + 1]);
  return out;
}

void ProcessChannel::all_gather(const std::vector<std::byte>& mine, std::vector<std::byte>& bytes,
                                std::vector<std::int64_t>& out_offsets) {
  if (comm_->comm == MPI_COMM_NULL || size_ == 1) {
    bytes.assign(mine.begin(), mine.end());
    out_offsets = {0, static_cast<std::int64_t>(mine.size())};
    return;
  }
  const auto n = static_cast<std::size_t>(size_);
  std::int64_t length = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lengths(n);
  EMBER_MPI_CHECK(
      MPI_Allgather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, comm_->comm));
  std::vector<int> counts(n), offsets(n);
  std::int64_t total = 0;
  for (std::size_t p = 0; p < n; ++p) {
    if (total + lengths[p] > std::numeric_limits<int>::max()) {
      EMBER_THROW("a process channel's all-gather of ", total + lengths[p],
                  " bytes: more than MPI's 2 GiB per call");
    }
    counts[p] = static_cast<int>(lengths[p]);
    offsets[p] = static_cast<int>(total);
    total += lengths[p];
  }
  bytes.resize(static_cast<std::size_t>(std::max<std::int64_t>(total, 1)));
  EMBER_MPI_CHECK(MPI_Allgatherv(mine.data(), static_cast<int>(length), MPI_BYTE, bytes.data(),
                                 counts.data(), offsets.data(), MPI_BYTE, comm_->comm));
  bytes.resize(static_cast<std::size_t>(total));
  out_offsets.resize(n + 1);
  for (std::size_t p = 0; p < n; ++p)
    out_offsets[p] = offsets[p];
  out_offsets[n] = total;
}

#else

struct ProcessChannel::Comm {};

std::unique_ptr<ProcessChannel> ProcessChannel::open() {
  return std::unique_ptr<ProcessChannel>(new ProcessChannel(std::make_unique<Comm>(), 0, 1));
}

ProcessChannel::~ProcessChannel() = default;

std::vector<std::vector<std::byte>> ProcessChannel::all_gather(const std::vector<std::byte>& mine) {
  return {mine};
}

void ProcessChannel::all_gather(const std::vector<std::byte>& mine, std::vector<std::byte>& bytes,
                                std::vector<std::int64_t>& offsets) {
  bytes.assign(mine.begin(), mine.end());
  offsets = {0, static_cast<std::int64_t>(mine.size())};
}

#endif

ProcessChannel::ProcessChannel(std::unique_ptr<Comm> comm, int rank, int size)
    : comm_(std::move(comm)), rank_(rank), size_(size) {}

}  // namespace ember::distributed
