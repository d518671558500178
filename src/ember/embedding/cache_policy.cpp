#include "ember/embedding/cache_policy.hpp"

#include <algorithm>

#include "ember/core/error.hpp"
#include "ember/embedding/host_chunks.hpp"

namespace ember::embedding {

namespace {

// The logs are compacted when they hold more than kCompactAt times the live entries plus kSlack.
// A compaction reads the record of every entry (a cache miss each): it costs kCompactAt /
// (kCompactAt - 1) reads per entry appended, and the logs take up to kCompactAt x 8 bytes per
// cached row.
constexpr std::int64_t kCompactAt = 4;
constexpr std::int64_t kSlack = 4096;
// How far ahead a walk over a log prefetches the slot records.
constexpr std::size_t kAhead = 64;

bool live(const QueueEntry& e, const CacheSlot* table, int q) {
  const CacheSlot& rec = table[e.slot];
  return rec.queue == q && rec.version == e.version;
}

}  // namespace

CachePolicy::CachePolicy(EvictionPolicy policy) : kind_(policy) {
  switch (policy) {
    case EvictionPolicy::Lru:
      queues_.resize(1);
      return;
    case EvictionPolicy::Lfu:
    case EvictionPolicy::LfuHistory:
      queues_.resize(kQueues);
      return;
  }
  EMBER_THROW("unknown eviction policy");
}

void CachePolicy::append(std::span<const QueueEntry> entries, std::span<const std::int8_t> queues) {
  const std::size_t n = entries.size();
  const std::size_t chunks = chunk_count(n);
  entries_ += static_cast<std::int64_t>(n);
  if (chunks == 1) {
    for (std::size_t i = 0; i < n; ++i)
      queues_[static_cast<std::size_t>(queues[i])].log.push_back(entries[i]);
    return;
  }
  // Each chunk's entries per queue, then each chunk writes from its place in every queue.
  const std::size_t Q = queues_.size();
  append_counts_.assign(chunks * Q, 0);
  for_each_chunk(n, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
    std::int64_t* count = &append_counts_[c * Q];
    for (std::size_t i = begin; i < end; ++i)
      ++count[static_cast<std::size_t>(queues[i])];
  });
  for (std::size_t q = 0; q < Q; ++q) {
    Log& log = queues_[q].log;
    auto at = static_cast<std::int64_t>(log.size());
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::int64_t k = append_counts_[c * Q + q];
      append_counts_[c * Q + q] = at;
      at += k;
    }
    log.resize(static_cast<std::size_t>(at));
  }
  for_each_chunk(n, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
    std::int64_t* at = &append_counts_[c * Q];
    for (std::size_t i = begin; i < end; ++i) {
      const auto q = static_cast<std::size_t>(queues[i]);
      queues_[q].log[static_cast<std::size_t>(at[q]++)] = entries[i];
    }
  });
}

void CachePolicy::victims(std::int64_t n, const CacheSlot* table, std::vector<std::int32_t>& out) {
  std::int64_t taken = 0;
  for (int q = 0; q < static_cast<int>(queues_.size()) && taken < n; ++q) {
    Queue& queue = queues_[static_cast<std::size_t>(q)];
    const Log& log = queue.log;
    // Stale entries before the first live one are dropped on the way.
    bool front = true;
    // The log is walked in stretches of about twice the victims still wanted (most entries near
    // the head are live and not pinned), each split into chunks walked on several threads; the
    // chunks' finds are then taken in order, so the victims are those of a walk from the head.
    for (std::size_t i = queue.head; i < log.size() && taken < n;) {
      const std::size_t length =
          std::min(log.size() - i,
                   std::max<std::size_t>(kRowsPerChunk, 2 * static_cast<std::size_t>(n - taken)));
      const std::size_t chunks = chunk_count(length);
      if (walks_.size() < chunks) walks_.resize(chunks);
      for (std::size_t c = 0; c < chunks; ++c) {
        walks_[c].found.clear();
        walks_[c].found.reserve(chunk_begin(length, chunks, c + 1) -
                                chunk_begin(length, chunks, c));
        walks_[c].first_live = SIZE_MAX;
      }
      const QueueEntry* stretch = log.data() + i;
      const auto limit = static_cast<std::size_t>(n - taken);  // no chunk needs to find more
      for_each_chunk(length, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
        Walk& w = walks_[c];
        for (std::size_t k = begin; k < end && w.found.size() < limit; ++k) {
          if (k + kAhead < end) __builtin_prefetch(&table[stretch[k + kAhead].slot]);
          const QueueEntry& e = stretch[k];
          if (!live(e, table, q)) continue;
          if (w.first_live == SIZE_MAX) w.first_live = k;
          if (table[e.slot].pins == 0) w.found.push_back(e.slot);
        }
      });
      for (std::size_t c = 0; c < chunks && taken < n; ++c) {
        const Walk& w = walks_[c];
        if (front) {
          // Up to the first live entry (or the whole chunk) the entries are stale: dropped.
          const std::size_t stale =
              w.first_live != SIZE_MAX ? w.first_live : chunk_begin(length, chunks, c + 1);
          entries_ -= static_cast<std::int64_t>(i + stale - queue.head);
          queue.head = i + stale;
          front = w.first_live == SIZE_MAX;
        }
        const auto take =
            std::min<std::size_t>(w.found.size(), static_cast<std::size_t>(n - taken));
        out.insert(out.end(), w.found.begin(), w.found.begin() + static_cast<std::ptrdiff_t>(take));
        taken += static_cast<std::int64_t>(take);
      }
      i += length;
    }
  }
}

bool CachePolicy::compact_if_due(const CacheSlot* table, std::int64_t occupied) {
  if (entries_ > kCompactAt * occupied + kSlack) {
    compact(table);
    return true;
  }
  // Entries dropped at the heads are given back once they are most of a log.
  for (Queue& queue : queues_) {
    if (queue.head > static_cast<std::size_t>(kSlack) && queue.head > queue.log.size() / 2) {
      queue.log.erase(queue.log.begin(),
                      queue.log.begin() + static_cast<std::ptrdiff_t>(queue.head));
      queue.head = 0;
    }
  }
  return false;
}

void CachePolicy::compact(const CacheSlot* table) {
  entries_ = 0;
  for (int q = 0; q < static_cast<int>(queues_.size()); ++q) {
    Queue& queue = queues_[static_cast<std::size_t>(q)];
    Log& log = queue.log;
    const std::size_t n = log.size() - queue.head;
    const QueueEntry* in = log.data() + queue.head;
    // Which entries are live (one record read each, on several threads), then the live ones
    // copied in order to the side and back to the log's start (which keeps its capacity: the
    // log grows again by the batch).
    const std::size_t chunks = chunk_count(n);
    keep_.resize(n);
    kept_.assign(chunks + 1, 0);
    for_each_chunk(n, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
      std::size_t k = 0;
      for (std::size_t i = begin; i < end; ++i) {
        if (i + kAhead < end) __builtin_prefetch(&table[in[i + kAhead].slot]);
        keep_[i] = live(in[i], table, q) ? 1 : 0;
        k += keep_[i];
      }
      kept_[c + 1] = k;
    });
    for (std::size_t c = 0; c < chunks; ++c)
      kept_[c + 1] += kept_[c];
    compacted_.resize(kept_[chunks]);
    for_each_chunk(n, chunks, [&](std::size_t c, std::size_t begin, std::size_t end) {
      std::size_t out = kept_[c];
      for (std::size_t i = begin; i < end; ++i) {
        if (keep_[i] != 0) compacted_[out++] = in[i];
      }
    });
    const std::size_t live_entries = kept_[chunks];
    for_each_chunk(live_entries, chunk_count(live_entries),
                   [&](std::size_t, std::size_t begin, std::size_t end) {
                     std::copy(compacted_.begin() + static_cast<std::ptrdiff_t>(begin),
                               compacted_.begin() + static_cast<std::ptrdiff_t>(end),
                               log.begin() + static_cast<std::ptrdiff_t>(begin));
                   });
    log.resize(live_entries);
    queue.head = 0;
    entries_ += static_cast<std::int64_t>(live_entries);
  }
  compacted_ = {};
  keep_ = {};
}

void CachePolicy::clear() {
  for (Queue& q : queues_)
    q = Queue{};
  entries_ = 0;
}

}  // namespace ember::embedding
