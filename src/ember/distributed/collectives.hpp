// Collective communication between the ranks of a data- or model-parallel job, behind one
// interface with three backends:
//   - in-process: several CPU "devices" as threads of one process (what CI exercises),
//   - NCCL: CUDA devices (one communicator per GPU, driven by one thread each),
//   - MPI: host memory, one rank per process.
//
// The model is SPMD, as with NCCL: every rank calls the same collectives in the same order with
// matching sizes. A rank is driven by one thread at a time. Tensors must be contiguous and live at
// the communicator's place(); the element count of a call is the tensor's numel(). Supported
// dtypes: f32, f64, i32, u32, i64, u64 (all backends).
//
// Results are deterministic: every backend reduces in an order that does not depend on timing
// (the in-process backend sums in rank order), and all ranks receive identical reductions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/core/device.hpp"
#include "ember/core/place.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::distributed {

enum class ReduceOp : std::uint8_t { Sum, Max, Min };
const char* reduce_op_name(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where this rank's tensors live: Place::host() for the in-process and MPI backends,
  // Place::cuda(d) for NCCL.
  virtual Place place() const = 0;
  // "in-process", "nccl" or "mpi".
  virtual const char* backend() const = 0;

  // Every rank ends with the element-wise reduction of all ranks' `inout`.
  virtual void all_reduce(const Tensor& inout, ReduceOp op = ReduceOp::Sum,
                          StreamHandle stream = nullptr) = 0;
  // `in` has size() * out.numel() elements; rank r receives block r of the reduction.
  virtual void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::Sum,
                              StreamHandle stream = nullptr) = 0;
  // `out` has size() * in.numel() elements: block r is rank r's `in`.
  virtual void all_gather(const Tensor& in, const Tensor& out, StreamHandle stream = nullptr) = 0;
  // Personalised exchange with variable sizes. `send` holds send_counts[p] elements for each peer
  // p in rank order; `recv` receives recv_counts[p] elements from each peer p in rank order.
  // recv_counts[p] on rank r must equal send_counts[r] on rank p (checked where the backend can).
  // The buffers may be larger than the counts' sums.
  virtual void all_to_all_v(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                            const Tensor& recv, const std::vector<std::int64_t>& recv_counts,
                            StreamHandle stream = nullptr) = 0;
  // Every rank ends with root's `inout`.
  virtual void broadcast(const Tensor& inout, int root, StreamHandle stream = nullptr) = 0;
  // Returns once every rank has called it (for NCCL: once the device work queued before it on
  // every rank is done).
  virtual void barrier() = 0;
  // This rank failed and calls no more collectives. Every rank of this process that waits for it
  // in a collective, or calls one later, throws instead ("the communicator group is broken",
  // with `why`); for NCCL the group's communicators are aborted (ncclCommAbort), which ends the
  // kernels waiting for the failed rank. Ranks in other processes are not reached (a job of
  // several processes ends there: abort_processes). Any thread may call it, more than once.
  virtual void abort(const std::string& why) = 0;

 protected:
  // The argument checks of each collective, the same for every backend (each calls them before
  // it does anything); they throw ember::Error naming the collective, the rank and the numbers.
  // What only a backend can see (ranks that disagree) it checks itself.
  void check_all_reduce(const Tensor& inout) const;
  void check_reduce_scatter(const Tensor& in, const Tensor& out) const;
  void check_all_gather(const Tensor& in, const Tensor& out) const;
  void check_all_to_all_v(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                          const Tensor& recv, const std::vector<std::int64_t>& recv_counts) const;
  void check_broadcast(const Tensor& inout, int root) const;

 private:
  void check_tensor(const Tensor& t, const char* collective, const char* which) const;
  void check_same_dtype(const Tensor& a, const Tensor& b, const char* collective,
                        const char* a_name, const char* b_name) const;
  void check_counts(const std::vector<std::int64_t>& counts, const Tensor& buffer,
                    const char* collective, const char* which) const;
};

using CommunicatorPtr = std::unique_ptr<Communicator>;

// `n` host ranks in this process, to be driven by n threads (rank i by one thread). A rank that
// waits more than `timeout_seconds` for its peers throws an error naming the collective and the
// ranks that never arrived; ranks that call mismatching collectives or sizes all throw an error
// describing both calls. After such an error the group is broken: every later call throws.
std::vector<CommunicatorPtr> make_in_process_communicators(int n, double timeout_seconds = 300.0);
// A communicator of one rank at any place (one GPU, or the host): every collective is a local
// copy or nothing, with no backend to start.
CommunicatorPtr make_solo_communicator(Place place);

// True when this build has the NCCL / MPI backends.
bool nccl_compiled();
bool mpi_compiled();

// One NCCL communicator per listed CUDA device, created together (ncclCommInitAll); rank i is
// devices[i]. NVLink multicast (NVLS) is kept off. Throws CudaUnavailableError without NCCL.
std::vector<CommunicatorPtr> make_nccl_communicators(const std::vector<int>& devices);

// The ranks of an MPI job of host ranks: `local_ranks` in this process (the same count in every
// process, checked), each to be driven by its own thread. The ranks of process p are
// p * local_ranks ... p * local_ranks + local_ranks - 1 of size() = processes * local_ranks.
// Joins the MPI world first (process_world.hpp). Results equal the in-process backend's to the
// bit (the same reduction order); a rank that waits more than `timeout_seconds` throws, naming
// the ranks that never arrived, and mismatched calls throw on every rank. Throws without MPI.
std::vector<CommunicatorPtr> make_mpi_communicators(int local_ranks,
                                                    double timeout_seconds = 300.0);
// make_mpi_communicators(1)'s only rank: this process's rank of MPI_COMM_WORLD.
CommunicatorPtr make_mpi_communicator();

// One NCCL communicator over the GPUs of every process of an MPI job: this process's `devices`
// (the same count in every process, checked) are ranks p * devices.size() + i. The NCCL id is
// made by process 0 and broadcast over MPI; the ranks are created together (ncclCommInitRank in
// one NCCL group). Needs both backends.
std::vector<CommunicatorPtr> make_nccl_communicators_over_mpi(const std::vector<int>& devices);

}  // namespace ember::distributed
