#include "ember/embedding/hash_table.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <limits>
#include <vector>

#include "ember/core/copy.hpp"
#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/embedding/hash_table_cuda.hpp"
#include "ember/embedding/hash_table_slots.hpp"
#include "ember/embedding/place_guard.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::embedding {

struct HostCounter {
  std::atomic<std::int64_t> rows{0};
  std::int64_t new_rows[2] = {0, 0};  // [first, end) of the last insert's rows
};

namespace {

// Spins until the inserting thread has published the row of a claimed slot.
std::uint32_t wait_row(std::uint32_t& row_ref) {
  std::atomic_ref<std::uint32_t> row(row_ref);
  std::uint32_t r = row.load(std::memory_order_acquire);
  while (r == kPendingRow)
    r = row.load(std::memory_order_acquire);
  return r;
}

std::int64_t as_row(std::uint32_t r) {
  return r >= kFirstMarkerRow ? std::int64_t{-1} : static_cast<std::int64_t>(r);
}

template <class Key>
void host_find(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys, std::int64_t n,
               std::int64_t* rows) {
#pragma omp parallel for schedule(static) if (n >= 4096)
  for (std::int64_t i = 0; i < n; ++i) {
    const Key key = keys[i];
    std::int64_t row = -1;
    if (key != empty_key<Key>()) {
      std::uint64_t s = hash_key(key) & mask;
      for (std::uint64_t probe = 0; probe <= mask; ++probe, s = (s + 1) & mask) {
        const Key k = std::atomic_ref<Key>(slots[s].key).load(std::memory_order_acquire);
        if (k == key) {
          row = as_row(wait_row(slots[s].row));
          break;
        }
        if (k == empty_key<Key>()) break;
      }
    }
    rows[i] = row;
  }
}

// Returns the smallest index of a reserved key, or -1.
template <class Key>
std::int64_t host_insert_or_find(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys,
                                 std::int64_t n, std::int64_t* rows, Key* keys_by_row,
                                 std::int64_t capacity, std::atomic<std::int64_t>& counter) {
  std::atomic<std::int64_t> bad{std::numeric_limits<std::int64_t>::max()};
#pragma omp parallel for schedule(static) if (n >= 4096)
  for (std::int64_t i = 0; i < n; ++i) {
    const Key key = keys[i];
    std::int64_t row = -1;
    if (key == empty_key<Key>()) {
      std::int64_t cur = bad.load();
      while (i < cur && !bad.compare_exchange_weak(cur, i)) {
      }
      rows[i] = -1;
      continue;
    }
    std::uint64_t s = hash_key(key) & mask;
    bool placed = false;
    for (std::uint64_t probe = 0; probe <= mask; ++probe, s = (s + 1) & mask) {
      std::atomic_ref<Key> slot_key(slots[s].key);
      Key k = slot_key.load(std::memory_order_acquire);
      if (k == empty_key<Key>()) {
        if (slot_key.compare_exchange_strong(k, key, std::memory_order_acq_rel)) {
          const std::int64_t r = counter.fetch_add(1);
          std::uint32_t published = kOverflowRow;
          if (r < capacity) {
            keys_by_row[r] = key;
            published = static_cast<std::uint32_t>(r);
          }
          std::atomic_ref<std::uint32_t>(slots[s].row).store(published, std::memory_order_release);
          row = as_row(published);
          placed = true;
          break;
        }
        // k now holds the key another thread claimed the slot with.
      }
      if (k == key) {
        row = as_row(wait_row(slots[s].row));
        placed = true;
        break;
      }
    }
    if (!placed) counter.fetch_add(1);  // every slot taken: counts as a key that did not fit
    rows[i] = row;
  }
  const std::int64_t b = bad.load();
  return b == std::numeric_limits<std::int64_t>::max() ? -1 : b;
}

// Returns how many keys were already present.
template <class Key>
std::int64_t host_insert_with_rows(HashSlot<Key>* slots, std::uint64_t mask, const Key* keys,
                                   const std::int64_t* given, std::int64_t n, Key* keys_by_row) {
  std::int64_t duplicates = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const Key key = keys[i];
    std::uint64_t s = hash_key(key) & mask;
    for (std::uint64_t probe = 0; probe <= mask; ++probe, s = (s + 1) & mask) {
      if (slots[s].key == key) {
        ++duplicates;
        break;
      }
      if (slots[s].key == empty_key<Key>()) {
        slots[s].key = key;
        slots[s].row = static_cast<std::uint32_t>(given[i]);
        keys_by_row[given[i]] = key;
        break;
      }
    }
  }
  return duplicates;
}

}  // namespace

HashTable::HashTable(DType key_dtype, std::int64_t capacity, Place place, std::int64_t slot_count,
                     std::string owner, std::string capacity_hint)
    : key_dtype_(key_dtype),
      capacity_(capacity),
      place_(place),
      owner_(std::move(owner)),
      capacity_hint_(std::move(capacity_hint)),
      host_counter_(std::make_unique<HostCounter>()) {
  dispatch_key(key_dtype, "embedding keys", [](auto) {});
  EMBER_CHECK(capacity >= 1 && capacity < static_cast<std::int64_t>(kFirstMarkerRow), owner_,
              ": hash table capacity must be in [1, ", kFirstMarkerRow, "), got ", capacity);
  EMBER_CHECK(place.is_host() || place.is_cuda(), owner_,
              ": hash tables live on the host or a CUDA device, not ", place);
  if (slot_count == 0) {
    slot_count = static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(2 * capacity)));
  }
  EMBER_CHECK(std::has_single_bit(static_cast<std::uint64_t>(slot_count)), owner_,
              ": hash table slot count must be a power of two, got ", slot_count);
  EMBER_CHECK(slot_count >= capacity, owner_, ": ", slot_count,
              " hash slots cannot hold a capacity of ", capacity, " rows");
  slot_count_ = slot_count;
  const std::size_t slot_bytes = key_dtype == DType::U32 ? 8 : 16;
  slots_ = Tensor::empty({slot_count_ * static_cast<std::int64_t>(slot_bytes)}, DType::U8, place);
  keys_by_row_ = Tensor::empty({capacity_}, key_dtype, place);
  if (place.is_cuda()) {
    device_state_ = Tensor::empty({cuda::kHashStateWords}, DType::U64, place);
  }
  clear();
}

HashTable::~HashTable() = default;

std::int64_t HashTable::size() const {
  check();
  const std::int64_t used = place_.is_cuda() ? rows_used_ : host_counter_->rows.load();
  return std::min(used, capacity_);
}

void HashTable::clear() {
  const PlaceGuard guard(place_);
  ops::fill(slots_, 255);
  if (place_.is_cuda()) {
    std::uint64_t words[cuda::kHashStateWords] = {0, ~0ull, 0, 0, 0, 0, 0, 0};
    copy_bytes(device_state_.data(), place_, words, Place::host(), sizeof words);
    synchronize_stream(current_stream(place_.device()));
  }
  rows_used_ = 0;
  host_counter_->rows = 0;
  host_counter_->new_rows[0] = host_counter_->new_rows[1] = 0;
  full_ = false;
  pending_ = false;
}

std::string HashTable::full_message(std::int64_t not_fitting) const {
  return cat(owner_, ": the embedding table is full: capacity ", capacity_, " rows per device, ",
             std::min(rows_used_, capacity_), " in use, and ", not_fitting,
             " new key(s) of this batch found no row; ", capacity_hint_,
             " (keys are never dropped or shared silently)");
}

void HashTable::check_keys(const Tensor& keys, const Tensor& rows, const char* what) const {
  EMBER_CHECK(keys.dtype() == key_dtype_, owner_, ": ", what, " got ", dtype_name(keys.dtype()),
              " keys but the table holds ", dtype_name(key_dtype_), " keys");
  EMBER_CHECK(keys.rank() == 1 && keys.is_contiguous(), owner_, ": ", what,
              " needs a contiguous 1-D key tensor, got shape ", keys.shape());
  rows.check_dtype(DType::I64, what);
  EMBER_CHECK(rows.rank() == 1 && rows.is_contiguous() && rows.numel() == keys.numel(), owner_,
              ": ", what, ": rows must be a contiguous i64 [", keys.numel(), "], got shape ",
              rows.shape());
  EMBER_CHECK(keys.place() == place_ && rows.place() == place_, owner_, ": ", what, " got keys on ",
              keys.place(), " and rows on ", rows.place(), " for a table on ", place_);
}

void HashTable::find(const Tensor& keys, const Tensor& rows, StreamHandle stream) const {
  check_keys(keys, rows, "find");
  const PlaceGuard guard(place_);
  const std::int64_t n = keys.numel();
  if (n == 0) return;
  const std::uint64_t mask = static_cast<std::uint64_t>(slot_count_) - 1;
  dispatch_key(key_dtype_, "embedding keys", [&](auto tag) {
    using Key = typename decltype(tag)::type;
    auto* slots = static_cast<HashSlot<Key>*>(slots_.data());
    if (place_.is_cuda()) {
#if EMBER_WITH_CUDA
      cuda::hash_find<Key>(slots, mask, keys.data<Key>(), n, rows.data<std::int64_t>(),
                           stream != nullptr ? stream : current_stream(place_.device()));
#endif
    } else {
      host_find<Key>(slots, mask, keys.data<Key>(), n, rows.data<std::int64_t>());
    }
  });
}

void HashTable::take_insert_state(std::uint64_t counter, std::uint64_t bad_index, bool late) const {
  // An asynchronous insert is checked when the next call comes, so its message says so.
  const char* when =
      late ? " (found in the batch before this call: the training step does not wait for the "
             "device; those keys read zeros and took no update)"
           : "";
  rows_used_ = static_cast<std::int64_t>(counter);
  if (rows_used_ > capacity_) {
    full_ = true;
    EMBER_THROW(full_message(rows_used_ - capacity_), when);
  }
  if (bad_index != ~0ull) {
    EMBER_THROW(owner_, ": key ",
                key_dtype_ == DType::U32 ? std::to_string(empty_key<std::uint32_t>())
                                         : std::to_string(empty_key<std::int64_t>()),
                " (position ", static_cast<std::int64_t>(bad_index),
                " of the batch) is reserved as the hash table's empty marker and cannot be "
                "stored; remap it in the data",
                when);
  }
}

InsertResult HashTable::insert_or_find(const Tensor& keys, const Tensor& rows,
                                       StreamHandle stream) {
  check_keys(keys, rows, "insert_or_find");
  const PlaceGuard guard(place_);
  check();
  if (full_) EMBER_THROW(full_message(0), " (the table filled up in an earlier batch)");
  const std::int64_t n = keys.numel();
  InsertResult result{size(), size()};
  const std::uint64_t mask = static_cast<std::uint64_t>(slot_count_) - 1;
  std::uint64_t counter = 0, bad_index = ~0ull;
  dispatch_key(key_dtype_, "embedding keys", [&](auto tag) {
    using Key = typename decltype(tag)::type;
    auto* slots = static_cast<HashSlot<Key>*>(slots_.data());
    if (place_.is_cuda()) {
#if EMBER_WITH_CUDA
      const StreamHandle s = stream != nullptr ? stream : current_stream(place_.device());
      auto* state = static_cast<unsigned long long*>(device_state_.data());
      cuda::hash_insert_or_find<Key>(slots, mask, keys.data<Key>(), n, rows.data<std::int64_t>(),
                                     keys_by_row_.data<Key>(),
                                     static_cast<std::uint64_t>(capacity_), state, s);
      std::uint64_t host_state[cuda::kHashStateWords];
      copy_bytes(host_state, Place::host(), state, place_, sizeof host_state, s);
      synchronize_stream(s);
      counter = host_state[0] + host_state[cuda::kHashLostKeysWord];
      bad_index = host_state[1];
#endif
    } else {
      const std::int64_t b =
          n == 0 ? -1
                 : host_insert_or_find<Key>(slots, mask, keys.data<Key>(), n,
                                            rows.data<std::int64_t>(), keys_by_row_.data<Key>(),
                                            capacity_, host_counter_->rows);
      counter = static_cast<std::uint64_t>(host_counter_->rows.load());
      bad_index = b < 0 ? ~0ull : static_cast<std::uint64_t>(b);
      host_counter_->new_rows[0] = result.first;
      host_counter_->new_rows[1] = std::min(static_cast<std::int64_t>(counter), capacity_);
    }
  });
  result.end = std::min(static_cast<std::int64_t>(counter), capacity_);
  take_insert_state(counter, bad_index, false);
  return result;
}

void HashTable::insert_or_find_async(const Tensor& keys, const Tensor& rows, StreamHandle stream) {
  if (!place_.is_cuda()) {
    insert_or_find(keys, rows, stream);
    return;
  }
#if EMBER_WITH_CUDA
  check_keys(keys, rows, "insert_or_find");
  const PlaceGuard guard(place_);
  check();
  if (full_) EMBER_THROW(full_message(0), " (the table filled up in an earlier batch)");
  const std::uint64_t mask = static_cast<std::uint64_t>(slot_count_) - 1;
  const StreamHandle s = stream != nullptr ? stream : current_stream(place_.device());
  auto* state = static_cast<unsigned long long*>(device_state_.data());
  dispatch_key(key_dtype_, "embedding keys", [&](auto tag) {
    using Key = typename decltype(tag)::type;
    cuda::hash_insert_or_find<Key>(static_cast<HashSlot<Key>*>(slots_.data()), mask,
                                   keys.data<Key>(), keys.numel(), rows.data<std::int64_t>(),
                                   keys_by_row_.data<Key>(), static_cast<std::uint64_t>(capacity_),
                                   state, s);
  });
  if (!pending_state_.defined()) {
    pending_state_ = Tensor::empty({cuda::kHashStateWords}, DType::U64, Place::pinned());
    pending_ready_ = Event::create(place_.device());
  }
  copy_bytes(pending_state_.data(), Place::pinned(), state, place_,
             sizeof(std::uint64_t) * cuda::kHashStateWords, s);
  pending_ready_.record(s);
  pending_ = true;
#endif
}

void HashTable::check() const {
  if (!pending_) return;
  pending_ready_.synchronize();
  pending_ = false;
  const auto* words = static_cast<const std::uint64_t*>(pending_state_.data());
  take_insert_state(words[0] + words[cuda::kHashLostKeysWord], words[1], true);
}

const std::int64_t* HashTable::new_rows() const {
  if (place_.is_cuda()) {
    return static_cast<const std::int64_t*>(device_state_.data()) + cuda::kHashNewRowsWord;
  }
  return host_counter_->new_rows;
}

Tensor HashTable::keys_by_row() const {
  return keys_by_row_.slice(0, 0, size());
}

std::pair<Tensor, Tensor> HashTable::dump() const {
  return {keys_by_row().clone(), Tensor::arange(size(), DType::I64, place_)};
}

void HashTable::load(const Tensor& keys, const Tensor& rows) {
  check_keys(keys, rows, "load");
  const PlaceGuard guard(place_);
  EMBER_CHECK(size() == 0, owner_, ": load needs an empty table, this one has ", size(), " rows");
  const std::int64_t n = keys.numel();
  EMBER_CHECK(n <= capacity_, owner_, ": loading ", n, " keys into a table of capacity ", capacity_,
              "; ", capacity_hint_);
  {  // rows must be a permutation of 0..n-1
    const auto r = rows.to(Place::host()).to_vector<std::int64_t>();
    std::vector<bool> seen(n, false);
    for (std::int64_t i = 0; i < n; ++i) {
      EMBER_CHECK(r[i] >= 0 && r[i] < n && !seen[r[i]], owner_, ": load: row ", r[i],
                  " at position ", i, " is out of range [0, ", n, ") or repeated");
      seen[r[i]] = true;
    }
  }
  std::int64_t duplicates = 0;
  const std::uint64_t mask = static_cast<std::uint64_t>(slot_count_) - 1;
  dispatch_key(key_dtype_, "embedding keys", [&](auto tag) {
    using Key = typename decltype(tag)::type;
    auto* slots = static_cast<HashSlot<Key>*>(slots_.data());
    if (place_.is_cuda()) {
#if EMBER_WITH_CUDA
      const StreamHandle s = current_stream(place_.device());
      auto* state = static_cast<unsigned long long*>(device_state_.data());
      cuda::hash_insert_with_rows<Key>(slots, mask, keys.data<Key>(), rows.data<std::int64_t>(), n,
                                       keys_by_row_.data<Key>(), state, s);
      std::uint64_t host_state[cuda::kHashStateWords];
      copy_bytes(host_state, Place::host(), state, place_, sizeof host_state, s);
      synchronize_stream(s);
      duplicates = static_cast<std::int64_t>(host_state[2]);
      const std::uint64_t words[cuda::kHashStateWords] = {
          static_cast<std::uint64_t>(n), ~0ull, 0, 0, 0, static_cast<std::uint64_t>(n), 0, 0};
      copy_bytes(state, place_, words, Place::host(), sizeof words);
#endif
    } else {
      duplicates = host_insert_with_rows<Key>(
          slots, mask, keys.data<Key>(), rows.data<std::int64_t>(), n, keys_by_row_.data<Key>());
    }
  });
  if (duplicates > 0) {
    clear();
    EMBER_THROW(owner_, ": load: ", duplicates, " key(s) appear more than once");
  }
  rows_used_ = n;
  host_counter_->rows = n;
  host_counter_->new_rows[0] = 0;
  host_counter_->new_rows[1] = n;
}

}  // namespace ember::embedding
