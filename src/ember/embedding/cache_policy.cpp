#include "ember/embedding/cache_policy.hpp"

#include <algorithm>
#include <bit>

#include "ember/core/error.hpp"

namespace ember::embedding {

namespace {

// Doubly linked lists over the slots, one per queue; a queue runs from its least recently used
// slot (head) to its most recently used one (tail).
class SlotQueues {
 public:
  SlotQueues(std::int64_t slots, int queues)
      : prev_(slots, kNone),
        next_(slots, kNone),
        queue_of_(slots, kNone),
        head_(queues, kNone),
        tail_(queues, kNone) {}

  int queues() const { return static_cast<int>(head_.size()); }
  int queue_of(std::int32_t slot) const { return queue_of_[slot]; }

  void push_back(int q, std::int32_t slot) {
    prev_[slot] = tail_[q];
    next_[slot] = kNone;
    if (tail_[q] != kNone) next_[tail_[q]] = slot;
    tail_[q] = slot;
    if (head_[q] == kNone) head_[q] = slot;
    queue_of_[slot] = q;
  }
  void unlink(std::int32_t slot) {
    const int q = queue_of_[slot];
    if (q == kNone) return;
    if (prev_[slot] != kNone) next_[prev_[slot]] = next_[slot];
    if (next_[slot] != kNone) prev_[next_[slot]] = prev_[slot];
    if (head_[q] == slot) head_[q] = next_[slot];
    if (tail_[q] == slot) tail_[q] = prev_[slot];
    prev_[slot] = next_[slot] = kNone;
    queue_of_[slot] = kNone;
  }
  // Queues in ascending order, each from its head: the first n slots not pinned.
  void collect(std::int64_t n, const std::function<bool(std::int32_t)>& pinned,
               std::vector<std::int32_t>& out) const {
    std::int64_t taken = 0;
    for (int q = 0; q < queues() && taken < n; ++q) {
      for (std::int32_t s = head_[q]; s != kNone && taken < n; s = next_[s]) {
        if (pinned(s)) continue;
        out.push_back(s);
        ++taken;
      }
    }
  }

 private:
  static constexpr std::int32_t kNone = -1;
  std::vector<std::int32_t> prev_, next_, queue_of_;
  std::vector<std::int32_t> head_, tail_;
};

class LruPolicy final : public CachePolicy {
 public:
  explicit LruPolicy(std::int64_t slots) : queues_(slots, 1) {}
  void admit(std::int32_t slot, std::int64_t) override { queues_.push_back(0, slot); }
  void touch(std::int32_t slot, std::int64_t) override {
    queues_.unlink(slot);
    queues_.push_back(0, slot);
  }
  void remove(std::int32_t slot, std::int64_t) override { queues_.unlink(slot); }
  void victims(std::int64_t n, const std::function<bool(std::int32_t)>& pinned,
               std::vector<std::int32_t>& out) const override {
    queues_.collect(n, pinned, out);
  }

 private:
  SlotQueues queues_;
};

// Queue q holds the slots whose row has been used 2^q .. 2^(q+1) - 1 times.
constexpr int kFrequencyQueues = 32;

int frequency_queue(std::uint32_t count) {
  return std::min(kFrequencyQueues - 1, static_cast<int>(std::bit_width(count)) - 1);
}

class LfuPolicy final : public CachePolicy {
 public:
  // history: counts per row that outlive the row's stay in the cache.
  LfuPolicy(std::int64_t slots, std::int64_t rows, bool history)
      : queues_(slots, kFrequencyQueues), history_(history) {
    if (history_) {
      row_count_.assign(static_cast<std::size_t>(rows), 0);
    } else {
      slot_count_.assign(static_cast<std::size_t>(slots), 0);
    }
  }
  void admit(std::int32_t slot, std::int64_t row) override {
    queues_.push_back(frequency_queue(bump(slot, row, true)), slot);
  }
  void touch(std::int32_t slot, std::int64_t row) override {
    const std::uint32_t count = bump(slot, row, false);
    queues_.unlink(slot);
    queues_.push_back(frequency_queue(count), slot);
  }
  void remove(std::int32_t slot, std::int64_t) override { queues_.unlink(slot); }
  void victims(std::int64_t n, const std::function<bool(std::int32_t)>& pinned,
               std::vector<std::int32_t>& out) const override {
    queues_.collect(n, pinned, out);
  }

 private:
  // The use count after this use (saturating).
  std::uint32_t bump(std::int32_t slot, std::int64_t row, bool entering) {
    std::uint32_t& c = history_ ? row_count_[static_cast<std::size_t>(row)]
                                : slot_count_[static_cast<std::size_t>(slot)];
    if (entering && !history_) c = 0;
    if (c != UINT32_MAX) ++c;
    return c;
  }

  SlotQueues queues_;
  bool history_;
  std::vector<std::uint32_t> slot_count_, row_count_;
};

}  // namespace

std::unique_ptr<CachePolicy> make_cache_policy(EvictionPolicy policy, std::int64_t slots,
                                               std::int64_t rows) {
  switch (policy) {
    case EvictionPolicy::Lru:
      return std::make_unique<LruPolicy>(slots);
    case EvictionPolicy::Lfu:
      return std::make_unique<LfuPolicy>(slots, rows, false);
    case EvictionPolicy::LfuHistory:
      return std::make_unique<LfuPolicy>(slots, rows, true);
  }
  EMBER_THROW("unknown eviction policy");
}

}  // namespace ember::embedding
