#include "ember/core/runtime_options.hpp"

#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "ember/core/error.hpp"

namespace ember {

namespace {

struct Known {
  const char* variable;
  const char* meaning;
  const char* default_value;  // null: the allocator mode's default, kDefaultAllocatorMode
};

// The whole list of Ember's environment variables.
constexpr Known kKnown[] = {
    {"EMBER_ALLOCATOR",
     "device and pinned memory: caching, expandable (caching with expandable segments) or raw",
     nullptr},
    {"EMBER_COPY_THREADS",
     "threads of the parallel host copies and the staged pageable copies (a positive integer)",
     "staged copies: measured per device; others: half the cores, 1 to 8"},
    {"EMBER_LOG_LEVEL", "log level: trace, debug, info, warn, error or off", "info"},
    {"EMBER_KEY_EXCHANGE",
     "processes' key exchange: auto (the ranks gather one-hot keys), host (every key through "
     "host memory) or mpi (every key by MPI)",
     "auto"},
};

// The first of the launchers' variables that is a whole number (-1 when none is).
int first_number(const RuntimeOptions::Lookup& lookup, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = lookup(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 0 && n <= 1 << 24) return static_cast<int>(n);
  }
  return -1;
}

void read_launcher(const RuntimeOptions::Lookup& lookup, int& size, int& rank) {
  const int n = first_number(lookup, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"});
  size = n > 0 ? n : 0;
  rank = size > 0
             ? first_number(lookup, {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"})
             : -1;
}

// Sets `out` to the choice whose to_string() is `value`; false when none is.
template <class Mode>
bool pick(const std::string& value, std::initializer_list<Mode> choices, Mode& out) {
  for (Mode m : choices) {
    if (value == to_string(m)) {
      out = m;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* to_string(AllocatorMode mode) {
  switch (mode) {
    case AllocatorMode::Caching:
      return "caching";
    case AllocatorMode::Expandable:
      return "expandable";
    case AllocatorMode::Raw:
      return "raw";
  }
  return "?";
}

const char* to_string(KeyExchangeMode mode) {
  switch (mode) {
    case KeyExchangeMode::Auto:
      return "auto";
    case KeyExchangeMode::Host:
      return "host";
    case KeyExchangeMode::Mpi:
      return "mpi";
  }
  return "?";
}

const RuntimeOptions& RuntimeOptions::get() {
  static const RuntimeOptions options = parse([](const char* name) { return std::getenv(name); });
  return options;
}

RuntimeOptions RuntimeOptions::parse(const Lookup& lookup) {
  RuntimeOptions o;
  for (const Known& k : kKnown) {
    Setting s{
        k.variable, "",
        k.meaning,  k.default_value != nullptr ? k.default_value : to_string(kDefaultAllocatorMode),
        false,      ""};
    if (const char* v = lookup(k.variable); v != nullptr && *v != '\0') {
      s.value = v;
      s.set = true;
    }
    std::string error;
    const std::string_view name(k.variable);
    if (s.set && name == "EMBER_ALLOCATOR") {
      if (!pick(s.value, {AllocatorMode::Caching, AllocatorMode::Expandable, AllocatorMode::Raw},
                o.allocator_)) {
        error = cat("use caching, expandable or raw (the default is ",
                    to_string(kDefaultAllocatorMode), ")");
      }
    } else if (s.set && name == "EMBER_COPY_THREADS") {
      char* end = nullptr;
      const long n = std::strtol(s.value.c_str(), &end, 10);
      if (end == s.value.c_str() || *end != '\0' || n < 1 || n > 1024) {
        error = "use a whole number of threads from 1 to 1024";
      } else {
        o.copy_threads_ = static_cast<int>(n);
      }
    } else if (s.set && name == "EMBER_LOG_LEVEL") {
      static constexpr std::string_view kLevels[] = {"trace", "debug", "info",
                                                     "warn",  "error", "off"};
      bool known = false;
      for (std::string_view l : kLevels)
        known = known || s.value == l;
      if (!known) error = "use trace, debug, info, warn, error or off";
    } else if (s.set && name == "EMBER_KEY_EXCHANGE") {
      if (!pick(s.value, {KeyExchangeMode::Auto, KeyExchangeMode::Host, KeyExchangeMode::Mpi},
                o.key_exchange_)) {
        error = "use auto, host or mpi (the default is auto)";
      }
    }
    s.error = std::move(error);
    o.settings_.push_back(std::move(s));
  }
  read_launcher(lookup, o.launcher_world_size_, o.launcher_world_rank_);
  return o;
}

const RuntimeOptions::Setting& RuntimeOptions::setting(const char* variable) const {
  for (const Setting& s : settings_) {
    if (s.variable == variable) return s;
  }
  EMBER_THROW("RuntimeOptions: no variable ", variable);
}

void RuntimeOptions::check(const char* variable) const {
  const Setting& s = setting(variable);
  if (!s.error.empty()) {
    EMBER_THROW_AS(ConfigError, variable, "='", s.value, "' is not understood: ", s.error);
  }
}

AllocatorMode RuntimeOptions::allocator() const {
  check("EMBER_ALLOCATOR");
  return allocator_;
}

int RuntimeOptions::copy_threads() const {
  check("EMBER_COPY_THREADS");
  return copy_threads_;
}

const std::string& RuntimeOptions::log_level() const {
  check("EMBER_LOG_LEVEL");
  return setting("EMBER_LOG_LEVEL").value;
}

KeyExchangeMode RuntimeOptions::key_exchange() const {
  check("EMBER_KEY_EXCHANGE");
  return key_exchange_;
}

}  // namespace ember
