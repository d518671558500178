// The shared argument checks and the in-process backend (host ranks as threads).
//
// In-process protocol for every collective: each rank stages a copy of its input in the group
// (so in-place calls and later writes by the caller cannot race the readers), waits at a
// barrier, checks that every rank made the same call, computes its own output from the staged
// copies, and waits at a second barrier so that no rank restages before all have read.
#include "ember/distributed/collectives.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <sstream>

#include "ember/core/error.hpp"
#include "ember/distributed/rank_order_reduce.hpp"

namespace ember::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

namespace {

using CollectiveTypes =
    TypeList<float, double, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t>;

bool collective_dtype(DType t) {
  return dtype_among(CollectiveTypes{}, t);
}

template <class F>
void dispatch_collective_dtype(DType t, F&& f) {
  dispatch_among<CollectiveTypes>(t, "collectives", f);
}

std::string counts_string(const std::vector<std::int64_t>& counts) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < counts.size(); ++i)
    os << (i ? ", " : "") << counts[i];
  os << "]";
  return os.str();
}

}  // namespace

void Communicator::check_tensor(const Tensor& t, const char* collective, const char* which) const {
  EMBER_CHECK(t.defined(), collective, " on rank ", rank(), ": the ", which,
              " tensor is undefined");
  EMBER_CHECK(t.is_contiguous(), collective, " on rank ", rank(), ": the ", which,
              " tensor must be contiguous (shape ", t.shape(), ")");
  EMBER_CHECK(t.place() == place(), collective, " on rank ", rank(), ": the ", which,
              " tensor is on ", t.place(), " but this ", backend(), " communicator works on ",
              place());
  EMBER_CHECK(collective_dtype(t.dtype()), collective, " on rank ", rank(), ": dtype ",
              dtype_name(t.dtype()), " of the ", which,
              " tensor is not supported (f32, f64, i32, u32, i64, u64)");
}

void Communicator::check_same_dtype(const Tensor& a, const Tensor& b, const char* collective,
                                    const char* a_name, const char* b_name) const {
  EMBER_CHECK(a.dtype() == b.dtype(), collective, " on rank ", rank(), ": ", a_name, " is ",
              dtype_name(a.dtype()), " but ", b_name, " is ", dtype_name(b.dtype()));
}

void Communicator::check_counts(const std::vector<std::int64_t>& counts, const Tensor& buffer,
                                const char* collective, const char* which) const {
  EMBER_CHECK(static_cast<int>(counts.size()) == size(), collective, " on rank ", rank(), ": ",
              which, " has ", counts.size(), " entries for ", size(), " ranks");
  std::int64_t total = 0;
  for (std::int64_t c : counts) {
    EMBER_CHECK(c >= 0, collective, " on rank ", rank(), ": negative count in ", which, " ",
                counts_string(counts));
    total += c;
  }
  EMBER_CHECK(total <= buffer.numel(), collective, " on rank ", rank(), ": ", which, " ",
              counts_string(counts), " add up to ", total, " elements but the buffer holds ",
              buffer.numel());
}

void Communicator::check_all_reduce(const Tensor& inout) const {
  check_tensor(inout, "all_reduce", "in/out");
}

void Communicator::check_reduce_scatter(const Tensor& in, const Tensor& out) const {
  check_tensor(in, "reduce_scatter", "input");
  check_tensor(out, "reduce_scatter", "output");
  check_same_dtype(in, out, "reduce_scatter", "input", "output");
  EMBER_CHECK(in.numel() == out.numel() * size(), "reduce_scatter on rank ", rank(), ": input has ",
              in.numel(), " elements, expected ", size(), " x ", out.numel(), " (output)");
}

void Communicator::check_all_gather(const Tensor& in, const Tensor& out) const {
  check_tensor(in, "all_gather", "input");
  check_tensor(out, "all_gather", "output");
  check_same_dtype(in, out, "all_gather", "input", "output");
  EMBER_CHECK(out.numel() == in.numel() * size(), "all_gather on rank ", rank(), ": output has ",
              out.numel(), " elements, expected ", size(), " x ", in.numel(), " (input)");
}

void Communicator::check_all_to_all_v(const Tensor& send,
                                      const std::vector<std::int64_t>& send_counts,
                                      const Tensor& recv,
                                      const std::vector<std::int64_t>& recv_counts) const {
  check_tensor(send, "all_to_all_v", "send");
  check_tensor(recv, "all_to_all_v", "receive");
  check_same_dtype(send, recv, "all_to_all_v", "send", "receive");
  check_counts(send_counts, send, "all_to_all_v", "send_counts");
  check_counts(recv_counts, recv, "all_to_all_v", "recv_counts");
}

void Communicator::check_broadcast(const Tensor& inout, int root) const {
  check_tensor(inout, "broadcast", "in/out");
  EMBER_CHECK(root >= 0 && root < size(), "broadcast on rank ", rank(), ": root ", root,
              " is not a rank of ", size());
}

namespace {

// What a rank asked for; compared across ranks to catch mismatched calls.
struct CallInfo {
  std::string name;
  DType dtype = DType::F32;
  std::int64_t count = 0;  // elements each rank contributes (all_reduce, gather, scatter)
  ReduceOp op = ReduceOp::Sum;
  int root = -1;
  std::vector<std::int64_t> send_counts, recv_counts;

  std::string describe() const {
    std::ostringstream os;
    os << name << "(dtype " << dtype_name(dtype);
    if (name == "all_to_all_v") {
      os << ", send_counts " << counts_string(send_counts) << ", recv_counts "
         << counts_string(recv_counts);
    } else if (name != "barrier") {
      os << ", " << count << " elements";
      if (name == "all_reduce" || name == "reduce_scatter") os << ", " << reduce_op_name(op);
      if (name == "broadcast") os << ", root " << root;
    }
    os << ")";
    return os.str();
  }
};

CallInfo make_call(const char* name, DType dtype = DType::F32, std::int64_t count = 0,
                   ReduceOp op = ReduceOp::Sum, int root = -1) {
  CallInfo c;
  c.name = name;
  c.dtype = dtype;
  c.count = count;
  c.op = op;
  c.root = root;
  return c;
}

class InProcessGroup {
 public:
  InProcessGroup(int n, double timeout_seconds)
      : n_(n), timeout_(timeout_seconds), calls_(n), staged_(n), arrived_(n, false) {}

  int size() const { return n_; }

  // Stages `bytes` of rank's input and records its call, then waits for every rank.
  void post(int rank, CallInfo call, const void* data, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      throw_if_broken(rank);
      calls_[rank] = std::move(call);
      staged_[rank].resize(bytes);
      if (bytes > 0) std::memcpy(staged_[rank].data(), data, bytes);
    }
    wait_all(rank, calls_[rank].name.c_str());
    validate(rank);
  }

  void wait_all(int rank, const char* what) {
    std::unique_lock<std::mutex> lock(mutex_);
    throw_if_broken(rank);
    const std::uint64_t generation = generation_;
    arrived_[rank] = true;
    if (++arrived_count_ == n_) {
      arrived_count_ = 0;
      std::fill(arrived_.begin(), arrived_.end(), false);
      ++generation_;
      cv_.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_));
    const bool done =
        cv_.wait_until(lock, deadline, [&] { return generation_ != generation || broken_; });
    if (generation_ != generation) return;
    if (!done && !broken_) {
      std::ostringstream missing;
      for (int r = 0; r < n_; ++r) {
        if (!arrived_[r]) missing << (missing.tellp() > 0 ? ", " : "") << r;
      }
      broken_ = true;
      reason_ = cat("in-process collectives: rank ", rank, " waited ", timeout_, " s in ", what,
                    " but rank(s) ", missing.str(), " of ", n_,
                    " never arrived (a rank failed or skipped a collective)");
      cv_.notify_all();
    }
    throw_if_broken(rank);
  }

  // `rank` failed: the waiting ranks and every later call throw.
  void abort(int rank, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!broken_) {
        broken_ = true;
        reason_ = cat("rank ", rank, " failed: ", why);
      }
    }
    cv_.notify_all();
  }

  // Staged bytes of `rank` (valid between the two barriers of a collective).
  const std::byte* staged(int rank) const { return staged_[rank].data(); }
  const CallInfo& call(int rank) const { return calls_[rank]; }

 private:
  void throw_if_broken(int rank) const {
    if (broken_) EMBER_THROW("rank ", rank, ": the communicator group is broken: ", reason_);
  }

  // Every rank runs the same comparison on the same staged descriptors, so all throw alike.
  void validate(int rank) {
    const CallInfo& mine = calls_[0];
    for (int p = 1; p < n_; ++p) {
      const CallInfo& other = calls_[p];
      bool same = other.name == mine.name && other.dtype == mine.dtype;
      if (same && mine.name != "all_to_all_v") {
        same = other.count == mine.count && other.op == mine.op && other.root == mine.root;
      }
      if (!same)
        fail(rank, cat("mismatched collectives: rank 0 called ", calls_[0].describe(), " but rank ",
                       p, " called ", other.describe()));
    }
    if (mine.name == "all_to_all_v") {
      for (int p = 0; p < n_; ++p) {
        for (int q = 0; q < n_; ++q) {
          if (calls_[p].recv_counts[q] != calls_[q].send_counts[p]) {
            fail(rank, cat("all_to_all_v: rank ", p, " expects ", calls_[p].recv_counts[q],
                           " elements from rank ", q, " but rank ", q, " sends it ",
                           calls_[q].send_counts[p]));
          }
        }
      }
    }
  }

  [[noreturn]] void fail(int rank, const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_) {
      broken_ = true;
      reason_ = message;
    }
    EMBER_THROW("rank ", rank, ": ", message);
  }

  const int n_;
  const double timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<CallInfo> calls_;
  std::vector<std::vector<std::byte>> staged_;
  std::vector<bool> arrived_;
  int arrived_count_ = 0;
  std::uint64_t generation_ = 0;
  bool broken_ = false;
  std::string reason_;
};

template <class T>
T reduce_pair(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::Sum:
      return a + b;
    case ReduceOp::Max:
      return std::max(a, b);
    case ReduceOp::Min:
      return std::min(a, b);
  }
  return a;
}

}  // namespace

void reduce_in_rank_order(const Tensor& out, const std::vector<const void*>& sources,
                          std::int64_t first, ReduceOp op) {
  dispatch_collective_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = static_cast<T*>(out.data());
    const std::int64_t n = out.numel();
    const T* src0 = static_cast<const T*>(sources.front()) + first;
    std::copy(src0, src0 + n, dst);
    for (std::size_t p = 1; p < sources.size(); ++p) {
      const T* src = static_cast<const T*>(sources[p]) + first;
      for (std::int64_t i = 0; i < n; ++i)
        dst[i] = reduce_pair(op, dst[i], src[i]);
    }
  });
}

namespace {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  Place place() const override { return Place::host(); }
  const char* backend() const override { return "in-process"; }

  void all_reduce(const Tensor& inout, ReduceOp op, StreamHandle) override {
    check_all_reduce(inout);
    group_->post(rank_, make_call("all_reduce", inout.dtype(), inout.numel(), op), inout.data(),
                 inout.nbytes());
    reduce_blocks(inout, 0, op);
    group_->wait_all(rank_, "all_reduce");
  }

  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, StreamHandle) override {
    check_reduce_scatter(in, out);
    group_->post(rank_, make_call("reduce_scatter", in.dtype(), in.numel(), op), in.data(),
                 in.nbytes());
    reduce_blocks(out, out.numel() * rank_, op);
    group_->wait_all(rank_, "reduce_scatter");
  }

  void all_gather(const Tensor& in, const Tensor& out, StreamHandle) override {
    check_all_gather(in, out);
    group_->post(rank_, make_call("all_gather", in.dtype(), in.numel()), in.data(), in.nbytes());
    auto* dst = static_cast<std::byte*>(out.data());
    for (int p = 0; p < size(); ++p) {
      if (in.nbytes() > 0) std::memcpy(dst + p * in.nbytes(), group_->staged(p), in.nbytes());
    }
    group_->wait_all(rank_, "all_gather");
  }

  void all_to_all_v(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                    const Tensor& recv, const std::vector<std::int64_t>& recv_counts,
                    StreamHandle) override {
    check_all_to_all_v(send, send_counts, recv, recv_counts);
    const std::int64_t send_total =
        std::accumulate(send_counts.begin(), send_counts.end(), std::int64_t{0});
    const std::size_t esize = send.element_size();
    CallInfo a2a = make_call("all_to_all_v", send.dtype(), send_total);
    a2a.send_counts = send_counts;
    a2a.recv_counts = recv_counts;
    group_->post(rank_, std::move(a2a), send.data(), static_cast<std::size_t>(send_total) * esize);
    auto* dst = static_cast<std::byte*>(recv.data());
    std::int64_t recv_offset = 0;
    for (int p = 0; p < size(); ++p) {
      const auto& peer_counts = group_->call(p).send_counts;
      const std::int64_t peer_offset =
          std::accumulate(peer_counts.begin(), peer_counts.begin() + rank_, std::int64_t{0});
      const std::size_t bytes = static_cast<std::size_t>(recv_counts[p]) * esize;
      if (bytes > 0) {
        std::memcpy(dst + recv_offset * esize, group_->staged(p) + peer_offset * esize, bytes);
      }
      recv_offset += recv_counts[p];
    }
    group_->wait_all(rank_, "all_to_all_v");
  }

  void broadcast(const Tensor& inout, int root, StreamHandle) override {
    check_broadcast(inout, root);
    group_->post(rank_, make_call("broadcast", inout.dtype(), inout.numel(), ReduceOp::Sum, root),
                 inout.data(), rank_ == root ? inout.nbytes() : 0);
    if (rank_ != root && inout.nbytes() > 0) {
      std::memcpy(inout.data(), group_->staged(root), inout.nbytes());
    }
    group_->wait_all(rank_, "broadcast");
  }

  void barrier() override {
    group_->post(rank_, make_call("barrier"), nullptr, 0);
    group_->wait_all(rank_, "barrier");
  }
  void abort(const std::string& why) override { group_->abort(rank_, why); }

 private:
  // out[i] = op over ranks p (in rank order) of staged_p[first + i].
  void reduce_blocks(const Tensor& out, std::int64_t first, ReduceOp op) {
    std::vector<const void*> sources(static_cast<std::size_t>(size()));
    for (int p = 0; p < size(); ++p)
      sources[static_cast<std::size_t>(p)] = group_->staged(p);
    reduce_in_rank_order(out, sources, first, op);
  }

  std::shared_ptr<InProcessGroup> group_;
  int rank_;
};

}  // namespace

std::vector<CommunicatorPtr> make_in_process_communicators(int n, double timeout_seconds) {
  EMBER_CHECK(n >= 1, "make_in_process_communicators: need at least one rank, got ", n);
  EMBER_CHECK(timeout_seconds > 0, "make_in_process_communicators: timeout must be positive, got ",
              timeout_seconds);
  auto group = std::make_shared<InProcessGroup>(n, timeout_seconds);
  std::vector<CommunicatorPtr> ranks;
  ranks.reserve(n);
  for (int r = 0; r < n; ++r)
    ranks.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return ranks;
}

}  // namespace ember::distributed
