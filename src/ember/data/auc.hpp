// The exact area under the ROC curve, ties counted half: the number sklearn's roc_auc_score
// gives. Used for the synthetic teacher's AUC (the best a model can reach on generated data).
#pragma once

#include <span>

namespace ember::data {

// `labels` are 0/1 (anything > 0.5 is positive). NaN when one class is absent.
double exact_auc(std::span<const double> scores, std::span<const float> labels);

}  // namespace ember::data
