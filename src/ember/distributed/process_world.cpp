#include "ember/distributed/process_world.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>

#include "ember/core/error.hpp"
#include "ember/core/runtime_options.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/distributed/mpi_check.hpp"

namespace ember::distributed {

namespace {

std::mutex world_mutex;
ProcessWorld joined_world;  // guarded by world_mutex; mpi == false until joined

}  // namespace

bool launched_by_mpi() {
  return RuntimeOptions::get().launcher_world_size() > 0;
}

ProcessWorld process_world() {
  std::lock_guard<std::mutex> lock(world_mutex);
  return joined_world;
}

std::string describe_process() {
  const ProcessWorld w = process_world();
  if (w.size <= 1) return "";
  return cat("process ", w.rank, " of ", w.size);
}

#if EMBER_WITH_MPI

ProcessWorld join_mpi_world() {
  std::lock_guard<std::mutex> lock(world_mutex);
  if (joined_world.mpi) return joined_world;
  int initialized = 0;
  EMBER_MPI_CHECK(MPI_Initialized(&initialized));
  int provided = MPI_THREAD_MULTIPLE;
  if (!initialized) {
    EMBER_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  } else {
    EMBER_MPI_CHECK(MPI_Query_thread(&provided));
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    EMBER_THROW("the MPI library serves only one thread at a time (thread level ", provided,
                "); Ember's ranks of one process talk to MPI from their own threads and need "
                "MPI_THREAD_MULTIPLE (OpenMPI and MPICH provide it)");
  }
  ProcessWorld w;
  EMBER_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank));
  EMBER_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w.size));
  w.mpi = true;
  joined_world = w;
  return w;
}

std::vector<std::int64_t> all_gather_processes(const std::vector<std::int64_t>& mine) {
  const ProcessWorld w = process_world();
  if (!w.mpi || w.size == 1) return mine;
  std::int64_t length = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(w.size));
  EMBER_MPI_CHECK(
      MPI_Allgather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, MPI_COMM_WORLD));
  for (int p = 0; p < w.size; ++p) {
    if (lengths[static_cast<std::size_t>(p)] != length) {
      EMBER_THROW("all_gather_processes: process ", w.rank, " gives ", length,
                  " values but process ", p, " gives ", lengths[static_cast<std::size_t>(p)]);
    }
  }
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(w.size));
  EMBER_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(length), MPI_INT64_T, all.data(),
                                static_cast<int>(length), MPI_INT64_T, MPI_COMM_WORLD));
  return all;
}

namespace {

// Every process's bytes, in process order.
std::vector<std::vector<char>> gather_bytes(const void* data, std::size_t bytes) {
  const ProcessWorld w = process_world();
  const std::vector<std::int64_t> sizes = all_gather_processes({static_cast<std::int64_t>(bytes)});
  std::vector<int> counts(static_cast<std::size_t>(w.size)), offsets(counts.size());
  std::int64_t total = 0;
  for (std::size_t p = 0; p < counts.size(); ++p) {
    EMBER_CHECK(total + sizes[p] <= std::numeric_limits<int>::max(),
                "gathering over processes: more than 2 GiB");
    counts[p] = static_cast<int>(sizes[p]);
    offsets[p] = static_cast<int>(total);
    total += sizes[p];
  }
  std::vector<char> all(static_cast<std::size_t>(std::max<std::int64_t>(total, 1)));
  EMBER_MPI_CHECK(MPI_Allgatherv(data, static_cast<int>(bytes), MPI_BYTE, all.data(), counts.data(),
                                 offsets.data(), MPI_BYTE, MPI_COMM_WORLD));
  std::vector<std::vector<char>> out;
  for (std::size_t p = 0; p < counts.size(); ++p) {
    out.emplace_back(all.begin() + offsets[p], all.begin() + offsets[p] + counts[p]);
  }
  return out;
}

}  // namespace

std::vector<double> all_gather_processes_f64(const std::vector<double>& mine) {
  const ProcessWorld w = process_world();
  if (!w.mpi || w.size == 1) return mine;
  std::vector<double> all;
  for (const auto& part : gather_bytes(mine.data(), mine.size() * sizeof(double))) {
    EMBER_CHECK(part.size() == mine.size() * sizeof(double),
                "all_gather_processes: processes give different counts of values");
    const auto* d = reinterpret_cast<const double*>(part.data());
    all.insert(all.end(), d, d + mine.size());
  }
  return all;
}

std::vector<float> concat_processes(const std::vector<float>& mine) {
  const ProcessWorld w = process_world();
  if (!w.mpi || w.size == 1) return mine;
  std::vector<float> all;
  for (const auto& part : gather_bytes(mine.data(), mine.size() * sizeof(float))) {
    std::vector<float> values(part.size() / sizeof(float));
    if (!values.empty()) std::memcpy(values.data(), part.data(), values.size() * sizeof(float));
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

std::vector<std::string> all_gather_process_strings(const std::string& mine) {
  const ProcessWorld w = process_world();
  if (!w.mpi || w.size == 1) return {mine};
  std::vector<std::string> all;
  for (const auto& part : gather_bytes(mine.data(), mine.size()))
    all.emplace_back(part.begin(), part.end());
  return all;
}

void barrier_processes() {
  if (process_world().mpi) EMBER_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

std::string first_process_failure(const std::string& mine) {
  const ProcessWorld w = process_world();
  if (!w.mpi || w.size == 1) return mine;
  const auto all = gather_bytes(mine.data(), mine.size());
  for (std::size_t p = 0; p < all.size(); ++p) {
    if (!all[p].empty()) return cat("process ", p, ": ", std::string(all[p].begin(), all[p].end()));
  }
  return "";
}

std::string broadcast_from_process_0(const std::string& text) {
  const ProcessWorld w = process_world();
  if (!w.mpi || w.size == 1) return text;
  std::int64_t length = static_cast<std::int64_t>(text.size());
  EMBER_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  std::string out = w.rank == 0 ? text : std::string(static_cast<std::size_t>(length), '\0');
  EMBER_MPI_CHECK(MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD));
  return out;
}

void abort_processes(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (process_world().mpi) MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

#else

ProcessWorld join_mpi_world() {
  EMBER_THROW_AS(ConfigError, "this build of Ember has no MPI, so it cannot join the ",
                 RuntimeOptions::get().launcher_world_size(),
                 " processes of an MPI launch (install libopenmpi-dev and rebuild)");
}

std::vector<std::int64_t> all_gather_processes(const std::vector<std::int64_t>& mine) {
  return mine;
}

std::vector<double> all_gather_processes_f64(const std::vector<double>& mine) {
  return mine;
}

std::vector<float> concat_processes(const std::vector<float>& mine) {
  return mine;
}

std::string broadcast_from_process_0(const std::string& text) {
  return text;
}

std::vector<std::string> all_gather_process_strings(const std::string& mine) {
  return {mine};
}

void barrier_processes() {}

std::string first_process_failure(const std::string& mine) {
  return mine;
}

void abort_processes(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

#endif

}  // namespace ember::distributed
