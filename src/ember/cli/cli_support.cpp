#include "ember/cli/cli_support.hpp"

#include <charconv>

#include "ember/core/error.hpp"

namespace ember::cli {

std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    std::int64_t v = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size()) {
      EMBER_THROW_AS(ConfigError, flag, ": expected a comma-separated list of integers, got '",
                     text, "'");
    }
    out.push_back(v);
    at = end + 1;
  }
  return out;
}

}  // namespace ember::cli
