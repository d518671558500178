// Small helpers shared by the commands: parsing the comma lists and enum words of flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::cli {

// "3,5,7" -> {3, 5, 7}; a ConfigError naming `flag` on anything else.
std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& flag);

}  // namespace ember::cli
