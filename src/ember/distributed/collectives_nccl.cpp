// The NCCL backend: one communicator per CUDA device. Calls are queued on the given stream (the
// device's current stream by default) and return without waiting, like the other CUDA ops.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <numeric>
#include <shared_mutex>
#include <string>
#include <vector>

#include "ember/core/error.hpp"
#include "ember/core/stream.hpp"
#include "ember/distributed/collectives.hpp"

#if EMBER_WITH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#if EMBER_WITH_NCCL && EMBER_WITH_MPI
#include "ember/distributed/mpi_check.hpp"
#include "ember/distributed/process_world.hpp"
#endif

namespace ember::distributed {

bool nccl_compiled() {
#if EMBER_WITH_NCCL
  return true;
#else
  return false;
#endif
}

#if EMBER_WITH_NCCL

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::I32:
      return ncclInt32;
    case DType::U32:
      return ncclUint32;
    case DType::I64:
      return ncclInt64;
    case DType::U64:
      return ncclUint64;
    default:
      EMBER_THROW("NCCL collectives do not support dtype ", dtype_name(t));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

// NVLink multicast (NVLS) must stay off on the machines Ember runs on, whatever the environment
// says: NCCL reads the variable when a communicator is created.
void keep_nvls_off() {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
}

// The communicators this process made together, and whether one of its ranks failed. Calls take
// the lock shared; abort() takes it alone where it can, so that no communicator is freed while a
// thread is inside an NCCL call on it (the waits for the device happen outside, on streams).
// A thread stuck inside a call (a connection to the failed rank that never comes) can only be
// freed by ncclCommAbort itself, so abort() goes ahead without the lock after a while.
struct NcclGroup {
  std::shared_timed_mutex mutex;
  std::vector<ncclComm_t> comms;  // by local rank; null once aborted or destroyed
  std::vector<int> devices;
  std::atomic<bool> aborted{false};

  std::string reason() {
    std::lock_guard lock(reason_mutex);
    return reason_;
  }

  void abort(const std::string& why) {
    {
      std::lock_guard lock(reason_mutex);
      if (aborted.load()) return;
      reason_ = why;
      aborted.store(true);
    }
    std::unique_lock lock(mutex, std::defer_lock);
    (void)lock.try_lock_for(std::chrono::seconds(2));
    for (std::size_t i = 0; i < comms.size(); ++i) {
      if (comms[i] == nullptr) continue;
      int previous = -1;
      (void)cudaGetDevice(&previous);
      (void)cudaSetDevice(devices[i]);
      (void)ncclCommAbort(comms[i]);
      if (previous >= 0) (void)cudaSetDevice(previous);
      comms[i] = nullptr;
    }
  }

 private:
  std::mutex reason_mutex;
  std::string reason_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclGroup> group, int local, int rank, int size)
      : group_(std::move(group)),
        local_(local),
        rank_(rank),
        size_(size),
        device_(group_->devices[static_cast<std::size_t>(local)]) {
    DeviceGuard guard(device_);
    EMBER_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(float)));
  }
  ~NcclCommunicator() override {
    if (barrier_word_ != nullptr) {
      DeviceGuard guard(device_);
      (void)cudaFree(barrier_word_);
    }
    std::unique_lock lock(group_->mutex);
    ncclComm_t& comm = group_->comms[static_cast<std::size_t>(local_)];
    if (comm != nullptr) (void)ncclCommDestroy(comm);
    comm = nullptr;
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Place place() const override { return Place::cuda(device_); }
  const char* backend() const override { return "nccl"; }

  void all_reduce(const Tensor& inout, ReduceOp op, StreamHandle stream) override {
    check_all_reduce(inout);
    DeviceGuard guard(device_);
    guarded([&] {
      EMBER_NCCL_CHECK(ncclAllReduce(inout.data(), inout.data(), inout.numel(),
                                     nccl_type(inout.dtype()), nccl_op(op), comm(), pick(stream)));
    });
  }

  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op,
                      StreamHandle stream) override {
    check_reduce_scatter(in, out);
    DeviceGuard guard(device_);
    guarded([&] {
      EMBER_NCCL_CHECK(ncclReduceScatter(in.data(), out.data(), out.numel(), nccl_type(in.dtype()),
                                         nccl_op(op), comm(), pick(stream)));
    });
  }

  void all_gather(const Tensor& in, const Tensor& out, StreamHandle stream) override {
    check_all_gather(in, out);
    DeviceGuard guard(device_);
    guarded([&] {
      EMBER_NCCL_CHECK(ncclAllGather(in.data(), out.data(), in.numel(), nccl_type(in.dtype()),
                                     comm(), pick(stream)));
    });
  }

  void all_to_all_v(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                    const Tensor& recv, const std::vector<std::int64_t>& recv_counts,
                    StreamHandle stream) override {
    check_all_to_all_v(send, send_counts, recv, recv_counts);
    DeviceGuard guard(device_);
    const ncclDataType_t type = nccl_type(send.dtype());
    const std::size_t esize = send.element_size();
    const auto* src = static_cast<const std::byte*>(send.data());
    auto* dst = static_cast<std::byte*>(recv.data());
    const cudaStream_t s = pick(stream);
    guarded([&] {
      const ncclComm_t c = comm();
      std::int64_t send_offset = 0, recv_offset = 0;
      EMBER_NCCL_CHECK(ncclGroupStart());
      for (int p = 0; p < size_; ++p) {
        if (send_counts[p] > 0) {
          EMBER_NCCL_CHECK(ncclSend(src + send_offset * esize, send_counts[p], type, p, c, s));
        }
        if (recv_counts[p] > 0) {
          EMBER_NCCL_CHECK(ncclRecv(dst + recv_offset * esize, recv_counts[p], type, p, c, s));
        }
        send_offset += send_counts[p];
        recv_offset += recv_counts[p];
      }
      EMBER_NCCL_CHECK(ncclGroupEnd());
    });
  }

  void broadcast(const Tensor& inout, int root, StreamHandle stream) override {
    check_broadcast(inout, root);
    DeviceGuard guard(device_);
    guarded([&] {
      EMBER_NCCL_CHECK(ncclBroadcast(inout.data(), inout.data(), inout.numel(),
                                     nccl_type(inout.dtype()), root, comm(), pick(stream)));
    });
  }

  void barrier() override {
    DeviceGuard guard(device_);
    const cudaStream_t s = pick(nullptr);
    guarded([&] {
      EMBER_NCCL_CHECK(
          ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm(), s));
    });
    EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
    throw_if_aborted();  // an abort ends the wait early, not with every rank there
  }

  void abort(const std::string& why) override {
    group_->abort(cat("rank ", rank_, " failed: ", why));
  }

 private:
  cudaStream_t pick(StreamHandle stream) const {
    return stream != nullptr ? stream : current_stream(device_);
  }

  void throw_if_aborted() const {
    if (group_->aborted.load()) {
      EMBER_THROW("rank ", rank_, ": the communicator group is broken: ", group_->reason());
    }
  }

  // Runs NCCL calls under the group's shared lock, after checking that the group still stands. A
  // call that fails because another rank aborted the group meanwhile (one stuck connecting to the
  // failed rank returns ncclInternalError then) reports the broken group, not NCCL's code.
  template <class F>
  void guarded(F&& calls) const {
    const auto lock = enter();
    try {
      calls();
    } catch (const Error&) {
      throw_if_aborted();
      throw;
    }
  }

  // The shared lock for one NCCL call, after checking that the group still stands.
  std::shared_lock<std::shared_timed_mutex> enter() const {
    throw_if_aborted();
    std::shared_lock lock(group_->mutex);
    if (group_->aborted.load()) {
      lock.unlock();
      throw_if_aborted();
    }
    return lock;
  }

  ncclComm_t comm() const { return group_->comms[static_cast<std::size_t>(local_)]; }

  std::shared_ptr<NcclGroup> group_;
  int local_, rank_, size_, device_;
  void* barrier_word_ = nullptr;
};

}  // namespace

std::vector<CommunicatorPtr> make_nccl_communicators(const std::vector<int>& devices) {
  EMBER_CHECK(!devices.empty(), "make_nccl_communicators: no devices given");
  for (int d : devices)
    require_cuda_device(d, "make_nccl_communicators");
  keep_nvls_off();
  const int n = static_cast<int>(devices.size());
  auto group = std::make_shared<NcclGroup>();
  group->devices = devices;
  group->comms.assign(devices.size(), nullptr);
  EMBER_NCCL_CHECK(ncclCommInitAll(group->comms.data(), n, devices.data()));
  std::vector<CommunicatorPtr> out;
  out.reserve(n);
  for (int r = 0; r < n; ++r) {
    out.push_back(std::make_unique<NcclCommunicator>(group, r, r, n));
  }
  return out;
}

#if EMBER_WITH_MPI
std::vector<CommunicatorPtr> make_nccl_communicators_over_mpi(const std::vector<int>& devices) {
  EMBER_CHECK(!devices.empty(), "make_nccl_communicators_over_mpi: no devices given");
  for (int d : devices)
    require_cuda_device(d, "make_nccl_communicators_over_mpi");
  const ProcessWorld world = join_mpi_world();
  const int local = static_cast<int>(devices.size());
  const std::vector<std::int64_t> counts = all_gather_processes({local});
  for (int p = 0; p < world.size; ++p) {
    if (counts[static_cast<std::size_t>(p)] != local) {
      EMBER_THROW_AS(ConfigError, "MPI job: process ", world.rank, " trains on ", local,
                     " GPU(s) but process ", p, " on ", counts[static_cast<std::size_t>(p)],
                     "; every process must drive the same number of GPUs");
    }
  }
  keep_nvls_off();
  ncclUniqueId id;
  if (world.rank == 0) EMBER_NCCL_CHECK(ncclGetUniqueId(&id));
  EMBER_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  const int size = world.size * local;
  auto group = std::make_shared<NcclGroup>();
  group->devices = devices;
  group->comms.assign(devices.size(), nullptr);
  DeviceGuard restore(devices.front());
  EMBER_NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < local; ++i) {
    EMBER_CUDA_CHECK(cudaSetDevice(devices[static_cast<std::size_t>(i)]));
    EMBER_NCCL_CHECK(ncclCommInitRank(&group->comms[static_cast<std::size_t>(i)], size, id,
                                      world.rank * local + i));
  }
  EMBER_NCCL_CHECK(ncclGroupEnd());
  std::vector<CommunicatorPtr> out;
  for (int i = 0; i < local; ++i) {
    out.push_back(std::make_unique<NcclCommunicator>(group, i, world.rank * local + i, size));
  }
  return out;
}
#else
std::vector<CommunicatorPtr> make_nccl_communicators_over_mpi(const std::vector<int>&) {
  EMBER_THROW("make_nccl_communicators_over_mpi: this build has no MPI");
}
#endif

#else

std::vector<CommunicatorPtr> make_nccl_communicators(const std::vector<int>&) {
  throw_cuda_unavailable("make_nccl_communicators (this build has no NCCL)");
}
std::vector<CommunicatorPtr> make_nccl_communicators_over_mpi(const std::vector<int>&) {
  throw_cuda_unavailable("make_nccl_communicators_over_mpi (this build has no NCCL)");
}

#endif

}  // namespace ember::distributed
