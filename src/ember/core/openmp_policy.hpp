// OpenMP's idle threads spin by default (libgomp: about 300k iterations before sleeping). On a
// machine with few cores they starve OpenBLAS's threads and the input pipeline's; measured on a
// 2-core machine, training ran at 5.5k samples/s spinning and 30k passive. libgomp reads
// OMP_WAIT_POLICY once, when it loads, so a program cannot change it for itself afterwards.
#pragma once

namespace ember {

// When OMP_WAIT_POLICY is unset, sets it to "passive" and re-executes the program with the same
// arguments (so the setting takes effect); returns only when nothing needed doing or the
// re-execution failed (the program then carries on as it is). Call first thing in main().
void prefer_passive_openmp(char** argv);

// Processes that an MPI launcher started on the same machine share its cores: unless
// OMP_NUM_THREADS says otherwise, each process's OpenMP loops take cores / (2 x processes on this
// machine) threads (at least 1) instead of every core, leaving the other half to the processes'
// reader threads and their key exchange. Measured on 2 H200s and 32 cores, one process per GPU
// (DLRM-Kaggle fp32, 2 processes): 32 threads each 3.30 M samples/s, 16 threads 3.44 M, 8 threads
// 3.77 M and 4.04 M (two runs). Reads the launcher's local process count (OpenMPI, MPICH,
// MVAPICH2); returns the threads set, or 0 when it changed nothing.
int share_cores_with_local_processes();

}  // namespace ember
