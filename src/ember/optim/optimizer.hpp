// The optimizers HugeCTR offers, shared by the sparse (embedding) and dense (network) updates:
// their configuration, the learning-rate schedule, and the per-element update rules (usable on
// the host and in CUDA kernels, so both paths compute the same thing).
//
// Rules, per element, with g the gradient divided by the loss scaler:
//   SGD          w -= lr * g
//   MomentumSGD  m = mu * m - lr * g;                 w += m
//   Nesterov     m' = mu * m - lr * g;                w += -mu * m + (1 + mu) * m';  m = m'
//   Adam         m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//                w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
//   AdaGrad      a += g^2;                            w -= lr * g / (sqrt(a) + eps)
//   RMSProp      v = beta v + (1-beta) g^2;           w -= lr * g / (sqrt(v) + eps)
//   Ftrl         n' = n + g^2;  z += g - (sqrt(n') - sqrt(n)) / lr * w;  n = n'
//                w = 0 when |z| <= lambda1, else
//                w = (sign(z) lambda1 - z) / ((beta + sqrt(n)) / lr + lambda2)
// (FTRL-Proximal, McMahan et al. 2013, as HugeCTR's dense Ftrl kernel: the weight is a function
// of its state, so a weight whose gradients were all zero so far is 0 after a step.)
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "ember/core/half.hpp"

namespace ember::optim {

enum class OptimizerType : std::uint8_t {
  SGD,
  MomentumSGD,
  Nesterov,
  Adam,
  AdaGrad,
  RMSProp,
  Ftrl
};
// Which rows of a sparse table move each step (dense weights always all move).
//   Local: rows touched by the batch only (their optimizer state too).
//   Global: every row, as a dense optimizer would (state decays, momentum keeps moving weights).
//   LazyGlobal: Global's result, computed for a row when it is next touched (or read/saved).
enum class UpdateType : std::uint8_t { Local, Global, LazyGlobal };

const char* optimizer_name(OptimizerType type);
const char* update_type_name(UpdateType type);

// HugeCTR's schedule: linear warm-up over warmup_steps to the base rate, then (when decay_start
// is not 0) polynomial decay from decay_start over decay_steps down to end_lr, and end_lr after.
struct LearningRateScheduleConfig {
  float base_lr = 0.001f;
  std::int64_t warmup_steps = 1;
  std::int64_t decay_start = 0;
  std::int64_t decay_steps = 1;
  float decay_power = 2.0f;
  float end_lr = 0.0f;
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::SGD;
  UpdateType update_type = UpdateType::Local;
  LearningRateScheduleConfig schedule;  // schedule.base_lr is the hparam block's learning_rate
  float momentum_factor = 0.0f;         // MomentumSGD, Nesterov
  float beta1 = 0.9f, beta2 = 0.999f;   // Adam
  float epsilon = 1e-7f;                // Adam, AdaGrad, RMSProp
  float initial_accu_value = 0.0f;      // AdaGrad
  float rmsprop_beta = 0.9f;            // RMSProp: decay of the mean square (HugeCTR's "beta")
  float ftrl_beta = 0.0f;               // Ftrl: HugeCTR's "beta", "lambda1", "lambda2"
  float lambda1 = 0.0f, lambda2 = 0.0f;
  // SGD: HugeCTR's atomic_update (atomic adds of the sparse gradients, nondeterministic order).
  // Ember sums every row's gradients in a fixed order and applies them once, so the flag changes
  // nothing; parse_optimizer logs that when the key is given.
  bool atomic_update = true;

  // Optimizer state values kept per weight: 0 (SGD), 1 (MomentumSGD, Nesterov, AdaGrad,
  // RMSProp) or 2 (Adam: m, v; Ftrl: n, z).
  int state_count() const;
  // Value each state slot starts at (AdaGrad's accumulator starts at initial_accu_value).
  float initial_state(int slot) const;
};

// Validates the numbers (base_lr >= 0, warmup_steps >= 1, decay_steps >= 1, decay_power >= 1,
// end_lr >= 0, 0 <= beta < 1, epsilon > 0; Ftrl divides by the rate, so there base_lr > 0 and,
// when the rate decays, end_lr > 0; its beta, lambda1 and lambda2 >= 0); throws ConfigError in the
// configuration reader's format, `<where>: "<key_prefix><key>" must be ..., got ...` (key_prefix:
// the hparam block's path, e.g. "adam_hparam.").
void validate(const OptimizerConfig& config, const std::string& where,
              std::string_view key_prefix = "");

class LearningRateSchedule {
 public:
  LearningRateSchedule() = default;
  explicit LearningRateSchedule(const LearningRateScheduleConfig& config) : config_(config) {}

  // Advances one step and returns that step's rate (step numbers start at 1).
  float next();
  // The rate of step `step` (>= 1) without advancing.
  float at(std::int64_t step) const;
  float current() const { return step_ == 0 ? at(1) : at(step_); }
  std::int64_t step() const { return step_; }
  // For resuming from a checkpoint: the next call to next() returns at(step + 1).
  void set_step(std::int64_t step) { step_ = step; }

 private:
  LearningRateScheduleConfig config_;
  std::int64_t step_ = 0;
};

// What one update step needs, computed once per step on the host.
struct UpdateStep {
  OptimizerType type = OptimizerType::SGD;
  float lr = 0.0f;
  float momentum = 0.0f;
  float beta1 = 0.0f, beta2 = 0.0f, epsilon = 0.0f;
  float adam_alpha = 0.0f;  // lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  float inv_scaler = 1.0f;  // gradients arrive multiplied by the loss scaler
  // Ftrl: lambda1, 1 / lr and lambda2 + beta / lr (ftrl_rate_terms).
  float lambda1 = 0.0f, inv_lr = 0.0f, ftrl_l2 = 0.0f;
};

// The step-t (t >= 1) parameters for a rate `lr` and loss scaler `scaler`.
UpdateStep make_update_step(const OptimizerConfig& config, float lr, std::int64_t t,
                            float scaler = 1.0f);

// SGD at rate -1: on a zeroed table w = 0 - (-1 * g) = g exactly, so an update with it writes
// each row's gradient sum (in the update's summation order) and steps nothing. The hybrid
// embedding sums its frequent rows' gradients this way, with the update's GPU plan for hot rows.
UpdateStep store_sum_step();

// Ftrl's terms that depend on the rate, computed the same way wherever they are needed (the step
// and the LazyGlobal catch-up), so both give the same bits.
EMBER_HOST_DEVICE inline void ftrl_rate_terms(float lr, float beta, float lambda2, float& inv_lr,
                                              float& l2) {
  inv_lr = 1.0f / lr;
  l2 = lambda2 + beta / lr;
}

// Ftrl's weight for its state (n, z): 0 inside the L1 dead zone, or when there is no curvature
// yet (n == 0 with beta == lambda2 == 0, where the formula would divide by 0).
EMBER_HOST_DEVICE inline float ftrl_weight(float n, float z, float lambda1, float inv_lr,
                                           float l2) {
  const float denominator = sqrtf(n) * inv_lr + l2;
  if (!(fabsf(z) > lambda1) || !(denominator > 0.0f)) return 0.0f;
  return (copysignf(lambda1, z) - z) / denominator;
}

// Applies one step to one weight. s0/s1 are the weight's state slots (unused ones ignored).
EMBER_HOST_DEVICE inline void apply_update(const UpdateStep& u, float& w, float grad, float& s0,
                                           float& s1) {
  const float g = grad * u.inv_scaler;
  switch (u.type) {
    case OptimizerType::SGD:
      w -= u.lr * g;
      break;
    case OptimizerType::MomentumSGD: {
      const float m = u.momentum * s0 - u.lr * g;
      s0 = m;
      w += m;
      break;
    }
    case OptimizerType::Nesterov: {
      const float old = s0;
      const float m = u.momentum * old - u.lr * g;
      s0 = m;
      w += -u.momentum * old + (1.0f + u.momentum) * m;
      break;
    }
    case OptimizerType::Adam: {
      const float m = u.beta1 * s0 + (1.0f - u.beta1) * g;
      const float v = u.beta2 * s1 + (1.0f - u.beta2) * g * g;
      s0 = m;
      s1 = v;
      w -= u.adam_alpha * m / (sqrtf(v) + u.epsilon);
      break;
    }
    case OptimizerType::AdaGrad: {
      const float a = s0 + g * g;
      s0 = a;
      w -= u.lr * g / (sqrtf(a) + u.epsilon);
      break;
    }
    case OptimizerType::RMSProp: {
      const float v = u.beta2 * s0 + (1.0f - u.beta2) * g * g;
      s0 = v;
      w -= u.lr * g / (sqrtf(v) + u.epsilon);
      break;
    }
    case OptimizerType::Ftrl: {
      const float n = s0 + g * g;
      const float sigma = (sqrtf(n) - sqrtf(s0)) * u.inv_lr;
      const float z = s1 + (g - sigma * w);
      s0 = n;
      s1 = z;
      w = ftrl_weight(n, z, u.lambda1, u.inv_lr, u.ftrl_l2);
      break;
    }
  }
}

}  // namespace ember::optim
