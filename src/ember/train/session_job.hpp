// Where a session's ranks are: this process's devices (GPUs or CPU ranks), and, in a job of
// several processes started by an MPI launcher, how they sit among the ranks of all processes.
// Internal to the session's files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/core/place.hpp"
#include "ember/distributed/collectives.hpp"
#include "ember/distributed/process_world.hpp"
#include "ember/train/model_config.hpp"
#include "ember/train/session.hpp"

namespace ember::train {

struct SessionJob {
  distributed::ProcessWorld world;  // {0, 1} for one process
  bool multi_process = false;       // the ranks talk over MPI (several processes, or --mpi)
  std::vector<Place> places;        // this process's ranks
  int world_ranks = 1;              // the ranks of every process
  int first_rank = 0;               // this process's first rank among them

  bool is_output_process() const { return world.rank == 0; }
  // "process 1 of 3: " for messages ("" in one process).
  std::string process_prefix() const;
};

// Joins the MPI job when an MPI launcher started this process (or options.mpi asks), chooses the
// devices of this process and checks what every process must agree on: the configuration (a
// hash of it) and the rank count. Throws ConfigError on every process alike.
SessionJob plan_session_job(const ModelConfig& config, const SessionOptions& options);

// This process's communicators, one per rank of `job.places`.
std::vector<distributed::CommunicatorPtr> make_job_communicators(const SessionJob& job);

// Every rank's value, in rank order, from each process's values of its own ranks.
std::vector<double> gather_rank_values(const SessionJob& job, const std::vector<double>& local);

// FNV-1a of the configuration as parsed (after overrides), the same bytes on every process that
// was given the same configuration.
std::uint64_t config_hash(const ModelConfig& config);

}  // namespace ember::train
