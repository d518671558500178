// The MPI backend: host ranks spread over the processes of an MPI job, several per process when
// asked (the ranks of process p are p * k ... p * k + k - 1, each driven by its own thread).
//
// Every collective is point-to-point messages between ranks (a rank's messages carry a tag that
// names the sending and the receiving rank within their processes; MPI keeps messages of one tag
// in order), in three rounds:
//   1. each rank sends every peer a descriptor (operation, dtype, count, op, root, and the bytes
//      it will send that peer), and checks what its peers sent against its own call;
//   2. each rank tells every peer whether it found a mismatch, so that all ranks throw alike
//      instead of some waiting forever for data that never comes;
//   3. the data, after which each rank reduces what it received in rank order, exactly as the
//      in-process backend does, so the two backends agree to the bit.
// Sending every peer everything costs memory and bandwidth proportional to the rank count; host
// ranks are for tests and CPU training, where a deterministic result matters more. Waiting polls
// (and yields the core), so oversubscribed processes still progress, and ends after the timeout
// with an error naming the peers that never arrived.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/distributed/mpi_check.hpp"
#include "ember/distributed/process_world.hpp"
#include "ember/distributed/rank_order_reduce.hpp"

namespace ember::distributed {

bool mpi_compiled() {
#if EMBER_WITH_MPI
  return true;
#else
  return false;
#endif
}

#if EMBER_WITH_MPI

namespace {

int as_int(std::int64_t n, const char* what) {
  EMBER_CHECK(n >= 0 && n <= std::numeric_limits<int>::max(), "MPI ", what, ": ", n,
              " bytes exceed MPI's int counts; split the call");
  return static_cast<int>(n);
}

// What a rank's collective call looks like to its peers.
struct Descriptor {
  std::int64_t code = 0, dtype = 0, count = 0, op = 0, root = 0, bytes = 0;
  bool same_call(const Descriptor& o) const {
    return code == o.code && dtype == o.dtype && count == o.count && op == o.op && root == o.root;
  }
};
constexpr int kDescriptorWords = 6;
const char* const kNames[] = {
    "?", "all_reduce", "reduce_scatter", "all_gather", "all_to_all_v", "broadcast", "barrier"};

std::string describe(const Descriptor& d) {
  const auto code = static_cast<std::size_t>(d.code);
  return cat(code < std::size(kNames) ? kNames[code] : "?", "(dtype ",
             dtype_name(static_cast<DType>(d.dtype)), ", ", d.count, " elements, op ",
             reduce_op_name(static_cast<ReduceOp>(d.op)), ", root ", d.root, ")");
}

// The ranks of one process: one duplicate of MPI_COMM_WORLD, and the flag that breaks the group
// for all of them after an error.
struct MpiGroup {
  MPI_Comm comm = MPI_COMM_NULL;
  int process = 0, processes = 1, local_ranks = 1;
  double timeout_seconds = 300;
  std::mutex mutex;
  std::atomic<bool> broken{false};
  std::string reason;

  ~MpiGroup() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  void break_with(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!broken.exchange(true)) reason = why;
  }
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<MpiGroup> group, int local)
      : group_(std::move(group)),
        local_(local),
        rank_(group_->process * group_->local_ranks + local),
        size_(group_->processes * group_->local_ranks) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Place place() const override { return Place::host(); }
  const char* backend() const override { return "mpi"; }

  void all_reduce(const Tensor& inout, ReduceOp op, StreamHandle) override {
    check_all_reduce(inout);
    const std::int64_t bytes = static_cast<std::int64_t>(inout.nbytes());
    agree(descriptor(1, inout.dtype(), inout.numel(), op), all_peers(bytes), all_peers(bytes));
    std::vector<std::vector<std::byte>> got = receive_all(bytes);
    std::vector<const void*> sends(static_cast<std::size_t>(size_), inout.data());
    exchange(sends, all_peers(bytes), got);
    got[static_cast<std::size_t>(rank_)].assign(
        static_cast<const std::byte*>(inout.data()),
        static_cast<const std::byte*>(inout.data()) + bytes);
    reduce_received(inout, got, op);
  }

  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, StreamHandle) override {
    check_reduce_scatter(in, out);
    const std::int64_t bytes = static_cast<std::int64_t>(out.nbytes());
    agree(descriptor(2, in.dtype(), out.numel(), op), all_peers(bytes), all_peers(bytes));
    std::vector<std::vector<std::byte>> got = receive_all(bytes);
    std::vector<const void*> sends(static_cast<std::size_t>(size_));
    for (int p = 0; p < size_; ++p)
      sends[static_cast<std::size_t>(p)] = static_cast<const std::byte*>(in.data()) + p * bytes;
    exchange(sends, all_peers(bytes), got);
    const auto* own = static_cast<const std::byte*>(sends[static_cast<std::size_t>(rank_)]);
    got[static_cast<std::size_t>(rank_)].assign(own, own + bytes);
    reduce_received(out, got, op);
  }

  void all_gather(const Tensor& in, const Tensor& out, StreamHandle) override {
    check_all_gather(in, out);
    const std::int64_t bytes = static_cast<std::int64_t>(in.nbytes());
    agree(descriptor(3, in.dtype(), in.numel()), all_peers(bytes), all_peers(bytes));
    std::vector<void*> into(static_cast<std::size_t>(size_));
    for (int p = 0; p < size_; ++p)
      into[static_cast<std::size_t>(p)] = static_cast<std::byte*>(out.data()) + p * bytes;
    std::vector<const void*> sends(static_cast<std::size_t>(size_), in.data());
    exchange(sends, all_peers(bytes), into, all_peers(bytes));
    if (bytes > 0) std::memmove(into[static_cast<std::size_t>(rank_)], in.data(), bytes);
  }

  void all_to_all_v(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                    const Tensor& recv, const std::vector<std::int64_t>& recv_counts,
                    StreamHandle) override {
    check_all_to_all_v(send, send_counts, recv, recv_counts);
    const auto esize = static_cast<std::int64_t>(dtype_size(send.dtype()));
    std::vector<std::int64_t> send_bytes(static_cast<std::size_t>(size_)),
        recv_bytes(static_cast<std::size_t>(size_));
    std::vector<const void*> sends(static_cast<std::size_t>(size_));
    std::vector<void*> into(static_cast<std::size_t>(size_));
    std::int64_t so = 0, ro = 0;
    for (std::size_t p = 0; p < sends.size(); ++p) {
      send_bytes[p] = send_counts[p] * esize;
      recv_bytes[p] = recv_counts[p] * esize;
      sends[p] = static_cast<const std::byte*>(send.data()) + so;
      into[p] = static_cast<std::byte*>(recv.data()) + ro;
      so += send_bytes[p];
      ro += recv_bytes[p];
    }
    agree(descriptor(4, send.dtype(), 0), send_bytes, recv_bytes);
    exchange(sends, send_bytes, into, recv_bytes);
    const auto self = static_cast<std::size_t>(rank_);
    if (send_bytes[self] > 0) std::memmove(into[self], sends[self], send_bytes[self]);
  }

  void broadcast(const Tensor& inout, int root, StreamHandle) override {
    check_broadcast(inout, root);
    const std::int64_t bytes = static_cast<std::int64_t>(inout.nbytes());
    std::vector<std::int64_t> to(static_cast<std::size_t>(size_), 0),
        from(static_cast<std::size_t>(size_), 0);
    if (rank_ == root) {
      to = all_peers(bytes);
    } else {
      from[static_cast<std::size_t>(root)] = bytes;
    }
    agree(descriptor(5, inout.dtype(), inout.numel(), ReduceOp::Sum, root), to, from);
    std::vector<const void*> sends(static_cast<std::size_t>(size_), inout.data());
    std::vector<void*> into(static_cast<std::size_t>(size_), inout.data());
    exchange(sends, to, into, from);
  }

  void barrier() override {
    const std::vector<std::int64_t> none(static_cast<std::size_t>(size_), 0);
    agree(descriptor(6, DType::F32, 0), none, none);
  }
  // The ranks of this process waiting for this one stop polling and throw.
  void abort(const std::string& why) override {
    group_->break_with(cat("rank ", rank_, " failed: ", why));
  }

 private:
  static Descriptor descriptor(std::int64_t code, DType dtype, std::int64_t count,
                               ReduceOp op = ReduceOp::Sum, int root = 0) {
    Descriptor d;
    d.code = code;
    d.dtype = static_cast<std::int64_t>(dtype);
    d.count = count;
    d.op = static_cast<std::int64_t>(op);
    d.root = root;
    return d;
  }
  std::vector<std::int64_t> all_peers(std::int64_t bytes) const {
    return std::vector<std::int64_t>(static_cast<std::size_t>(size_), bytes);
  }
  std::vector<std::vector<std::byte>> receive_all(std::int64_t bytes) const {
    return std::vector<std::vector<std::byte>>(static_cast<std::size_t>(size_),
                                               std::vector<std::byte>(bytes));
  }
  void reduce_received(const Tensor& out, const std::vector<std::vector<std::byte>>& got,
                       ReduceOp op) const {
    std::vector<const void*> sources;
    for (const auto& g : got)
      sources.push_back(g.data());
    reduce_in_rank_order(out, sources, 0, op);
  }

  int process_of(int peer) const { return peer / group_->local_ranks; }
  // The tag of messages from local rank `from` to local rank `to` (of their processes).
  int tag(int from, int to) const { return from * group_->local_ranks + to; }

  // Rounds 1 and 2 (see the top of the file). `to[p]`: the bytes this rank sends peer p;
  // `from[p]`: the bytes it expects from p.
  void agree(Descriptor mine, const std::vector<std::int64_t>& to,
             const std::vector<std::int64_t>& from) {
    const auto n = static_cast<std::size_t>(size_);
    std::vector<Descriptor> sent(n, mine), got(n);
    for (std::size_t p = 0; p < n; ++p)
      sent[p].bytes = to[p];
    std::vector<const void*> sends(n);
    std::vector<void*> into(n);
    const std::vector<std::int64_t> words(n, kDescriptorWords * 8);
    for (std::size_t p = 0; p < n; ++p) {
      sends[p] = &sent[p];
      into[p] = &got[p];
    }
    exchange(sends, words, into, words, kNames[mine.code]);
    got[static_cast<std::size_t>(rank_)] = sent[static_cast<std::size_t>(rank_)];
    std::string problem;
    std::int64_t verdict = -1;  // the first peer that disagrees with this rank
    for (std::size_t p = 0; p < n && verdict < 0; ++p) {
      if (!got[p].same_call(mine)) {
        problem = cat("mismatched MPI collectives: rank ", rank_, " called ", describe(mine),
                      " but rank ", p, " called ", describe(got[p]));
        verdict = static_cast<std::int64_t>(p);
      } else if (p != static_cast<std::size_t>(rank_) && got[p].bytes != from[p]) {
        const auto esize = static_cast<std::int64_t>(dtype_size(static_cast<DType>(mine.dtype)));
        problem =
            cat(kNames[mine.code], ": rank ", rank_, " expects ", from[p] / esize,
                " elements from rank ", p, " but rank ", p, " sends it ", got[p].bytes / esize);
        verdict = static_cast<std::int64_t>(p);
      }
    }
    std::vector<std::int64_t> verdicts(n, verdict);
    std::vector<const void*> vs(n, &verdict);
    std::vector<void*> vi(n);
    for (std::size_t p = 0; p < n; ++p)
      vi[p] = &verdicts[p];
    try {
      exchange(vs, all_peers(8), vi, all_peers(8), kNames[mine.code]);
    } catch (const Error&) {
      // Another rank of this process heard this rank's verdict and broke the group first: this
      // rank's own finding (which names the counts) is the better message.
      if (problem.empty()) throw;
    }
    if (!problem.empty()) {
      group_->break_with(problem);
      EMBER_THROW(problem);
    }
    for (std::size_t p = 0; p < n; ++p) {
      if (verdicts[p] >= 0) {
        const std::string why = cat(kNames[mine.code], " on rank ", rank_, ": rank ", p,
                                    " found its call mismatched with rank ", verdicts[p],
                                    "'s (see rank ", p, "'s error)");
        group_->break_with(why);
        EMBER_THROW(why);
      }
    }
  }

  void exchange(const std::vector<const void*>& sends, const std::vector<std::int64_t>& to,
                std::vector<std::vector<std::byte>>& got) {
    std::vector<void*> into(got.size());
    std::vector<std::int64_t> from(got.size());
    for (std::size_t p = 0; p < got.size(); ++p) {
      into[p] = got[p].data();
      from[p] = static_cast<std::int64_t>(got[p].size());
    }
    exchange(sends, to, into, from);
  }

  // Sends to[p] bytes from sends[p] to every peer p, receives from[p] bytes into into[p] from
  // every peer (nothing to or from this rank itself, nor where the count is 0).
  void exchange(const std::vector<const void*>& sends, const std::vector<std::int64_t>& to,
                const std::vector<void*>& into, const std::vector<std::int64_t>& from,
                const char* what = "collective") {
    if (group_->broken) {
      EMBER_THROW("rank ", rank_, ": the MPI communicator group is broken: ", group_->reason);
    }
    std::vector<MPI_Request> requests;
    std::vector<int> peers;  // the peer of each receive, for the timeout's message
    for (int p = 0; p < size_; ++p) {
      const auto i = static_cast<std::size_t>(p);
      if (p == rank_ || from[i] == 0) continue;
      requests.emplace_back();
      peers.push_back(p);
      EMBER_MPI_CHECK(MPI_Irecv(into[i], as_int(from[i], what), MPI_BYTE, process_of(p),
                                tag(p % group_->local_ranks, local_), group_->comm,
                                &requests.back()));
    }
    const std::size_t receives = requests.size();
    for (int p = 0; p < size_; ++p) {
      const auto i = static_cast<std::size_t>(p);
      if (p == rank_ || to[i] == 0) continue;
      requests.emplace_back();
      EMBER_MPI_CHECK(MPI_Isend(sends[i], as_int(to[i], what), MPI_BYTE, process_of(p),
                                tag(local_, p % group_->local_ranks), group_->comm,
                                &requests.back()));
    }
    wait(requests, receives, peers, what);
  }

  void wait(std::vector<MPI_Request>& requests, std::size_t receives, const std::vector<int>& peers,
            const char* what) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    for (int polls = 0;; ++polls) {
      int done = 0;
      EMBER_MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                                  MPI_STATUSES_IGNORE));
      if (done) return;
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (group_->broken || waited > group_->timeout_seconds) {
        std::string missing;
        for (std::size_t i = 0; i < receives; ++i) {
          if (requests[i] != MPI_REQUEST_NULL) {
            missing += (missing.empty() ? "" : ", ") + std::to_string(peers[i]);
            MPI_Cancel(&requests[i]);
            MPI_Request_free(&requests[i]);
          }
        }
        const std::string why =
            group_->broken
                ? cat("rank ", rank_, " stopped waiting in ", what,
                      ": the group is broken: ", group_->reason)
                : cat("MPI collectives: rank ", rank_, " waited ", group_->timeout_seconds,
                      " s in ", what, " but rank(s) ", missing, " of ", size_,
                      " never arrived (a rank failed or skipped a collective)");
        group_->break_with(why);
        EMBER_THROW(why);
      }
      // Spin briefly for the latency, then give the core away: under oversubscription (more
      // ranks than cores) a spinning rank starves the one it waits for.
      if (polls < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 20 : 200));
      }
    }
  }

  std::shared_ptr<MpiGroup> group_;
  int local_, rank_, size_;
};

}  // namespace

std::vector<CommunicatorPtr> make_mpi_communicators(int local_ranks, double timeout_seconds) {
  EMBER_CHECK(local_ranks >= 1, "make_mpi_communicators: need at least one rank per process, got ",
              local_ranks);
  EMBER_CHECK(timeout_seconds > 0, "make_mpi_communicators: timeout must be positive, got ",
              timeout_seconds);
  const ProcessWorld world = join_mpi_world();
  const std::vector<std::int64_t> counts = all_gather_processes({local_ranks});
  for (int p = 0; p < world.size; ++p) {
    if (counts[static_cast<std::size_t>(p)] != local_ranks) {
      EMBER_THROW_AS(ConfigError, "MPI job: process ", world.rank, " has ", local_ranks,
                     " rank(s) but process ", p, " has ", counts[static_cast<std::size_t>(p)],
                     "; every process must run the same number of ranks");
    }
  }
  auto group = std::make_shared<MpiGroup>();
  EMBER_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &group->comm));
  group->process = world.rank;
  group->processes = world.size;
  group->local_ranks = local_ranks;
  group->timeout_seconds = timeout_seconds;
  std::vector<CommunicatorPtr> out;
  for (int i = 0; i < local_ranks; ++i)
    out.push_back(std::make_unique<MpiCommunicator>(group, i));
  return out;
}

CommunicatorPtr make_mpi_communicator() {
  return std::move(make_mpi_communicators(1).front());
}

#else

std::vector<CommunicatorPtr> make_mpi_communicators(int, double) {
  EMBER_THROW("make_mpi_communicators: this build has no MPI (install OpenMPI and reconfigure)");
}

CommunicatorPtr make_mpi_communicator() {
  EMBER_THROW("make_mpi_communicator: this build has no MPI (install OpenMPI and reconfigure)");
}

#endif

}  // namespace ember::distributed
