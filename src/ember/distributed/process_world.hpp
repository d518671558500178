// The processes of a job started by an MPI launcher (`mpirun -np N ember ...`): whether this
// process was started that way, its process rank and the process count, and the few process-level
// exchanges a multi-process run needs before (or beside) its communicators: agreeing on numbers
// (configuration hash, rank counts) and ending every process when one fails.
//
// Every call here is made by one thread per process (the main thread), in the same order on
// every process. Without MPI (not compiled, or not started by a launcher) the world is this one
// process: rank 0 of 1, and the exchanges are local.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::distributed {

struct ProcessWorld {
  int rank = 0;      // this process
  int size = 1;      // processes in the job
  bool mpi = false;  // joined through MPI
};

// True when an MPI launcher started this process (its environment says so), whether or not MPI
// has been initialised yet.
bool launched_by_mpi();

// Initialises MPI (MPI_THREAD_MULTIPLE, finalised at exit) on the first call and returns the
// world. Throws when this build has no MPI, or when the MPI library cannot serve several threads.
ProcessWorld join_mpi_world();

// The world joined by join_mpi_world(), or this process alone when it was not called.
ProcessWorld process_world();

// Every process contributes `mine` (the same length everywhere, checked); every process gets all
// contributions, process after process. The world of one process returns `mine`.
std::vector<std::int64_t> all_gather_processes(const std::vector<std::int64_t>& mine);

// The same for doubles (losses).
std::vector<double> all_gather_processes_f64(const std::vector<double>& mine);
// Contributions of any length, concatenated in process order (evaluation scores).
std::vector<float> concat_processes(const std::vector<float>& mine);

// Every process's `text` (any length), in process order, on every process (a checkpoint's
// file hashes, gathered for the process that writes meta.json).
std::vector<std::string> all_gather_process_strings(const std::string& mine);

// Process 0's `text` on every process.
std::string broadcast_from_process_0(const std::string& text);

// Returns once every process has called it.
void barrier_processes();

// For a step that can fail on one process only (writing a file): every process passes its own
// failure ("" for none) and gets the same answer, "" when no process failed, else the first
// failing process's message prefixed with "process <p>: ". So that all of them throw, or none.
std::string first_process_failure(const std::string& mine);

// Ends every process of the job with `status` (MPI_Abort under MPI, std::_Exit otherwise), after
// flushing the standard streams. For errors that leave the other processes waiting in a
// collective: they cannot learn of it any other way.
[[noreturn]] void abort_processes(int status);

// "process 1 of 3" for messages ("" in a world of one process).
std::string describe_process();

}  // namespace ember::distributed
