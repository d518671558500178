// The exact area under the ROC curve, ties counted half: the number sklearn's roc_auc_score
// gives. Used for the synthetic teacher's AUC (the best a model can reach on generated data).
#pragma once

#include <cstddef>
#include <span>

namespace ember::data {

// `labels` are 0/1 (anything > 0.5 is positive). NaN when one class is absent, and NaN when any
// score is NaN: a NaN score comes from a diverged model or non-finite inputs, and ranking it
// anywhere would give a number that looks like a result but is not one (callers warn). Infinite
// scores are ordered like any other. Well defined (and terminating) for any input.
double exact_auc(std::span<const double> scores, std::span<const float> labels);

// How many of `scores` are NaN (the reason an AUC is NaN, for messages).
std::size_t count_nan(std::span<const double> scores);

}  // namespace ember::data
