#include "ember/train/session_job.hpp"

#include <exception>

#include "ember/core/device.hpp"
#include "ember/core/error.hpp"

namespace ember::train {

namespace {

std::vector<Place> choose_places(const ModelConfig& c, const SessionOptions& o,
                                 const distributed::ProcessWorld& world) {
  // The solver's device was checked with the configuration; the caller's is checked here.
  if (!o.device.empty() && o.device != "cpu" && o.device != "cuda") {
    EMBER_THROW_AS(ConfigError, "unknown device '", o.device, "' (expected cpu or cuda)");
  }
  // GPUs or CPU ranks asked for by the caller (--gpus, --cpu-ranks) choose the device over the
  // solver's, and contradict a device the caller names: none of them is dropped without a word.
  if (!o.gpus.empty() && o.cpu_ranks > 0) {
    EMBER_THROW_AS(ConfigError, "both GPUs (", o.gpus.size(), ", --gpus / gpus=) and ", o.cpu_ranks,
                   " CPU rank(s) (--cpu-ranks / cpu_ranks=) were asked for; give one of them");
  }
  if (o.device == "cpu" && !o.gpus.empty()) {
    EMBER_THROW_AS(ConfigError,
                   "GPUs (--gpus / gpus=) were asked for on the CPU (--device / device= cpu)");
  }
  if (o.device == "cuda" && o.cpu_ranks > 0) {
    EMBER_THROW_AS(ConfigError, o.cpu_ranks,
                   " CPU rank(s) (--cpu-ranks / cpu_ranks=) were asked for on the GPU (--device / "
                   "device= cuda)");
  }
  std::string device = o.device;
  if (device.empty()) {
    device = !o.gpus.empty()            ? "cuda"
             : o.cpu_ranks > 0          ? "cpu"
             : !c.solver.device.empty() ? c.solver.device
             : cuda_available()         ? "cuda"
                                        : "cpu";
  }
  std::vector<Place> places;
  if (device == "cuda") {
    const std::vector<int> gpus =
        !o.gpus.empty() ? o.gpus : c.solver.gpu_list(world.rank, world.size);
    for (int g : gpus) {
      require_cuda_device(g, "training on the GPU");
      places.push_back(Place::cuda(g));
    }
  } else {
    const int n = o.cpu_ranks > 0 ? o.cpu_ranks : c.solver.cpu_ranks;
    places.assign(static_cast<std::size_t>(n), Place::host());
  }
  return places;
}

// Processes that were given different configurations, devices or rank counts would train
// different models or wait for each other forever: every process compares all of them and
// throws alike.
void check_processes_agree(const SessionJob& job, const ModelConfig& config) {
  const bool cuda = job.places.front().is_cuda();
  const std::vector<std::int64_t> mine = {static_cast<std::int64_t>(config_hash(config)),
                                          static_cast<std::int64_t>(job.places.size()),
                                          cuda ? 1 : 0};
  const std::vector<std::int64_t> all = distributed::all_gather_processes(mine);
  for (int p = 0; p < job.world.size; ++p) {
    const std::int64_t* other = &all[static_cast<std::size_t>(p) * mine.size()];
    if (other[0] != mine[0]) {
      EMBER_THROW_AS(ConfigError, "process ", p, " was given another configuration (hash ",
                     std::hex, static_cast<std::uint64_t>(other[0]), " against this process's ",
                     static_cast<std::uint64_t>(mine[0]), std::dec,
                     "): every process of an MPI job must run the same configuration and --set "
                     "flags");
    }
    if (other[2] != mine[2]) {
      EMBER_THROW_AS(ConfigError, "process ", p, " trains on ", other[2] != 0 ? "GPUs" : "the CPU",
                     " but this process on ", cuda ? "GPUs" : "the CPU",
                     "; mixed CPU and GPU jobs are not supported");
    }
    if (other[1] != mine[1]) {
      EMBER_THROW_AS(ConfigError, "process ", p, " has ", other[1],
                     " rank(s) but this process has ", mine[1],
                     "; every process of an MPI job must drive the same number of GPUs or CPU "
                     "ranks");
    }
  }
}

}  // namespace

std::string SessionJob::process_prefix() const {
  return world.size > 1 ? cat("process ", world.rank, " of ", world.size, ": ") : std::string();
}

std::uint64_t config_hash(const ModelConfig& config) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const unsigned char c : config.json.dump()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

SessionJob plan_session_job(const ModelConfig& config, const SessionOptions& options) {
  SessionJob job;
  if (options.mpi || distributed::launched_by_mpi()) {
    job.world = distributed::join_mpi_world();
    job.multi_process = job.world.size > 1 || options.mpi;
  }
  // A device missing on one node is an error on every process (the others would wait for it).
  std::exception_ptr failure;
  std::string message;
  try {
    job.places = choose_places(config, options, job.world);
  } catch (const std::exception& e) {
    failure = std::current_exception();
    message = e.what();
  }
  if (job.multi_process) message = distributed::first_process_failure(message);
  if (failure && !job.multi_process) std::rethrow_exception(failure);
  if (!message.empty()) EMBER_THROW_AS(ConfigError, message);
  const int local = static_cast<int>(job.places.size());
  job.world_ranks = local * job.world.size;
  job.first_rank = local * job.world.rank;
  if (job.multi_process) check_processes_agree(job, config);
  const std::int64_t batch = config.solver.batchsize;
  if (batch % job.world_ranks != 0) {
    EMBER_THROW_AS(ConfigError, "solver.batchsize ", batch, " must be a multiple of the ",
                   job.world_ranks, " training devices",
                   job.world.size > 1
                       ? cat(" (", local, " in each of ", job.world.size, " processes)")
                       : std::string());
  }
  return job;
}

std::vector<distributed::CommunicatorPtr> make_job_communicators(const SessionJob& job) {
  const std::vector<Place>& places = job.places;
  std::vector<distributed::CommunicatorPtr> comms;
  if (job.multi_process) {
    if (places.front().is_cuda()) {
      if (!distributed::nccl_compiled()) {
        EMBER_THROW_AS(ConfigError,
                       "training on GPUs over MPI needs NCCL, which this build of "
                       "Ember does not have");
      }
      std::vector<int> devices;
      for (const Place& p : places)
        devices.push_back(p.device());
      return distributed::make_nccl_communicators_over_mpi(devices);
    }
    return distributed::make_mpi_communicators(static_cast<int>(places.size()));
  }
  if (places.size() == 1) {
    comms.push_back(distributed::make_solo_communicator(places.front()));
  } else if (places.front().is_cuda()) {
    if (!distributed::nccl_compiled()) {
      EMBER_THROW_AS(ConfigError, "training on ", places.size(),
                     " GPUs needs NCCL, which this build of Ember does not have");
    }
    std::vector<int> devices;
    for (const Place& p : places)
      devices.push_back(p.device());
    comms = distributed::make_nccl_communicators(devices);
  } else {
    comms = distributed::make_in_process_communicators(static_cast<int>(places.size()));
  }
  return comms;
}

std::vector<double> gather_rank_values(const SessionJob& job, const std::vector<double>& local) {
  if (!job.multi_process) return local;
  return distributed::all_gather_processes_f64(local);
}

}  // namespace ember::train
