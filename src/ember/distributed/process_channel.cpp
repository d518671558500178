#include "ember/distributed/process_channel.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

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

void ProcessChannel::all_gather_in_place(std::byte* buffer, const std::vector<std::int64_t>& counts,
                                         const std::vector<std::int64_t>& displs) {
  const auto n = static_cast<std::size_t>(size_);
  EMBER_CHECK(counts.size() == n && displs.size() == n,
              "a process channel's in-place all-gather of ", counts.size(), " pieces among ", n,
              " processes");
  if (comm_->comm == MPI_COMM_NULL || size_ == 1) return;
  // MPI counts in int: pieces are counted in whole blocks of a type as wide as every count and
  // displacement allows, so a piece may pass 2 GiB bytes (as long as its blocks do not).
  std::int64_t common = 0;
  for (std::size_t p = 0; p < n; ++p)
    common = std::gcd(common, std::gcd(counts[p], displs[p]));
  std::int64_t block = 1;
  for (const std::int64_t b : {16, 8, 4, 2})
    if (common % b == 0) {
      block = b;
      break;
    }
  std::vector<int> c(n), d(n);
  for (std::size_t p = 0; p < n; ++p) {
    if (counts[p] < 0 || displs[p] < 0 || counts[p] / block > std::numeric_limits<int>::max() ||
        displs[p] / block > std::numeric_limits<int>::max()) {
      EMBER_THROW("a process channel's in-place all-gather: process ", p, "'s piece of ", counts[p],
                  " bytes at ", displs[p], " is past MPI's int counts");
    }
    c[p] = static_cast<int>(counts[p] / block);
    d[p] = static_cast<int>(displs[p] / block);
  }
  MPI_Datatype type = MPI_BYTE;
  if (block > 1) EMBER_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(block), MPI_BYTE, &type));
  if (block > 1) EMBER_MPI_CHECK(MPI_Type_commit(&type));
  const int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, c.data(), d.data(),
                                type, comm_->comm);
  if (block > 1) MPI_Type_free(&type);
  EMBER_MPI_CHECK(rc);
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

void ProcessChannel::all_gather_in_place(std::byte*, const std::vector<std::int64_t>& counts,
                                         const std::vector<std::int64_t>& displs) {
  EMBER_CHECK(counts.size() == 1 && displs.size() == 1,
              "a process channel's in-place all-gather of ", counts.size(),
              " pieces in a job of one process");
}

#endif

ProcessChannel::ProcessChannel(std::unique_ptr<Comm> comm, int rank, int size)
    : comm_(std::move(comm)), rank_(rank), size_(size) {}

}  // namespace ember::distributed
