#include "ember/data/auc.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "ember/core/error.hpp"

namespace ember::data {

double exact_auc(std::span<const double> scores, std::span<const float> labels) {
  EMBER_CHECK(scores.size() == labels.size(), "exact_auc: ", scores.size(), " scores but ",
              labels.size(), " labels");
  // NaN compares false with everything: sorting with it is undefined and the tie walk below
  // would never leave a NaN's group.
  if (count_nan(scores) > 0) return std::numeric_limits<double>::quiet_NaN();
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Walk groups of equal score from the lowest: each positive beats every negative below its
  // group and ties half of the negatives inside it.
  double wins = 0;
  double negatives_below = 0;
  double positives = 0, negatives = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    double pos = 0, neg = 0;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) {
      if (labels[order[j]] > 0.5f)
        ++pos;
      else
        ++neg;
      ++j;
    }
    wins += pos * (negatives_below + 0.5 * neg);
    negatives_below += neg;
    positives += pos;
    negatives += neg;
    i = j;
  }
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  return wins / (positives * negatives);
}

std::size_t count_nan(std::span<const double> scores) {
  return static_cast<std::size_t>(
      std::count_if(scores.begin(), scores.end(), [](double s) { return std::isnan(s); }));
}

}  // namespace ember::data
