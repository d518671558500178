// The environment variables Ember reads, read once, in one place.
//
// Every EMBER_* variable that changes how the process runs is listed here, with what it means and
// its default; `ember --version -v` prints them with the values in effect. Nothing else in Ember
// calls getenv for its own settings.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ember {

enum class AllocatorMode { Caching, Expandable, Raw };

// The allocator mode when EMBER_ALLOCATOR is unset: caching with expandable segments (ordinary
// segments where the device cannot map memory), because it keeps fragmentation within the 10 %
// target where the fixed segment sizes cannot (docs/memory.md, "Fragmentation"). Flipping this
// line back to Caching is all it takes to make the fixed segments the default again.
inline constexpr AllocatorMode kDefaultAllocatorMode = AllocatorMode::Expandable;
// "caching", "expandable" or "raw".
const char* to_string(AllocatorMode mode);

// How a job of several processes moves the keys of its batches between them (shared reading,
// docs/multi-process.md): Auto lets the ranks gather one-hot training batches' keys over their
// own communicator (GPUs, or one CPU rank a process) and moves the rest through host memory
// the processes share on one machine (else by MPI); Host moves every batch's keys that way;
// Mpi moves every batch's keys by MPI. The last two are for comparison.
enum class KeyExchangeMode { Auto, Host, Mpi };
// "auto", "host" or "mpi".
const char* to_string(KeyExchangeMode mode);

class RuntimeOptions {
 public:
  // One variable: its name, its raw value ("" when unset), what it does and its default.
  struct Setting {
    std::string variable;
    std::string value;
    std::string meaning;
    std::string default_value;
    bool set = false;
    std::string error;  // why the value does not parse ("" when it does)
  };
  using Lookup = std::function<const char*(const char*)>;

  // The process's options, read from the environment at the first call.
  static const RuntimeOptions& get();
  // Options from any lookup (tests); a value that does not parse is remembered, and the accessor
  // of that option throws ConfigError naming the variable, the value and what it accepts.
  static RuntimeOptions parse(const Lookup& lookup);

  // EMBER_ALLOCATOR: caching, expandable or raw; kDefaultAllocatorMode when unset.
  AllocatorMode allocator() const;
  // EMBER_COPY_THREADS: threads of the parallel host copies; 0 when unset (derived from the
  // machine by the copy code).
  int copy_threads() const;
  // EMBER_LOG_LEVEL: "" when unset (info); otherwise one of trace, debug, info, warn, error, off.
  const std::string& log_level() const;
  // EMBER_KEY_EXCHANGE: auto, host or mpi; Auto when unset.
  KeyExchangeMode key_exchange() const;

  const std::vector<Setting>& settings() const { return settings_; }

  // Not Ember's own settings but what an MPI launcher tells the processes it starts: the world
  // size announced by mpirun (OpenMPI's OMPI_COMM_WORLD_SIZE, MPICH/Hydra's PMI_SIZE, MVAPICH's
  // MV2_COMM_WORLD_SIZE) and this process's rank in it; 0 and -1 when no launcher started it.
  int launcher_world_size() const { return launcher_world_size_; }
  int launcher_world_rank() const { return launcher_world_rank_; }

 private:
  const Setting& setting(const char* variable) const;
  void check(const char* variable) const;

  std::vector<Setting> settings_;
  AllocatorMode allocator_ = kDefaultAllocatorMode;
  int copy_threads_ = 0;
  KeyExchangeMode key_exchange_ = KeyExchangeMode::Auto;
  int launcher_world_size_ = 0;
  int launcher_world_rank_ = -1;
};

}  // namespace ember
