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

}  // namespace ember
