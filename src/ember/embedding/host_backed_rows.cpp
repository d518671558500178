#include "ember/embedding/host_backed_rows.hpp"

#include <algorithm>
#include <cstring>

#include "ember/core/allocator.hpp"
#include "ember/core/copy.hpp"
#include "ember/core/error.hpp"
#include "ember/core/log.hpp"
#include "ember/embedding/embedding_kernels.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/embedding/staging_layout.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::embedding {

namespace {

constexpr std::size_t kAlign = 256;
// Rows per chunk of whole-table work (saving, catching up): 64 Ki rows, some 32-100 MB.
constexpr std::int64_t kChunkRows = 65536;
constexpr std::size_t kStallPairs = 8;
// The prepare stream's priority is above the compute stream's: the host waits for the distinct
// rows of the batch prepared ahead (SparseEmbedding::read_unique_rows) while the step before it
// runs; at equal priority the few small kernels that find them queue behind that step's kernels,
// and the host's bookkeeping would start only when the step is nearly over.
constexpr int kPreparePriority = kHostWaitPriority;

std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

template <class T>
T* at(const Tensor& buffer, std::size_t offset) {
  return reinterpret_cast<T*>(buffer.data<std::uint8_t>() + offset);
}

}  // namespace

DType RowColumns::dtype(int column) const {
  if (column == 0) return value_dtype;
  return is_steps(column) ? DType::I64 : DType::F32;
}

std::int64_t RowColumns::bytes(int column) const {
  return elements(column) * static_cast<std::int64_t>(dtype_size(dtype(column)));
}

std::int64_t RowColumns::row_bytes() const {
  std::int64_t total = 0;
  for (int c = 0; c < count(); ++c)
    total += bytes(c);
  return total;
}

struct HostBackedRows::Staging {
  Tensor upload;  // pinned (CUDA) or host: the lists, and the fetched rows of a pageable table
  Tensor device;  // at the place (on the host: `upload` itself)
  StagingLayout layout;
  Event staged;    // CUDA: the copies into `device` are done
  Event released;  // CUDA: the last use of `device` on the compute stream is done
  bool busy = false;
};

HostBackedRows::HostBackedRows(const RowColumns& columns, std::int64_t rows,
                               std::int64_t cache_rows, Place place, HostMemory memory,
                               EvictionPolicy policy, bool materialized, std::string where,
                               std::string raise_hint)
    : columns_(columns),
      rows_(rows),
      place_(place),
      memory_(place.is_cuda() ? memory : HostMemory::Pageable),
      where_(std::move(where)),
      directory_(rows, cache_rows, policy, materialized, where_, std::move(raise_hint)) {
  PlaceGuard guard(place_);
  allocate_host(rows);
  for (int c = 0; c < columns_.count(); ++c) {
    const Shape shape =
        columns_.is_steps(c) ? Shape{cache_rows} : Shape{cache_rows, columns_.width};
    cache_.push_back(Tensor::zeros(shape, columns_.dtype(c), place_));
  }
  slot_map_ = Tensor::full({std::max<std::int64_t>(rows, 1)}, -1, DType::I32, place_);
  for (auto& s : staging_)
    s = std::make_unique<Staging>();
  if (on_device()) {
    const int d = place_.device();
    prepare_ = Stream::create(d, kPreparePriority);
    writeback_ = Stream::create(d);
    evicted_ready_ = Event::create(d);
    writeback_done_ = Event::create(d);
    for (auto& s : staging_) {
      s->staged = Event::create(d);
      s->released = Event::create(d);
    }
    for (std::size_t i = 0; i < kStallPairs; ++i)
      stall_events_.emplace_back(Event::create(d, true), Event::create(d, true));
    stall_pending_.assign(kStallPairs, false);
  }
}

HostBackedRows::~HostBackedRows() {
  if (!on_device()) return;
  try {
    PlaceGuard guard(place_);
    prepare_.synchronize();
    writeback_.synchronize();
  } catch (...) {  // a destructor must not throw; the device is in trouble anyway
  }
}

void HostBackedRows::allocate_host(std::int64_t rows) {
  for (int c = 0; c < columns_.count(); ++c) {
    const auto bytes =
        static_cast<std::size_t>(std::max<std::int64_t>(rows, 1) * columns_.bytes(c));
    if (memory_ == HostMemory::Pinned) {
      try {
        host_.push_back(Allocation::create(raw_allocator(Place::pinned()), bytes));
        continue;
      } catch (const Error& e) {
        EMBER_LOG_WARN("{}: pinning the host table failed ({}); it stays in pageable memory",
                       where_, e.what());
        memory_ = HostMemory::Pageable;
        host_.clear();
        c = -1;  // start again, pageable
        continue;
      }
    }
    try {
      host_.push_back(Allocation::create(raw_allocator(Place::host()), bytes));
    } catch (const Error& e) {
      EMBER_THROW_AS(OutOfMemoryError, where_, ": cannot allocate the host table (", rows,
                     " rows x ", columns_.row_bytes(), " bytes = ",
                     format_bytes(static_cast<std::uint64_t>(rows * columns_.row_bytes())),
                     "): ", e.what());
    }
  }
}

std::byte* HostBackedRows::host(int column) const {
  return host_[static_cast<std::size_t>(column)]->bytes();
}

void HostBackedRows::grow(Tensor& buffer, std::size_t bytes, Place place, StreamHandle user) {
  if (buffer.defined() && static_cast<std::size_t>(buffer.numel()) >= bytes) return;
  // Rare (the buffers only grow): wait until nothing uses the old buffer any more.
  if (buffer.defined() && on_device()) synchronize_device(place_.device());
  buffer =
      Tensor::empty({static_cast<std::int64_t>(std::max<std::size_t>(bytes + bytes / 4, kAlign))},
                    DType::U8, place);
  // Device memory comes from the current (compute) stream's pool, which hands out a block freed
  // on the host while its kernels may still be queued: a buffer first written on another stream
  // (`user`) waits for them.
  if (place.is_cuda()) wait_for_stream(user, current_stream(place.device()), place.device());
}

HostBackedRows::Staging& HostBackedRows::free_staging() {
  for (auto& s : staging_) {
    if (!s->busy) return *s;
  }
  EMBER_THROW(where_,
              ": both staging buffers are in use (a plan was neither started nor abandoned)");
}

void HostBackedRows::absorb_writebacks() {
  if (!evicted_pending_) return;
  writeback_done_.synchronize();
  std::size_t offset = 0;
  for (int c = 0; c < columns_.count(); ++c) {
    kernels::on(Place::host())
        .move_rows(host(c), evicted_rows_.data(), at<std::byte>(evicted_host_, offset), nullptr,
                   evicted_count_, columns_.bytes(c), nullptr);
    offset += align_up(static_cast<std::size_t>(evicted_count_ * columns_.bytes(c)));
  }
  evicted_pending_ = false;
}

void HostBackedRows::gather_host(std::span<const std::int64_t> rows, std::byte* out,
                                 const StagingLayout& layout) const {
  for (int c = 0; c < columns_.count(); ++c) {
    kernels::on(Place::host())
        .move_rows(out + layout.data[static_cast<std::size_t>(c)], nullptr, host(c), rows.data(),
                   static_cast<std::int64_t>(rows.size()), columns_.bytes(c), nullptr);
  }
}

void HostBackedRows::stage(CachePlan& plan) {
  PlaceGuard guard(place_);
  EMBER_CHECK(plan.staging < 0, where_, ": a plan staged twice");
  Staging& st = free_staging();
  absorb_writebacks();
  const auto m = static_cast<std::int64_t>(plan.fetch_rows.size());
  const auto e = static_cast<std::int64_t>(plan.evict_rows.size());
  const auto k = static_cast<std::int64_t>(plan.new_rows.size());
  const StagingLayout l = StagingLayout::make(columns_, m, e, k);
  const bool zero_copy = on_device() && memory_ == HostMemory::Pinned;
  if (on_device()) prepare_.synchronize();  // the last copy out of st.upload is done
  grow(st.upload, zero_copy ? l.index_bytes : l.total,
       on_device() ? Place::pinned() : Place::host());
  if (on_device()) {
    grow(st.device, l.total, place_, prepare_.handle());
  } else {
    st.device = st.upload;
  }
  write_staging_lists(plan, l, at<std::byte>(st.upload, 0));
  if (!zero_copy) gather_host(plan.fetch_rows, at<std::byte>(st.upload, 0), l);
  if (on_device()) {
    const StreamHandle s = prepare_.handle();
    // st.device is free once its last plan is done on the compute stream and written back.
    st.released.block(s);
    writeback_done_.block(s);
    copy_bytes(st.device.data(), place_, st.upload.data(), Place::pinned(),
               zero_copy ? l.index_bytes : l.total, s);
    if (zero_copy) {
      for (int c = 0; c < columns_.count(); ++c) {
        kernels::on(place_).move_rows(at<std::byte>(st.device, l.data[static_cast<std::size_t>(c)]),
                                      nullptr, host(c), at<std::int64_t>(st.device, l.fetch_rows),
                                      m, columns_.bytes(c), s);
      }
    }
    st.staged.record(s);
  }
  st.layout = l;
  st.busy = true;
  plan.staging = &st == staging_[0].get() ? 0 : 1;
  stats_.fetched += m;
  stats_.bytes_to_device += m * columns_.row_bytes();
}

void HostBackedRows::write_back(std::span<const std::int64_t> rows,
                                const std::int64_t* slots_at_place,
                                const std::int64_t* rows_at_place,
                                std::span<const std::int64_t> slots, StreamHandle stream) {
  const auto e = static_cast<std::int64_t>(rows.size());
  if (e == 0) return;
  stats_.written_back += e;
  stats_.bytes_to_host += e * columns_.row_bytes();
  if (!on_device()) {
    for (int c = 0; c < columns_.count(); ++c) {
      kernels::on(place_).move_rows(host(c), rows.data(),
                                    cache_[static_cast<std::size_t>(c)].data(), slots.data(), e,
                                    columns_.bytes(c), nullptr);
    }
    return;
  }
  // The evicted rows are gathered at the place in order on the compute stream, then leave on the
  // write-back stream while the batch runs.
  absorb_writebacks();
  writeback_done_.block(stream);  // the last write-back out of evicted_ is done
  std::size_t total = 0;
  std::vector<std::size_t> offsets;
  for (int c = 0; c < columns_.count(); ++c) {
    offsets.push_back(total);
    total += align_up(static_cast<std::size_t>(e * columns_.bytes(c)));
  }
  grow(evicted_, total, place_);
  for (int c = 0; c < columns_.count(); ++c) {
    kernels::on(place_).move_rows(at<std::byte>(evicted_, offsets[static_cast<std::size_t>(c)]),
                                  nullptr, cache_[static_cast<std::size_t>(c)].data(),
                                  slots_at_place, e, columns_.bytes(c), stream);
  }
  evicted_ready_.record(stream);
  const StreamHandle w = writeback_.handle();
  evicted_ready_.block(w);
  if (memory_ == HostMemory::Pinned) {
    for (int c = 0; c < columns_.count(); ++c) {
      kernels::on(place_).move_rows(host(c), rows_at_place,
                                    at<std::byte>(evicted_, offsets[static_cast<std::size_t>(c)]),
                                    nullptr, e, columns_.bytes(c), w);
    }
  } else {
    grow(evicted_host_, total, Place::pinned());
    copy_bytes(evicted_host_.data(), Place::pinned(), evicted_.data(), place_, total, w);
    evicted_rows_.assign(rows.begin(), rows.end());
    evicted_count_ = e;
    evicted_pending_ = true;
  }
  writeback_done_.record(w);
}

void HostBackedRows::install(const CachePlan& plan, StreamHandle stream, std::int64_t replay_to) {
  PlaceGuard guard(place_);
  EMBER_CHECK(plan.staging >= 0, where_, ": installing a plan that was not staged");
  Staging& st = *staging_[static_cast<std::size_t>(plan.staging)];
  const StagingLayout& l = st.layout;
  if (on_device()) {
    auto& [before, after] = stall_events_[stall_next_];
    const bool measure = !stall_pending_[stall_next_];
    if (measure) before.record(stream);
    st.staged.block(stream);
    if (measure) {
      after.record(stream);
      stall_pending_[stall_next_] = true;
      stall_next_ = (stall_next_ + 1) % kStallPairs;
    }
  }
  write_back(plan.evict_rows, at<std::int64_t>(st.device, l.evict_slots),
             at<std::int64_t>(st.device, l.evict_rows), plan.evict_slots, stream);
  const auto* fetch_slots = at<std::int64_t>(st.device, l.fetch_slots);
  for (int c = 0; c < columns_.count(); ++c) {
    kernels::on(place_).move_rows(cache_[static_cast<std::size_t>(c)].data(), fetch_slots,
                                  at<std::byte>(st.device, l.data[static_cast<std::size_t>(c)]),
                                  nullptr, l.m, columns_.bytes(c), stream);
  }
  if (replay_to >= 0 && l.m > 0) {
    kernels::RowStates states{columns_.states > 0 ? cache_[1].data<float>() : nullptr,
                              columns_.states > 1 ? cache_[2].data<float>() : nullptr,
                              cache_.back().data<std::int64_t>()};
    kernels::on(place_).replay_steps(fetch_slots, l.m, cache_[0].data<float>(), columns_.width,
                                     states, replay_to, steps_at_place(), stream);
  }
  kernels::on(place_).move_rows(slot_map_.data(), at<std::int64_t>(st.device, l.map_rows),
                                at<std::int32_t>(st.device, l.map_values), nullptr, l.e + l.m, 4,
                                stream);
}

void HostBackedRows::start_new_rows(CachePlan& plan, const StartRows& start, StreamHandle stream) {
  PlaceGuard guard(place_);
  if (plan.staging < 0) return;
  Staging& st = *staging_[static_cast<std::size_t>(plan.staging)];
  const StagingLayout& l = st.layout;
  if (l.k > 0) {
    start(at<std::int64_t>(st.device, l.new_rows), at<std::int64_t>(st.device, l.new_slots), l.k);
    kernels::on(place_).move_rows(
        slot_map_.data(), at<std::int64_t>(st.device, l.map_rows) + (l.e + l.m),
        at<std::int32_t>(st.device, l.map_values) + (l.e + l.m), nullptr, l.k, 4, stream);
  }
  stats_.new_rows += l.k;
  abandon(plan, stream);
}

void HostBackedRows::abandon(CachePlan& plan, StreamHandle stream) {
  if (plan.staging < 0) return;
  Staging& st = *staging_[static_cast<std::size_t>(plan.staging)];
  if (on_device()) st.released.record(stream);
  st.busy = false;
  plan.staging = -1;
}

void HostBackedRows::map_to_slots(std::int64_t* rows, std::int64_t bound, const std::int64_t* count,
                                  StreamHandle stream) const {
  kernels::on(place_).map_rows(rows, bound, count, slot_map_.data<std::int32_t>(), stream);
}

void HostBackedRows::record_step(std::int64_t t, const optim::UpdateStep& u, StreamHandle stream) {
  PlaceGuard guard(place_);
  if (static_cast<std::int64_t>(steps_.size()) < t) steps_.resize(static_cast<std::size_t>(t));
  steps_[static_cast<std::size_t>(t - 1)] = u;
  if (!on_device()) return;
  // Copies to the device go through pinned memory (the caching pinned allocator keeps it until
  // the copy is done), so that the step never waits for the device.
  auto upload = [&](std::size_t first, std::size_t count) {
    const std::size_t bytes = count * sizeof(optim::UpdateStep);
    Tensor pinned = Tensor::empty({static_cast<std::int64_t>(bytes)}, DType::U8, Place::pinned());
    std::memcpy(pinned.data(), steps_.data() + first, bytes);
    copy_bytes(at<std::byte>(steps_at_place_, first * sizeof(optim::UpdateStep)), place_,
               pinned.data(), Place::pinned(), bytes, stream);
  };
  const auto need = static_cast<std::size_t>(t) * sizeof(optim::UpdateStep);
  if (!steps_at_place_.defined() || static_cast<std::size_t>(steps_at_place_.numel()) < need) {
    // Doubling; the old copy goes back to the allocator in stream order (replays read it on the
    // same stream).
    steps_at_place_ = Tensor::empty({static_cast<std::int64_t>(2 * need)}, DType::U8, place_);
    upload(0, static_cast<std::size_t>(t));
    return;
  }
  upload(static_cast<std::size_t>(t - 1), 1);
}

const optim::UpdateStep* HostBackedRows::steps_at_place() const {
  if (!on_device()) return steps_.data();
  return steps_at_place_.defined() ? at<optim::UpdateStep>(steps_at_place_, 0) : nullptr;
}

void HostBackedRows::collect_timings() {
  for (std::size_t i = 0; i < stall_events_.size(); ++i) {
    if (!stall_pending_[i] || !stall_events_[i].second.query()) continue;
    stats_.exposed_ms += Event::elapsed_ms(stall_events_[i].first, stall_events_[i].second);
    stall_pending_[i] = false;
  }
}

void HostBackedRows::settle(StreamHandle stream) {
  PlaceGuard guard(place_);
  if (on_device()) {
    synchronize_stream(stream);
    prepare_.synchronize();
    writeback_.synchronize();
  }
  absorb_writebacks();
}

void HostBackedRows::flush(StreamHandle stream) {
  PlaceGuard guard(place_);
  std::vector<std::int64_t> rows, slots;
  directory_.clear(rows, slots);
  if (!rows.empty()) {
    Tensor rows_at_place, slots_at_place;
    if (on_device()) {
      rows_at_place = Tensor::from_vector(rows, place_);
      slots_at_place = Tensor::from_vector(slots, place_);
    }
    write_back(rows, on_device() ? slots_at_place.data<std::int64_t>() : slots.data(),
               on_device() ? rows_at_place.data<std::int64_t>() : rows.data(), slots, stream);
    settle(stream);
  }
  ops::fill(slot_map_, -1, stream);
  settle(stream);
}

void HostBackedRows::update_host_rows(std::span<const std::int64_t> rows, const RowWork& work,
                                      StreamHandle stream) {
  PlaceGuard guard(place_);
  settle(stream);
  for (std::size_t first = 0; first < rows.size(); first += kChunkRows) {
    const std::span<const std::int64_t> chunk =
        rows.subspan(first, std::min<std::size_t>(kChunkRows, rows.size() - first));
    const auto n = static_cast<std::int64_t>(chunk.size());
    const StagingLayout l = StagingLayout::make(columns_, n, 0, 0);
    grow(bulk_host_, l.total, on_device() ? Place::pinned() : Place::host());
    gather_host(chunk, at<std::byte>(bulk_host_, 0), l);
    if (on_device()) {
      grow(bulk_device_, l.total, place_);
      copy_bytes(bulk_device_.data(), place_, bulk_host_.data(), Place::pinned(), l.total, stream);
    }
    std::vector<std::byte*> columns;
    for (int c = 0; c < columns_.count(); ++c)
      columns.push_back(at<std::byte>(on_device() ? bulk_device_ : bulk_host_,
                                      l.data[static_cast<std::size_t>(c)]));
    work(columns.data(), n, stream);
    if (on_device()) {
      copy_bytes(bulk_host_.data(), Place::pinned(), bulk_device_.data(), place_, l.total, stream);
      synchronize_stream(stream);
    }
    for (int c = 0; c < columns_.count(); ++c) {
      kernels::on(Place::host())
          .move_rows(host(c), chunk.data(),
                     at<std::byte>(bulk_host_, l.data[static_cast<std::size_t>(c)]), nullptr, n,
                     columns_.bytes(c), nullptr);
    }
  }
}

void HostBackedRows::read_rows(std::span<const std::int64_t> rows, std::span<std::byte* const> out,
                               StreamHandle stream) {
  PlaceGuard guard(place_);
  settle(stream);
  std::vector<std::int64_t> cached_at, cached_slots, host_at, host_rows;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::int32_t s = directory_.slot_of(rows[i]);
    if (s >= 0) {
      cached_at.push_back(static_cast<std::int64_t>(i));
      cached_slots.push_back(s);
    } else {
      host_at.push_back(static_cast<std::int64_t>(i));
      host_rows.push_back(rows[i]);
    }
  }
  const auto n = static_cast<std::int64_t>(cached_slots.size());
  const StagingLayout l = StagingLayout::make(columns_, n, 0, 0);
  if (n > 0) {
    grow(bulk_host_, l.total, on_device() ? Place::pinned() : Place::host());
    if (on_device()) grow(bulk_device_, l.total, place_);
    const Tensor& gathered = on_device() ? bulk_device_ : bulk_host_;
    const Tensor slots = Tensor::from_vector(cached_slots, place_);
    for (int c = 0; c < columns_.count(); ++c) {
      kernels::on(place_).move_rows(at<std::byte>(gathered, l.data[static_cast<std::size_t>(c)]),
                                    nullptr, cache_[static_cast<std::size_t>(c)].data(),
                                    slots.data<std::int64_t>(), n, columns_.bytes(c), stream);
    }
    if (on_device()) {
      copy_bytes(bulk_host_.data(), Place::pinned(), bulk_device_.data(), place_, l.total, stream);
      synchronize_stream(stream);
    }
  }
  for (int c = 0; c < columns_.count(); ++c) {
    const std::int64_t b = columns_.bytes(c);
    std::byte* o = out[static_cast<std::size_t>(c)];
    if (n > 0) {
      kernels::on(Place::host())
          .move_rows(o, cached_at.data(),
                     at<std::byte>(bulk_host_, l.data[static_cast<std::size_t>(c)]), nullptr, n, b,
                     nullptr);
    }
    kernels::on(Place::host())
        .move_rows(o, host_at.data(), host(c), host_rows.data(),
                   static_cast<std::int64_t>(host_rows.size()), b, nullptr);
  }
}

}  // namespace ember::embedding
