#include "ember/optim/optimizer.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ember/core/error.hpp"
#include "ember/optim/optimizer_json.hpp"

namespace ember {
namespace {

optim::OptimizerConfig parse(const nlohmann::json& block) {
  ConfigReader r(block, "optimizer");
  return optim::parse_optimizer(r);
}

TEST(LearningRateSchedule, WarmupHoldDecayEnd) {
  optim::LearningRateScheduleConfig c;
  c.base_lr = 24.0f;
  c.warmup_steps = 4;
  c.decay_start = 10;
  c.decay_steps = 5;
  c.decay_power = 2.0f;
  c.end_lr = 0.5f;
  optim::LearningRateSchedule s(c);
  // Values computed by hand from the rules in optimizer.hpp.
  const float expect[] = {6,  12,         18,         24,         24,         24,   24,   24,  24,
                          24, 24 * 0.64f, 24 * 0.36f, 24 * 0.16f, 24 * 0.04f, 0.5f, 0.5f, 0.5f};
  for (float e : expect)
    EXPECT_FLOAT_EQ(s.next(), e) << "step " << s.step();
  EXPECT_EQ(s.step(), 17);
  s.set_step(3);
  EXPECT_FLOAT_EQ(s.next(), 24.0f);
}

TEST(LearningRateSchedule, DefaultIsConstant) {
  optim::LearningRateSchedule s({.base_lr = 0.1f});
  for (int i = 0; i < 5; ++i)
    EXPECT_FLOAT_EQ(s.next(), 0.1f);
}

TEST(Optimizer, RulesMatchHandComputedSteps) {
  optim::OptimizerConfig c;
  float w, s0, s1;
  // Momentum, two steps with g = 1 then g = 2, lr 0.1, mu 0.9.
  c.type = optim::OptimizerType::MomentumSGD;
  c.momentum_factor = 0.9f;
  w = 1, s0 = 0, s1 = 0;
  optim::apply_update(optim::make_update_step(c, 0.1f, 1), w, 1.0f, s0, s1);
  EXPECT_FLOAT_EQ(w, 0.9f);
  optim::apply_update(optim::make_update_step(c, 0.1f, 2), w, 2.0f, s0, s1);
  EXPECT_FLOAT_EQ(s0, 0.9f * -0.1f - 0.2f);
  EXPECT_FLOAT_EQ(w, 0.9f - 0.29f);
  // Nesterov: m1 = -0.1, w1 = 1 + 1.9 * -0.1; m2 = 0.9*-0.1 - 0.2 = -0.29,
  // w2 = w1 - 0.9*-0.1 + 1.9*-0.29.
  c.type = optim::OptimizerType::Nesterov;
  w = 1, s0 = 0;
  optim::apply_update(optim::make_update_step(c, 0.1f, 1), w, 1.0f, s0, s1);
  EXPECT_FLOAT_EQ(w, 1.0f - 0.19f);
  optim::apply_update(optim::make_update_step(c, 0.1f, 2), w, 2.0f, s0, s1);
  EXPECT_NEAR(w, 0.81f + 0.09f - 1.9f * 0.29f, 1e-6);
  // Adam step 1: m = 0.1 g, v = 0.001 g^2, alpha = lr * sqrt(0.001) / 0.1.
  c.type = optim::OptimizerType::Adam;
  c.epsilon = 1e-7f;
  w = 0, s0 = 0, s1 = 0;
  optim::apply_update(optim::make_update_step(c, 0.01f, 1), w, 3.0f, s0, s1);
  const double alpha = 0.01 * std::sqrt(0.001) / 0.1;
  EXPECT_NEAR(w, -alpha * 0.3 / (std::sqrt(0.009) + 1e-7), 1e-7);
  // AdaGrad from an initial accumulator of 0.5.
  c.type = optim::OptimizerType::AdaGrad;
  c.initial_accu_value = 0.5f;
  w = 1, s0 = c.initial_state(0);
  optim::apply_update(optim::make_update_step(c, 0.1f, 1), w, 2.0f, s0, s1);
  EXPECT_FLOAT_EQ(s0, 4.5f);
  EXPECT_NEAR(w, 1.0f - 0.1f * 2.0f / (std::sqrt(4.5f) + 1e-7f), 1e-7);
  // RMSProp, beta 0.9: v = 0.1 * 2^2 = 0.4, w = 1 - 0.1 * 2 / (sqrt(0.4) + eps).
  c.type = optim::OptimizerType::RMSProp;
  c.rmsprop_beta = 0.9f;
  w = 1, s0 = c.initial_state(0);
  optim::apply_update(optim::make_update_step(c, 0.1f, 1), w, 2.0f, s0, s1);
  EXPECT_FLOAT_EQ(s0, 0.4f);
  EXPECT_NEAR(w, 1.0 - 0.2 / (std::sqrt(0.4) + 1e-7), 1e-6);
  // A second step with g = 0 only decays the mean square.
  optim::apply_update(optim::make_update_step(c, 0.1f, 2), w, 0.0f, s0, s1);
  EXPECT_FLOAT_EQ(s0, 0.36f);
  EXPECT_NEAR(w, 1.0 - 0.2 / (std::sqrt(0.4) + 1e-7), 1e-6);
  // The loss scaler divides the gradient.
  c.type = optim::OptimizerType::SGD;
  w = 1;
  optim::apply_update(optim::make_update_step(c, 0.5f, 1, 128.0f), w, 128.0f, s0, s1);
  EXPECT_FLOAT_EQ(w, 0.5f);
}

TEST(Optimizer, FtrlMatchesHandComputedSteps) {
  optim::OptimizerConfig c;
  c.type = optim::OptimizerType::Ftrl;
  c.ftrl_beta = 1.0f;
  c.lambda1 = 0.1f;
  c.lambda2 = 0.2f;
  EXPECT_EQ(c.state_count(), 2);
  float w = 1, n = c.initial_state(0), z = c.initial_state(1);
  EXPECT_EQ(n, 0.0f);
  EXPECT_EQ(z, 0.0f);
  // lr 0.5, g = 2: n = 4, sigma = (2 - 0) / 0.5 = 4, z = 2 - 4 * 1 = -2, outside the dead zone:
  // w = (-0.1 + 2) / ((1 + 2) / 0.5 + 0.2) = 1.9 / 6.2.
  optim::apply_update(optim::make_update_step(c, 0.5f, 1), w, 2.0f, n, z);
  EXPECT_FLOAT_EQ(n, 4.0f);
  EXPECT_FLOAT_EQ(z, -2.0f);
  EXPECT_NEAR(w, 1.9 / 6.2, 1e-6);
  // g = 0.05: n = 4.0025, sigma = (2.000625 - 2) / 0.5, z = -2 + 0.05 - sigma * w.
  const double w1 = 1.9 / 6.2;
  const double z2 = -2.0 + 0.05 - (std::sqrt(4.0025) - 2.0) / 0.5 * w1;
  optim::apply_update(optim::make_update_step(c, 0.5f, 2), w, 0.05f, n, z);
  EXPECT_NEAR(z, z2, 1e-6);
  EXPECT_NEAR(w, (-0.1 - z2) / ((1 + std::sqrt(4.0025)) / 0.5 + 0.2), 1e-6);
  // A large lambda1 puts the weight in the dead zone: exactly 0.
  c.lambda1 = 5.0f;
  w = 1, n = 0, z = 0;
  optim::apply_update(optim::make_update_step(c, 0.5f, 1), w, 2.0f, n, z);
  EXPECT_EQ(w, 0.0f);
  // A weight that never had a gradient is 0 after a step (its state says nothing), and no
  // division by zero happens when beta = lambda2 = 0.
  c = optim::OptimizerConfig{};
  c.type = optim::OptimizerType::Ftrl;
  w = 0.7f, n = 0, z = 0;
  optim::apply_update(optim::make_update_step(c, 0.5f, 1), w, 0.0f, n, z);
  EXPECT_EQ(w, 0.0f);
  EXPECT_EQ(n, 0.0f);
  EXPECT_EQ(z, 0.0f);
  // The loss scaler divides the gradient here too.
  w = 1, n = 0, z = 0;
  float w2 = 1, n2 = 0, z2b = 0;
  optim::apply_update(optim::make_update_step(c, 0.5f, 1, 64.0f), w, 2.0f * 64.0f, n, z);
  optim::apply_update(optim::make_update_step(c, 0.5f, 1), w2, 2.0f, n2, z2b);
  EXPECT_EQ(w, w2);
  EXPECT_EQ(n, n2);
  EXPECT_EQ(z, z2b);
}

TEST(OptimizerJson, ParsesHugeCtrBlocks) {
  const auto j = nlohmann::json::parse(R"({"type": "SGD", "update_type": "Local",
      "sgd_hparam": {"learning_rate": 24.0, "warmup_steps": 8000, "decay_start": 48000,
                     "decay_steps": 24000, "atomic_update": true}})");
  const optim::OptimizerConfig c = parse(j);
  EXPECT_EQ(c.type, optim::OptimizerType::SGD);
  EXPECT_EQ(c.update_type, optim::UpdateType::Local);
  EXPECT_FLOAT_EQ(c.schedule.base_lr, 24.0f);
  EXPECT_EQ(c.schedule.warmup_steps, 8000);
  EXPECT_EQ(c.schedule.decay_start, 48000);
  EXPECT_EQ(c.schedule.decay_steps, 24000);
  const auto adam = parse(nlohmann::json::parse(
      R"({"type": "Adam", "global_update": true, "adam_hparam": {"learning_rate": 0.001,
          "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7}})"));
  EXPECT_EQ(adam.type, optim::OptimizerType::Adam);
  EXPECT_EQ(adam.update_type, optim::UpdateType::Global);
  EXPECT_EQ(adam.state_count(), 2);
  // HugeCTR's Ftrl block (beta, lambda1, lambda2) and RMSProp's (beta, epsilon).
  const auto ftrl = parse(nlohmann::json::parse(
      R"({"type": "Ftrl", "update_type": "Global", "ftrl_hparam": {"learning_rate": 0.05,
          "beta": 1.0, "lambda1": 0.001, "lambda2": 0.002}})"));
  EXPECT_EQ(ftrl.type, optim::OptimizerType::Ftrl);
  EXPECT_FLOAT_EQ(ftrl.schedule.base_lr, 0.05f);
  EXPECT_FLOAT_EQ(ftrl.ftrl_beta, 1.0f);
  EXPECT_FLOAT_EQ(ftrl.lambda1, 0.001f);
  EXPECT_FLOAT_EQ(ftrl.lambda2, 0.002f);
  EXPECT_EQ(ftrl.state_count(), 2);
  const auto rms = parse(nlohmann::json::parse(
      R"({"type": "RMSProp", "rmsprop_hparam": {"learning_rate": 0.002, "beta": 0.8,
          "epsilon": 1e-6, "warmup_steps": 3}})"));
  EXPECT_EQ(rms.type, optim::OptimizerType::RMSProp);
  EXPECT_FLOAT_EQ(rms.schedule.base_lr, 0.002f);
  EXPECT_FLOAT_EQ(rms.rmsprop_beta, 0.8f);
  EXPECT_FLOAT_EQ(rms.epsilon, 1e-6f);
  EXPECT_EQ(rms.schedule.warmup_steps, 3);
  EXPECT_EQ(rms.state_count(), 1);
  // Defaults: HugeCTR's (RMSProp beta 0.9, epsilon 1e-7; Ftrl beta = lambda1 = lambda2 = 0).
  const auto rms_default = parse(nlohmann::json::parse(R"({"type": "RMSProp"})"));
  EXPECT_FLOAT_EQ(rms_default.rmsprop_beta, 0.9f);
  EXPECT_FLOAT_EQ(rms_default.epsilon, 1e-7f);
  const auto ftrl_default = parse(nlohmann::json::parse(R"({"type": "Ftrl"})"));
  EXPECT_EQ(ftrl_default.ftrl_beta, 0.0f);
  EXPECT_EQ(ftrl_default.lambda1, 0.0f);
  EXPECT_EQ(ftrl_default.lambda2, 0.0f);
}

TEST(OptimizerJson, SgdAtomicUpdateIsAcceptedEitherWay) {
  // HugeCTR's flag picks atomic adds; Ember's update is deterministic either way (logged).
  for (const char* text : {R"({"type": "SGD", "sgd_hparam": {"atomic_update": false}})",
                           R"({"type": "SGD", "sgd_hparam": {"atomic_update": true}})"}) {
    const auto c = parse(nlohmann::json::parse(text));
    EXPECT_EQ(c.type, optim::OptimizerType::SGD);
  }
  EXPECT_FALSE(
      parse(nlohmann::json::parse(R"({"type": "SGD", "sgd_hparam": {"atomic_update": false}})"))
          .atomic_update);
  try {
    parse(nlohmann::json::parse(R"({"type": "SGD", "sgd_hparam": {"atomic_update": "yes"}})"));
    FAIL() << "a string atomic_update was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"sgd_hparam.atomic_update\" must be true or false"),
              std::string::npos)
        << e.what();
  }
}

TEST(OptimizerJson, ErrorsNameTheKey) {
  auto expect_error = [](const char* text, const char* needle) {
    try {
      parse(nlohmann::json::parse(text));
      FAIL() << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"type": "Adamax"})", "Adamax");
  expect_error(R"({"type": "Adam", "adam_hparam": {"learnin_rate": 1}})", "learnin_rate");
  expect_error(R"({"type": "SGD", "momentum": 1})", "momentum");
  expect_error(R"({"type": "SGD", "sgd_hparam": {"learning_rate": "fast"}})", "learning_rate");
  expect_error(R"({"type": "SGD", "sgd_hparam": {"warmup_steps": 0}})", "warmup_steps");
  expect_error(R"({"type": "Adam", "adam_hparam": {"beta1": 1.0}})", "beta1");
  expect_error(R"({"type": "SGD", "update_type": "Sometimes"})", "Sometimes");
  expect_error(R"({"update_type": "Local"})", "type");
  // The paths inside the block, in the configuration reader's format.
  expect_error(R"({"type": "Adam", "adam_hparam": {"learnin_rate": 1}})",
               "optimizer: unknown key \"adam_hparam.learnin_rate\" (did you mean "
               "\"adam_hparam.learning_rate\"?)");
  expect_error(R"({"type": "SGD", "sgd_hparam": {"warmup_steps": 0}})",
               "optimizer: \"sgd_hparam.warmup_steps\" must be >= 1, got 0");
  expect_error(R"({"type": "SGD", "sgd_hparam": {"warmup_steps": 2.5}})",
               "optimizer: \"sgd_hparam.warmup_steps\" must be an integer, got 2.5");
  expect_error(R"({"type": "Adam", "adam_hparam": {"beta1": 1.0}})",
               "optimizer: \"adam_hparam.beta1\" must be in [0, 1), got 1");
  expect_error(R"({"type": "SGD", "sgd_hparam": {"beta1": 0.5}})",
               "unknown key \"sgd_hparam.beta1\"");
  expect_error(R"({"update_type": "Local"})", "optimizer: \"type\" is missing");
  expect_error(R"({"type": "sgd"})",
               "\"type\" must be \"SGD\", \"MomentumSGD\", \"Nesterov\", \"Adam\", "
               "\"AdaGrad\", \"RMSProp\" or \"Ftrl\", got \"sgd\"");
  // Ftrl divides by the rate; RMSProp's beta is a decay.
  expect_error(R"({"type": "Ftrl", "ftrl_hparam": {"learning_rate": 0}})",
               "optimizer: \"ftrl_hparam.learning_rate\" must be > 0 for Ftrl (its rule divides "
               "by the rate), got 0");
  expect_error(R"({"type": "Ftrl", "ftrl_hparam": {"decay_start": 10, "end_lr": 0}})",
               "\"ftrl_hparam.end_lr\" must be > 0 for Ftrl when the rate decays");
  expect_error(R"({"type": "Ftrl", "ftrl_hparam": {"lambda1": -1}})",
               "\"ftrl_hparam.lambda1\" must be >= 0, got -1");
  expect_error(R"({"type": "RMSProp", "rmsprop_hparam": {"beta": 1}})",
               "\"rmsprop_hparam.beta\" must be in [0, 1), got 1");
  expect_error(R"({"type": "RMSProp", "rmsprop_hparam": {"epsilon": 0}})",
               "\"rmsprop_hparam.epsilon\" must be > 0, got 0");
  expect_error(R"({"type": "Ftrl", "ftrl_hparam": {"epsilon": 1e-7}})",
               "unknown key \"ftrl_hparam.epsilon\"");
}

TEST(OptimizerJson, OtherTypesBlocksAreIgnoredAndUpdateTypeWins) {
  const auto c = parse(nlohmann::json::parse(
      R"({"type": "SGD", "global_update": true, "update_type": "LazyGlobal",
          "adam_hparam": {"beta1": 0.5}, "sgd_hparam": {"learning_rate": 0.5}})"));
  EXPECT_EQ(c.type, optim::OptimizerType::SGD);
  EXPECT_EQ(c.update_type, optim::UpdateType::LazyGlobal);
  EXPECT_FLOAT_EQ(c.schedule.base_lr, 0.5f);
  EXPECT_FLOAT_EQ(c.beta1, 0.9f);  // Adam's block is not read
  EXPECT_EQ(parse(nlohmann::json::parse(R"({"type": "SGD", "global_update": 1})")).update_type,
            optim::UpdateType::Global);
  EXPECT_FLOAT_EQ(parse(nlohmann::json::parse(R"({"type": "Adam"})")).schedule.base_lr, 0.001f);
}

}  // namespace
}  // namespace ember
