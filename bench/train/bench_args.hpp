// Command-line pieces the training benchmarks share.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace ember::bench {

// "0.02,0.1,0.25" -> {0.02, 0.1, 0.25} (std::stod's exception on anything else).
inline std::vector<double> parse_ratios(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    out.push_back(std::stod(part));
  return out;
}

}  // namespace ember::bench
