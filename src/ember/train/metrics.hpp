// Evaluation metrics over all evaluated samples: AUC (exact, ties counted half, as sklearn's
// roc_auc_score), AverageLoss (the mean loss per sample) and, when asked for, HugeCTR's HitRate
// (of the samples scored above a threshold, the fraction labelled 1), from the logits the
// network produced and the labels. A NaN score (a diverged model, non-finite inputs) makes the
// AUC NaN: see data::exact_auc; the count is reported so that callers can say why.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ember/network/layers/loss_layers.hpp"

namespace ember::train {

struct EvalResult {
  double auc = 0;  // NaN when one class is absent or a score is NaN
  double average_loss = 0;
  std::optional<double> hit_rate;  // when asked for; NaN when no score is above the threshold
  std::int64_t samples = 0;
  std::int64_t nan_scores = 0;  // scores that are NaN
};

class EvalAccumulator {
 public:
  explicit EvalAccumulator(network::LossLayer::Kind kind, std::vector<float> target_weight = {},
                           std::optional<double> hit_rate_threshold = std::nullopt);

  // `rows` samples: logits [rows, logit_cols] and labels [rows, label_cols], row-major.
  void add(std::span<const float> logits, std::span<const float> labels, std::int64_t rows);
  EvalResult finish() const;
  // The predicted probability of every sample (of every column for MultiCrossEntropy), in the
  // order added, and the matching labels.
  const std::vector<double>& scores() const { return scores_; }
  const std::vector<float>& labels() const { return labels_; }

 private:
  network::LossLayer::Kind kind_;
  std::vector<float> target_weight_;
  std::optional<double> hit_rate_threshold_;
  std::vector<double> scores_;
  std::vector<float> labels_;
  double loss_sum_ = 0;
  std::int64_t samples_ = 0;
};

// The binary cross entropy of a logit x against a label y, stable for any |x|.
double binary_cross_entropy(double x, double y);

}  // namespace ember::train
