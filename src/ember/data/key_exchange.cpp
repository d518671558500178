#include "ember/data/key_exchange.hpp"

#include <cstring>
#include <utility>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/core/staged_copy.hpp"

namespace ember::data {

namespace {

// Writes a message front to back into a buffer sized beforehand (whose memory is reused).
class MessageWriter {
 public:
  MessageWriter(std::vector<std::byte>& out, std::size_t size) : out_(out) { out_.resize(size); }
  template <class T>
  void put(const T* data, std::size_t n) {
    std::memcpy(out_.data() + pos_, data, n * sizeof(T));
    pos_ += n * sizeof(T);
  }
  template <class T>
  T* reserve(std::size_t n) {
    auto* p = reinterpret_cast<T*>(out_.data() + pos_);
    pos_ += n * sizeof(T);
    return p;
  }
  std::size_t written() const { return pos_; }

 private:
  std::vector<std::byte>& out_;
  std::size_t pos_ = 0;
};

// One process's message, read front to back; running past its end is a DataError.
class MessageReader {
 public:
  MessageReader(const std::byte* bytes, std::size_t size, int process)
      : bytes_(bytes), size_(size), process_(process) {}

  const std::byte* take(std::size_t n) {
    if (n > size_ - pos_) {
      EMBER_THROW_AS(DataError, "shared reading: the key message of process ", process_, " has ",
                     size_, " bytes, shorter than its counts say");
    }
    const std::byte* p = bytes_ + pos_;
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
  const std::byte* bytes_;
  std::size_t size_;
  int process_;
  std::size_t pos_ = 0;
};

constexpr int kHeaderValues = 5;  // sequence, samples, shards, window offset, window size

// Per sparse input, a message holds its key count, the key count every row of the window has
// (or kVariable, and then one count per row follows), and the keys.
constexpr std::int64_t kVariable = -1;  // HostBatch::uniform_row_keys' "rows differ"

// This process's window of `batch` as a message into `out`: the header, then per sparse input
// its key count and the rows' count (uniform) or counts. The keys go apart (in place).
void pack_counts(HostBatch& batch, const Share& window, const ExchangeCheck& check,
                 std::vector<std::byte>& out) {
  const BatchLayout& layout = batch.layout();
  const auto inputs = static_cast<std::size_t>(batch.num_inputs());
  // Usually found already by the reader that filled the batch, off the collector's thread.
  const std::vector<std::int64_t>& uniform = batch.uniform_row_keys(window.offset, window.size);
  std::vector<std::int64_t> keys(inputs);
  std::size_t size = kHeaderValues * sizeof(std::int64_t);
  for (std::size_t i = 0; i < inputs; ++i) {
    const std::int64_t slots = layout.sparse[i].slot_num;
    const std::int64_t* off = batch.row_offsets(static_cast<int>(i));
    const std::int64_t first = window.offset * slots, rows = window.size * slots;
    keys[i] = off[first + rows] - off[first];
    size += 2 * sizeof(std::int64_t) +
            (uniform[i] == kVariable ? static_cast<std::size_t>(rows) * sizeof(std::int32_t) : 0);
  }
  MessageWriter w(out, size);
  const std::int64_t header[kHeaderValues] = {check.sequence, check.samples, check.shards,
                                              window.offset, window.size};
  w.put(header, kHeaderValues);
  for (std::size_t i = 0; i < inputs; ++i) {
    const std::int64_t slots = layout.sparse[i].slot_num;
    const std::int64_t* off = batch.row_offsets(static_cast<int>(i));
    const std::int64_t first = window.offset * slots, rows = window.size * slots;
    w.put(&keys[i], 1);
    w.put(&uniform[i], 1);
    if (uniform[i] == kVariable) {
      auto* counts = w.reserve<std::int32_t>(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r)
        counts[r] = static_cast<std::int32_t>(off[first + r + 1] - off[first + r]);
    }
  }
  EMBER_CHECK(w.written() == size, "shared reading: a key message of ", w.written(),
              " bytes, sized for ", size);
}

// Moves `bytes` bytes from `from` to `to` within one array, over the copy threads where the
// two do not overlap.
void move_within(std::byte* to, const std::byte* from, std::size_t bytes) {
  if (to == from || bytes == 0) return;
  if (to + bytes <= from || from + bytes <= to) {
    detail::parallel_memcpy(to, from, bytes);
  } else {
    std::memmove(to, from, bytes);
  }
}

}  // namespace

void ProcessExchange::all_gather_into(const std::vector<std::byte>& mine, GatheredMessages& all) {
  const std::vector<std::vector<std::byte>> each = all_gather(mine);
  all.offsets.assign(1, 0);
  std::size_t total = 0;
  for (const auto& m : each) {
    total += m.size();
    all.offsets.push_back(static_cast<std::int64_t>(total));
  }
  all.bytes.resize(total);
  for (std::size_t p = 0; p < each.size(); ++p) {
    if (!each[p].empty()) {
      std::memcpy(all.bytes.data() + all.offsets[p], each[p].data(), each[p].size());
    }
  }
}

void ProcessExchange::all_gather_in_place(std::byte* buffer,
                                          const std::vector<std::int64_t>& counts,
                                          const std::vector<std::int64_t>& displs) {
  const auto me = static_cast<std::size_t>(process());
  EMBER_CHECK(
      counts.size() == static_cast<std::size_t>(processes()) && displs.size() == counts.size(),
      "shared reading: an in-place all-gather of ", counts.size(), " pieces among ", processes(),
      " processes");
  const std::vector<std::byte> mine(buffer + displs[me], buffer + displs[me] + counts[me]);
  const std::vector<std::vector<std::byte>> each = all_gather(mine);
  EMBER_CHECK(each.size() == counts.size(), "shared reading: ", each.size(), " pieces from ",
              counts.size(), " processes");
  for (std::size_t p = 0; p < each.size(); ++p) {
    if (p == me) continue;
    if (static_cast<std::int64_t>(each[p].size()) != counts[p]) {
      EMBER_THROW_AS(DataError, "shared reading: process ", p, " sends ", each[p].size(),
                     " bytes of keys, where its counts say ", counts[p]);
    }
    detail::parallel_memcpy(buffer + displs[p], each[p].data(), each[p].size());
  }
}

void ProcessExchange::abandon(const std::string& why) {
  EMBER_THROW("shared reading: process ", process(), " leaves the key exchange: ", why);
}

Share process_window(std::int64_t n, const RankSlice& slice, int local_ranks) {
  const std::vector<Share> shares = local_shares(n, slice, local_ranks);
  const std::int64_t begin = shares.front().offset;
  return {begin, shares.back().offset + shares.back().size - begin};
}

bool exchange_batch_keys(HostBatch& batch, const Share& window, const ExchangeCheck& check,
                         ProcessExchange& exchange, KeyExchangeBuffers* buffers,
                         std::int64_t gathering_ranks) {
  EMBER_CHECK(window.offset >= 0 && window.size >= 0 && window.offset + window.size <= batch.size(),
              "exchange_batch_keys: rows [", window.offset, ", ", window.offset + window.size,
              ") of a batch of ", batch.size());
  KeyExchangeBuffers local;
  KeyExchangeBuffers& b = buffers != nullptr ? *buffers : local;
  pack_counts(batch, window, check, b.mine);
  const auto meet = TimeCounter::Clock::now();
  exchange.all_gather_into(b.mine, b.all);
  b.meeting.add_since(meet);
  const GatheredMessages& all = b.all;
  const int processes = exchange.processes();
  EMBER_CHECK(
      all.count() == processes && all.offsets.back() == static_cast<std::int64_t>(all.bytes.size()),
      "shared reading: ", all.count(), " key messages from ", processes, " processes");

  const BatchLayout& layout = batch.layout();
  const int inputs = batch.num_inputs();
  const auto key_size = static_cast<std::int64_t>(layout.key_size());
  // Where this process's parsed keys are now (after the room the readers gave the rows before
  // its window; already their place with one-hot data), before any offset is rewritten.
  std::vector<std::int64_t> parsed_at(static_cast<std::size_t>(inputs));
  for (int i = 0; i < inputs; ++i) {
    parsed_at[static_cast<std::size_t>(i)] =
        batch.row_offsets(i)[window.offset * layout.sparse[static_cast<std::size_t>(i)].slot_num];
  }
  // Per input, every process's key count and where its keys go: the counts first, so that
  // every process checks every message before any key moves (a bad message stops all of them
  // at the same point, none waits in the keys' exchange).
  std::vector<std::vector<std::int64_t>> counts(static_cast<std::size_t>(inputs)),
      displs(static_cast<std::size_t>(inputs));
  std::vector<std::int64_t> filled(static_cast<std::size_t>(inputs), 0);
  std::int64_t next_row = 0;
  // Every row of every process's window holds its reserved keys (the offsets already right).
  bool all_reserved = true;
  for (int p = 0; p < processes; ++p) {
    const auto at = static_cast<std::size_t>(all.offsets[static_cast<std::size_t>(p)]);
    MessageReader in(all.bytes.data() + at,
                     static_cast<std::size_t>(all.offsets[static_cast<std::size_t>(p) + 1]) - at,
                     p);
    std::int64_t h[kHeaderValues];
    for (std::int64_t& v : h)
      v = in.get<std::int64_t>();
    if (h[0] != check.sequence || h[1] != check.samples || h[2] != check.shards) {
      EMBER_THROW_AS(DataError, "shared reading: process ", exchange.process(), "'s batch ",
                     check.sequence, " has ", check.samples, " samples from ", check.shards,
                     " shards, but process ", p, "'s batch ", h[0], " has ", h[1], " samples from ",
                     h[2], " shards",
                     ": the processes read different batches (they must run the same "
                     "configuration, data files and layers.data.num_workers)");
    }
    if (h[3] != next_row || h[4] < 0 || h[3] + h[4] > batch.size()) {
      EMBER_THROW_AS(DataError, "shared reading: process ", p, " sends the keys of rows [", h[3],
                     ", ", h[3] + h[4], ") of batch ", check.sequence, " (", batch.size(),
                     " samples), but the next rows are from ", next_row);
    }
    for (int i = 0; i < inputs; ++i) {
      const auto ii = static_cast<std::size_t>(i);
      const std::int64_t slots = layout.sparse[ii].slot_num;
      std::int64_t* off = batch.row_offsets(i);
      std::int64_t& at_key = filled[ii];
      const auto keys = in.get<std::int64_t>();
      const auto uniform = in.get<std::int64_t>();
      const std::int64_t first = h[3] * slots;
      const std::int64_t rows = h[4] * slots;
      if (keys < 0 || at_key + keys > batch.value_capacity(i)) {
        EMBER_THROW_AS(DataError, "shared reading: process ", p, " sends ", keys,
                       " keys of sparse input ", i, " for batch ", check.sequence,
                       ", more than the batch holds (", batch.value_capacity(i) - at_key, " left)");
      }
      // Where the readers gave these rows room for the keys they hold (one-hot data: one key a
      // slot, keys_reserved_per_row), the offsets are already the whole batch's: this window's
      // rows were reserved or parsed with that count, and they start where its keys go.
      const std::int64_t reserved = keys_reserved_per_row(layout.sparse[ii]);
      if (reserved > 0 && uniform == reserved && keys == rows * reserved && off[first] == at_key &&
          off[first + rows] == at_key + keys) {
        counts[ii].push_back(keys * key_size);
        displs[ii].push_back(at_key * key_size);
        at_key += keys;
        continue;
      }
      all_reserved = false;
      off[first] = at_key;
      if (uniform == kVariable) {
        const std::byte* row_counts =
            in.take(static_cast<std::size_t>(rows) * sizeof(std::int32_t));
        for (std::int64_t r = 0; r < rows; ++r) {
          std::int32_t c;
          std::memcpy(&c, row_counts + r * static_cast<std::int64_t>(sizeof(c)), sizeof(c));
          off[first + r + 1] = off[first + r] + c;
        }
      } else {
        if (uniform < 0 || (rows > 0 && uniform > keys)) {
          EMBER_THROW_AS(DataError, "shared reading: process ", p,
                         " says every row of sparse input ", i, " holds ", uniform, " keys, with ",
                         keys, " keys for ", rows, " rows");
        }
#pragma omp parallel for schedule(static) if (rows >= (1 << 16))
        for (std::int64_t r = 0; r < rows; ++r)
          off[first + r + 1] = at_key + (r + 1) * uniform;
      }
      if (off[first + rows] != at_key + keys) {
        EMBER_THROW_AS(DataError, "shared reading: process ", p, "'s key counts of sparse input ",
                       i, " add up to ", off[first + rows] - at_key, ", not its ", keys, " keys");
      }
      counts[ii].push_back(keys * key_size);
      displs[ii].push_back(at_key * key_size);
      at_key += keys;
    }
    next_row += h[4];
  }
  if (next_row != batch.size()) {
    EMBER_THROW_AS(DataError, "shared reading: the processes send the keys of ", next_row,
                   " rows of batch ", check.sequence, ", which has ", batch.size());
  }
  // The ranks gather the keys themselves: ours are in place (the reserved rows put them there),
  // and every row of the batch holds its input's reserved keys.
  if (gathering_ranks > 0 && all_reserved && batch.size() % gathering_ranks == 0) {
    std::vector<std::int64_t> reserved(static_cast<std::size_t>(inputs));
    for (int i = 0; i < inputs; ++i)
      reserved[static_cast<std::size_t>(i)] =
          keys_reserved_per_row(layout.sparse[static_cast<std::size_t>(i)]);
    batch.note_uniform_row_keys(0, batch.size(), std::move(reserved));
    return true;
  }
  batch.forget_row_keys();  // offsets rewritten above, or about to be
  // The keys: ours to their place in sample order, then everyone's gathered around them.
  const auto me = static_cast<std::size_t>(exchange.process());
  for (int i = 0; i < inputs; ++i) {
    const auto ii = static_cast<std::size_t>(i);
    auto* values = static_cast<std::byte*>(batch.values(i));
    move_within(values + displs[ii][me], values + parsed_at[ii] * key_size,
                static_cast<std::size_t>(counts[ii][me]));
    exchange.all_gather_in_place(values, counts[ii], displs[ii]);
  }
  return false;
}

}  // namespace ember::data
