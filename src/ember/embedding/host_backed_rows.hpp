// A rank's embedding rows in host memory, with a device cache of some of them (the "host"
// storage location, storage_config.hpp). The embedding's kernels run on the cache's columns
// unchanged: a batch's table rows are mapped to cache slots first. This class holds the memory
// and moves rows; the directory (cache_directory.hpp) decides which.
//
// Tiers and moves (docs/embedding.md, "Tables larger than the GPU"):
//   host table   every row's columns, pinned (the device reads and writes it directly, zero
//                copy) or pageable (host threads gather rows into a pinned buffer, one copy);
//   cache        cache_rows rows of every column at the place, plus an i32 row -> slot map;
//   staging      two buffers of a batch's fetched rows and index lists (a batch prepared ahead
//                and one running), and one of its evicted rows.
// On a CUDA place, batches are prepared and staged on a stream of their own (of a higher priority
// than the compute stream's: the host waits for its first kernels), written back on another, and
// installed in order on the caller's (compute) stream; nothing waits on the host
// except a pageable table's write-backs, absorbed before the next rows are read from it. On a
// host place (CPU ranks) the same steps run at once on separate host buffers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ember/core/stream.hpp"
#include "ember/embedding/cache_directory.hpp"
#include "ember/embedding/storage_config.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::embedding {

struct StagingLayout;

// The columns of one table row: its values (the dtype is a parameter: f32 today, 16-bit storage
// later), the optimizer's state columns (f32) and the step the row is current to (Global,
// LazyGlobal).
struct RowColumns {
  DType value_dtype = DType::F32;
  std::int64_t width = 0;
  int states = 0;
  bool steps = false;

  int count() const { return 1 + states + (steps ? 1 : 0); }
  bool is_steps(int column) const { return steps && column == count() - 1; }
  DType dtype(int column) const;
  std::int64_t elements(int column) const { return is_steps(column) ? 1 : width; }
  std::int64_t bytes(int column) const;
  std::int64_t row_bytes() const;
};

// What a host-backed table did since it was made (take differences over a window).
struct CacheStats {
  std::int64_t batches = 0;
  std::int64_t lookups = 0, hits = 0;  // distinct existing rows of the batches; those cached
  std::int64_t fetched = 0, new_rows = 0, written_back = 0;
  std::int64_t bytes_to_device = 0, bytes_to_host = 0;
  std::int64_t prefetched = 0;  // batches whose rows were staged ahead (prefetch)
  double prefetch_ms = 0;       // host time preparing batches ahead
  // Host time waiting for the device to hand back a batch's distinct rows before they can be
  // planned (part of prefetch_ms for a prefetched batch).
  double readback_ms = 0;
  // Time steps waited for their rows: on a GPU the compute stream's wait for the staged rows
  // (measured with events, counted once the events are done); on the host, preparing a batch
  // that was not prefetched.
  double exposed_ms = 0;
};

class HostBackedRows {
 public:
  // `materialized`: every row exists from the start (one-hot; the caller fills the host table);
  // otherwise rows are made by the batches that first use them.
  HostBackedRows(const RowColumns& columns, std::int64_t rows, std::int64_t cache_rows, Place place,
                 HostMemory memory, EvictionPolicy policy, bool materialized, std::string where,
                 std::string raise_hint);
  ~HostBackedRows();
  HostBackedRows(const HostBackedRows&) = delete;
  HostBackedRows& operator=(const HostBackedRows&) = delete;

  const RowColumns& columns() const { return columns_; }
  Place place() const { return place_; }
  // The host table's memory (pageable when pinning it failed).
  HostMemory host_memory() const { return memory_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cache_rows() const { return directory_.slots(); }
  CacheDirectory& directory() { return directory_; }
  const CacheDirectory& directory() const { return directory_; }
  CacheStats& stats() { return stats_; }
  // The cache's column at the place: [cache_rows, width] values and states, [cache_rows] steps.
  const Tensor& cache(int column) const { return cache_[static_cast<std::size_t>(column)]; }
  // The host table's column: rows x bytes(column), row-major, host memory.
  std::byte* host(int column) const;
  // Batches are prepared and staged here on CUDA; null on the host.
  StreamHandle prepare_stream() const { return prepare_.handle(); }

  // ---- one batch ----
  // Queues the plan's fetched rows and index lists towards the place (prepare stream); the plan
  // keeps one of the two staging buffers until start_new_rows() or abandon().
  void stage(CachePlan& plan);
  // On `stream`: waits for the staged rows, writes the victims back to the host, puts the fetched
  // rows in their slots and maps them; replay_to >= 0 (Global) brings them to that step first.
  void install(const CachePlan& plan, StreamHandle stream, std::int64_t replay_to);
  // On `stream`: start(rows, slots, count) starts the plan's new rows (lists at the place), then
  // they are mapped; the plan's staging buffer is free again.
  using StartRows =
      std::function<void(const std::int64_t* rows, const std::int64_t* slots, std::int64_t count)>;
  void start_new_rows(CachePlan& plan, const StartRows& start, StreamHandle stream);
  // A plan that will not run (after install() or before): its staging buffer is free again.
  void abandon(CachePlan& plan, StreamHandle stream);
  // rows[i] = the slot of table row rows[i] (-1: none) for i < *count (bound when null).
  void map_to_slots(std::int64_t* rows, std::int64_t bound, const std::int64_t* count,
                    StreamHandle stream) const;
  // Global: step t's update (t = 1, 2, ...), which replays use.
  void record_step(std::int64_t t, const optim::UpdateStep& u, StreamHandle stream);
  const optim::UpdateStep* steps_at_place() const;
  // Harvests finished stall measurements into stats().exposed_ms.
  void collect_timings();

  // ---- the whole table (snapshots, saving, loading) ----
  // Writes every cached row back and empties the cache (waits for it).
  void flush(StreamHandle stream);
  // After it the host table is up to date for every row not cached (write-backs done).
  void settle(StreamHandle stream);
  // Runs work(columns, count, stream) on host rows `rows` in chunks at the place: the rows are
  // fetched into a staging buffer (columns[c]: count x bytes(c) at the place) and written back.
  using RowWork = std::function<void(std::byte* const* columns, std::int64_t count, StreamHandle)>;
  void update_host_rows(std::span<const std::int64_t> rows, const RowWork& work,
                        StreamHandle stream);
  // Copies rows (cached or not) into out[c] (rows.size() x bytes(c), host memory); waits.
  void read_rows(std::span<const std::int64_t> rows, std::span<std::byte* const> out,
                 StreamHandle stream);

 private:
  struct Staging;
  void allocate_host(std::int64_t rows);
  bool on_device() const { return place_.is_cuda(); }
  Staging& free_staging();
  void absorb_writebacks();
  void grow(Tensor& buffer, std::size_t bytes, Place place, StreamHandle user = nullptr);
  void write_back(std::span<const std::int64_t> rows, const std::int64_t* slots_at_place,
                  const std::int64_t* rows_at_place, std::span<const std::int64_t> slots,
                  StreamHandle stream);
  void gather_host(std::span<const std::int64_t> rows, std::byte* out,
                   const StagingLayout& layout) const;

  RowColumns columns_;
  std::int64_t rows_;
  Place place_;
  HostMemory memory_;
  std::string where_;
  CacheDirectory directory_;
  CacheStats stats_;
  std::vector<AllocationPtr> host_;  // per column
  std::vector<Tensor> cache_;        // per column, at the place
  Tensor slot_map_;                  // i32 [rows] at the place
  std::array<std::unique_ptr<Staging>, 2> staging_;
  // Write-backs: the evicted rows' columns at the place, and (pageable) their pinned copy with
  // the rows it goes to, absorbed into the host table before the table is read again.
  Tensor evicted_, evicted_host_;
  std::vector<std::int64_t> evicted_rows_;
  std::int64_t evicted_count_ = 0;
  bool evicted_pending_ = false;
  // Global's steps, for replays: the host list and its copy at the place (grown by doubling).
  std::vector<optim::UpdateStep> steps_;
  Tensor steps_at_place_;
  Stream prepare_, writeback_;
  Event evicted_ready_, writeback_done_;
  // Whole-table work's chunks (saving, catching up): at the place and on the host (pinned).
  Tensor bulk_device_, bulk_host_;
  std::vector<std::pair<Event, Event>> stall_events_;  // (before, after) the wait for staged rows
  std::vector<bool> stall_pending_;                    // recorded, not yet counted
  std::size_t stall_next_ = 0;
};

}  // namespace ember::embedding
