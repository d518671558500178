#include "ember/data/key_exchange.hpp"

#include <cstring>

#include "ember/core/error.hpp"

namespace ember::data {

namespace {

template <class T>
void put(std::vector<std::byte>& out, const T* data, std::size_t n) {
  const std::size_t at = out.size();
  out.resize(at + n * sizeof(T));
  if (n > 0) std::memcpy(out.data() + at, data, n * sizeof(T));
}

// One process's message, read front to back; running past its end is a DataError.
class MessageReader {
 public:
  MessageReader(const std::vector<std::byte>& bytes, int process)
      : bytes_(bytes), process_(process) {}

  const std::byte* take(std::size_t n) {
    if (n > bytes_.size() - pos_) {
      EMBER_THROW_AS(DataError, "shared reading: the key message of process ", process_, " has ",
                     bytes_.size(), " bytes, shorter than its counts say");
    }
    const std::byte* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }

 private:
  const std::vector<std::byte>& bytes_;
  int process_;
  std::size_t pos_ = 0;
};

constexpr int kHeaderValues = 5;  // sequence, samples, workers, window offset, window size

// Appends this process's window of `batch` to `out`: per sparse input its key count, the key
// count of each of its rows and the keys.
void pack_window(const HostBatch& batch, const Share& window, std::vector<std::byte>& out) {
  const BatchLayout& layout = batch.layout();
  const std::size_t key_size = layout.key_size();
  std::vector<std::int32_t> counts;
  for (int i = 0; i < batch.num_inputs(); ++i) {
    const std::int64_t slots = layout.sparse[static_cast<std::size_t>(i)].slot_num;
    const std::int64_t* off = batch.row_offsets(i);
    const std::int64_t first = window.offset * slots;
    const std::int64_t rows = window.size * slots;
    counts.resize(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r)
      counts[static_cast<std::size_t>(r)] =
          static_cast<std::int32_t>(off[first + r + 1] - off[first + r]);
    const std::int64_t keys = off[first + rows] - off[first];
    put(out, &keys, 1);
    put(out, counts.data(), counts.size());
    put(out,
        static_cast<const std::byte*>(batch.values(i)) +
            off[first] * static_cast<std::int64_t>(key_size),
        static_cast<std::size_t>(keys) * key_size);
  }
}

}  // namespace

void ProcessExchange::abandon(const std::string& why) {
  EMBER_THROW("shared reading: process ", process(), " leaves the key exchange: ", why);
}

Share process_window(std::int64_t n, const RankSlice& slice, int local_ranks) {
  const std::vector<Share> shares = local_shares(n, slice, local_ranks);
  const std::int64_t begin = shares.front().offset;
  return {begin, shares.back().offset + shares.back().size - begin};
}

void exchange_batch_keys(HostBatch& batch, const Share& window, const ExchangeCheck& check,
                         ProcessExchange& exchange) {
  EMBER_CHECK(window.offset >= 0 && window.size >= 0 && window.offset + window.size <= batch.size(),
              "exchange_batch_keys: rows [", window.offset, ", ", window.offset + window.size,
              ") of a batch of ", batch.size());
  std::vector<std::byte> mine;
  const std::int64_t header[kHeaderValues] = {check.sequence, check.samples, check.workers,
                                              window.offset, window.size};
  put(mine, header, kHeaderValues);
  pack_window(batch, window, mine);
  const std::vector<std::vector<std::byte>> all = exchange.all_gather(mine);
  EMBER_CHECK(static_cast<int>(all.size()) == exchange.processes(), "shared reading: ", all.size(),
              " key messages from ", exchange.processes(), " processes");

  const BatchLayout& layout = batch.layout();
  const std::size_t key_size = layout.key_size();
  std::vector<std::int64_t> filled(static_cast<std::size_t>(batch.num_inputs()), 0);
  std::int64_t next_row = 0;
  for (int p = 0; p < static_cast<int>(all.size()); ++p) {
    MessageReader in(all[static_cast<std::size_t>(p)], p);
    std::int64_t h[kHeaderValues];
    for (std::int64_t& v : h)
      v = in.get<std::int64_t>();
    if (h[0] != check.sequence || h[1] != check.samples || h[2] != check.workers) {
      EMBER_THROW_AS(DataError, "shared reading: process ", exchange.process(), "'s batch ",
                     check.sequence, " has ", check.samples, " samples read by ", check.workers,
                     " reader workers, but process ", p, "'s batch ", h[0], " has ", h[1],
                     " samples read by ", h[2],
                     ": the processes read different batches (they must run the same "
                     "configuration, data files and layers.data.num_workers)");
    }
    if (h[3] != next_row || h[4] < 0 || h[3] + h[4] > batch.size()) {
      EMBER_THROW_AS(DataError, "shared reading: process ", p, " sends the keys of rows [", h[3],
                     ", ", h[3] + h[4], ") of batch ", check.sequence, " (", batch.size(),
                     " samples), but the next rows are from ", next_row);
    }
    for (int i = 0; i < batch.num_inputs(); ++i) {
      const std::int64_t slots = layout.sparse[static_cast<std::size_t>(i)].slot_num;
      std::int64_t* off = batch.row_offsets(i);
      std::int64_t& at = filled[static_cast<std::size_t>(i)];
      const auto keys = in.get<std::int64_t>();
      const std::int64_t first = h[3] * slots;
      const std::int64_t rows = h[4] * slots;
      const std::byte* counts = in.take(static_cast<std::size_t>(rows) * sizeof(std::int32_t));
      if (keys < 0 || at + keys > batch.value_capacity(i)) {
        EMBER_THROW_AS(DataError, "shared reading: process ", p, " sends ", keys,
                       " keys of sparse input ", i, " for batch ", check.sequence,
                       ", more than the batch holds (", batch.value_capacity(i) - at, " left)");
      }
      off[first] = at;
      for (std::int64_t r = 0; r < rows; ++r) {
        std::int32_t c;
        std::memcpy(&c, counts + r * static_cast<std::int64_t>(sizeof(c)), sizeof(c));
        off[first + r + 1] = off[first + r] + c;
      }
      if (off[first + rows] != at + keys) {
        EMBER_THROW_AS(DataError, "shared reading: process ", p, "'s key counts of sparse input ",
                       i, " add up to ", off[first + rows] - at, ", not its ", keys, " keys");
      }
      const std::size_t bytes = static_cast<std::size_t>(keys) * key_size;
      std::memcpy(
          static_cast<std::byte*>(batch.values(i)) + static_cast<std::size_t>(at) * key_size,
          in.take(bytes), bytes);
      at += keys;
    }
    next_row += h[4];
  }
  if (next_row != batch.size()) {
    EMBER_THROW_AS(DataError, "shared reading: the processes send the keys of ", next_row,
                   " rows of batch ", check.sequence, ", which has ", batch.size());
  }
}

}  // namespace ember::data
