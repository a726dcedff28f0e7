// The bagua strategy's parts that need no second process:
//   - the 8-bit min/max compressor: per-element error within (max - min) / 255 / 2 of its block
//     (plus float32 rounding), exact constant blocks and extremes, non-finite blocks flagged as
//     NaN without touching the others, empty and one-element tensors, odd block sizes;
//   - error feedback (compress_with_feedback): over repeated compressions the decoded values'
//     running sum stays within half a step of the true running sum, where plain compression
//     drifts by the same error every time (hand-derived sequence);
//   - shift_one's pairing: symmetric, never oneself, every peer once per cycle, one rank idle
//     per round at odd world sizes;
//   - options: from flags and YAML into (name, options), and every refusal naming what is allowed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <set>

#include "base/error.h"
#include "engine/config/config_args.h"
#include "engine/strategies/bagua/algorithms.h"
#include "engine/strategies/bagua/bagua_strategy.h"
#include "engine/strategies/bagua/compressed_average.h"
#include "engine/strategies/bagua/min_max_uint8.h"
#include "engine/strategies/strategy.h"
#include "engine/trainer/trainer_section.h"

namespace tandem::bagua {
namespace {

std::vector<float> round_trip(const std::vector<float>& values, int64_t block) {
  const int64_t n = int64_t(values.size());
  std::vector<uint8_t> packed(size_t(compressed_bytes(n, block)));
  compress_min_max_uint8(values.data(), n, block, packed.data());
  std::vector<float> out(values.size(), -12345.0f);
  decompress_min_max_uint8(packed.data(), n, block, out.data());
  return out;
}

// The documented bound for element i: half a step of its block, plus float32 rounding.
double bound(const std::vector<float>& values, int64_t block, size_t i) {
  const size_t first = i / size_t(block) * size_t(block);
  const size_t last = std::min(values.size(), first + size_t(block));
  float lo = values[first], hi = values[first];
  for (size_t k = first; k < last; ++k) lo = std::min(lo, values[k]), hi = std::max(hi, values[k]);
  const double magnitude = std::max(std::fabs(double(lo)), std::fabs(double(hi)));
  return (double(hi) - double(lo)) / 255.0 / 2.0 + 2.0 * std::numeric_limits<float>::epsilon() * magnitude;
}

TEST(MinMaxUInt8, RoundTripWithinHalfAStepOfEachBlock) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.3f, 2.0f);
  for (int64_t n : {1, 2, 7, 1023, 1024, 1025, 3001}) {
    for (int64_t block : {1, 3, 7, 1000, 1024}) {
      std::vector<float> values(static_cast<size_t>(n));
      for (auto& v : values) v = normal(gen);
      const std::vector<float> out = round_trip(values, block);
      int64_t inexact = 0;
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_LE(std::fabs(double(out[i]) - values[i]), bound(values, block, i)) << "n=" << n << " block=" << block << " i=" << i;
        inexact += out[i] != values[i];
      }
      // Blocks of 1 and 2 elements hold only their min and max: exact.
      if (block <= 2 || n == 1) EXPECT_EQ(inexact, 0) << "n=" << n << " block=" << block;
    }
  }
}

// One block of {0, 1, c} with c = 0.4 steps (a step q = 1/255): 0 and 1 are the block's min and
// max and decode exactly (to float32 rounding); plain compression rounds c down to 0 every time, so after T
// compressions the decoded sum misses T x 0.4q. With feedback the residual carries the 0.4q
// into the next call: sending 0.4q, 0.8q, 0.2q, 0.6q, 0.0q, ... decodes as 0, q, 0, q, 0, ... and
// the decoded sum after T calls is T x 0.4q - r_T with |r_T| <= q / 2 (2q after 5 calls, exactly).
TEST(MinMaxUInt8, ErrorFeedbackKeepsTheRunningSumWithinHalfAStep) {
  const double q = 1.0 / 255.0;
  const float c = float(0.4 * q);
  const Tensor values = Tensor::from_vector<float>({0.0f, 1.0f, c}, {3});
  const Tensor residual = Tensor::zeros({3}, DType::Float32);
  Tensor decoded = Tensor::empty({3}, DType::Float32);
  double fed_back = 0.0, plain = 0.0;
  for (int t = 1; t <= 50; ++t) {
    decompress_min_max_uint8(compress_with_feedback(values, residual, 3), decoded, 3);
    const std::vector<float> with = decoded.to_vector<float>();
    EXPECT_NEAR(with[0], 0.0f, 1e-8);  // c + r may become the minimum (~0, float32 rounding)
    EXPECT_NEAR(with[1], 1.0f, 1e-6);
    fed_back += with[2];
    decompress_min_max_uint8(compress_min_max_uint8(values, 3), decoded, 3);
    plain += decoded.to_vector<float>()[2];
    const double truth = t * double(c);
    ASSERT_LE(std::fabs(fed_back - truth), q / 2 + 1e-6) << "after " << t << " compressions";
    EXPECT_NEAR(fed_back + residual.to_vector<float>()[2], truth, 1e-6) << "decoded + residual = sent";
    if (t == 5) EXPECT_NEAR(fed_back, 2 * q, 1e-6);
  }
  EXPECT_EQ(plain, 0.0) << "without feedback c rounds to 0 every time";
  EXPECT_NEAR(50 * double(c) - plain, 20 * q, 1e-6) << "a drift of 20 steps after 50 compressions";
  // A residual that is not finite (a NaN block) starts over from zero.
  const Tensor nan_values = Tensor::from_vector<float>({0.0f, std::nanf(""), c}, {3});
  compress_with_feedback(nan_values, residual, 3);
  EXPECT_EQ(residual.to_vector<float>(), std::vector<float>({0.0f, 0.0f, 0.0f}));
}

TEST(MinMaxUInt8, ConstantBlocksAndExtremesAreExactAndHugeRangesStayFinite) {
  const std::vector<float> constant(10, -2.75f);
  EXPECT_EQ(round_trip(constant, 4), constant);
  // min and max of each block decode exactly (code 0 and 255).
  const std::vector<float> values{-1.0f, 0.1f, 0.2f, 3.0f, 5.0f, -7.0f, 0.0f};
  const std::vector<float> out = round_trip(values, 4);
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[3], 3.0f);
  EXPECT_EQ(out[4], 5.0f);
  EXPECT_EQ(out[5], -7.0f);
  // max - min overflows float32 here; the result must still be finite and within the bound.
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> huge{-big, 0.0f, big, big / 3};
  const std::vector<float> h = round_trip(huge, 4);
  for (size_t i = 0; i < huge.size(); ++i) {
    EXPECT_TRUE(std::isfinite(h[i])) << i;
    EXPECT_LE(std::fabs(double(h[i]) - huge[i]), bound(huge, 4, i)) << i;
  }
}

TEST(MinMaxUInt8, NonFiniteBlocksDecodeAsNanAndOthersAreUntouched) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {nan, inf, -inf}) {
    const std::vector<float> values{1.0f, 2.0f, 3.0f, bad, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f};
    const std::vector<float> out = round_trip(values, 3);
    for (size_t i = 0; i < 3; ++i) EXPECT_LE(std::fabs(out[i] - values[i]), bound(values, 3, i));
    for (size_t i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(out[i])) << "bad=" << bad << " i=" << i << " got " << out[i];
    for (size_t i = 6; i < 9; ++i) EXPECT_LE(std::fabs(out[i] - values[i]), bound(values, 3, i));
  }
}

TEST(MinMaxUInt8, TensorFormsSizesEmptyAndOneElement) {
  EXPECT_EQ(compressed_bytes(0, 16), 0);
  EXPECT_EQ(compressed_bytes(1, 16), 9);
  EXPECT_EQ(compressed_bytes(33, 16), 3 * 8 + 33);
  const Tensor empty = Tensor::zeros({0});
  const Tensor packed_empty = compress_min_max_uint8(empty, 16);
  EXPECT_EQ(packed_empty.numel(), 0);
  Tensor out_empty = Tensor::zeros({0});
  decompress_min_max_uint8(packed_empty, out_empty, 16);

  const Tensor one = Tensor::from_vector<float>({-0.625f}, {1});
  Tensor back = Tensor::zeros({1});
  decompress_min_max_uint8(compress_min_max_uint8(one, 16), back, 16);
  EXPECT_EQ(back.to_vector<float>()[0], -0.625f);

  // float64 in and out, 2-D, through float32.
  const Tensor m = Tensor::from_vector<double>({0.5, -1.5, 2.25, 4.0, 0.0, 1.0}, {2, 3});
  Tensor m_back = Tensor::zeros({2, 3}, DType::Float64);
  decompress_min_max_uint8(compress_min_max_uint8(m, 4), m_back, 4);
  const auto got = m_back.to_vector<double>(), want = m.to_vector<double>();
  for (size_t i = 0; i < 6; ++i) EXPECT_LE(std::fabs(got[i] - want[i]), (i < 4 ? 5.5 : 1.0) / 510 + 1e-6) << i;

  Tensor wrong = Tensor::zeros({5});
  EXPECT_THROW(decompress_min_max_uint8(compress_min_max_uint8(one, 16), wrong, 16), ValueError);
  EXPECT_THROW(compress_min_max_uint8(Tensor::zeros({3}, DType::Int64), 16), DTypeError);
  EXPECT_THROW(compressed_bytes(10, 0), ValueError);
}

TEST(ShiftOne, SymmetricPairsMeetingEveryPeerOncePerCycle) {
  for (int world = 1; world <= 9; ++world) {
    const int rounds = world % 2 == 0 ? world - 1 : world;
    std::vector<std::set<int>> met(static_cast<size_t>(world));
    for (int64_t round = 0; round < rounds; ++round) {
      int idle = 0;
      for (int r = 0; r < world; ++r) {
        const int peer = shift_one_peer(r, world, round);
        if (peer < 0) {
          ++idle;
          continue;
        }
        ASSERT_NE(peer, r) << "world=" << world << " round=" << round;
        ASSERT_LT(peer, world);
        ASSERT_EQ(shift_one_peer(peer, world, round), r) << "world=" << world << " round=" << round << " rank=" << r;
        EXPECT_TRUE(met[size_t(r)].insert(peer).second) << "rank " << r << " met " << peer << " twice in a cycle";
      }
      EXPECT_EQ(idle, world % 2) << "world=" << world;
    }
    for (int r = 0; r < world; ++r) EXPECT_EQ(int(met[size_t(r)].size()), world - 1) << "world=" << world;
    // The next cycle repeats the first.
    for (int r = 0; r < world; ++r) EXPECT_EQ(shift_one_peer(r, world, rounds), shift_one_peer(r, world, 0));
  }
}

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

std::pair<std::string, InitParams> parsed_strategy(const std::vector<std::string>& args) {
  const ConfigSchema schema = make_trainer_schema();
  const HardwareOptions o = hardware_options_from_config(parse_args(schema, args).config);
  return {o.strategy, o.strategy_options};
}

TEST(BaguaOptions, FlagsAndYamlGiveTheNameAndItsOptionsInAnyOrder) {
  const InitParams want{{"algorithm", "bytegrad"}, {"hierarchical", "true"}};
  EXPECT_EQ(parsed_strategy({"--trainer.strategy=bagua", "--trainer.strategy.algorithm=bytegrad",
                             "--trainer.strategy.hierarchical=true"}),
            std::make_pair(std::string("bagua"), want));
  EXPECT_EQ(parsed_strategy({"--trainer.strategy.algorithm=bytegrad", "--trainer.strategy.hierarchical=true",
                             "--trainer.strategy=bagua"}),
            std::make_pair(std::string("bagua"), want));
  EXPECT_EQ(parsed_strategy({"--trainer.strategy={name: bagua, algorithm: bytegrad, hierarchical: true}"}),
            std::make_pair(std::string("bagua"), want));
  const std::string file = ::testing::TempDir() + "/bagua_strategy_" + std::to_string(getpid()) + ".yaml";
  std::ofstream(file) << "trainer:\n  strategy:\n    name: bagua\n    algorithm: decentralized\n";
  EXPECT_EQ(parsed_strategy({"--config", file, "--trainer.strategy.peer_selection_mode=shift_one"}),
            std::make_pair(std::string("bagua"),
                           InitParams{{"algorithm", "decentralized"}, {"peer_selection_mode", "shift_one"}}));
  std::remove(file.c_str());
  EXPECT_EQ(parsed_strategy({"--trainer.strategy=ddp"}), std::make_pair(std::string("ddp"), InitParams{}));
  // Options without a strategy name stay with auto, which refuses them when the strategy is chosen.
  const auto unnamed = parsed_strategy({"--trainer.strategy.algorithm=bytegrad"});
  EXPECT_EQ(unnamed, std::make_pair(std::string("auto"), InitParams{{"algorithm", "bytegrad"}}));
  const std::string auto_refusal = config_error(
      [&] { select_strategy(unnamed.first, StrategyContext{"cpu", 2, 1}, strategy_registry(), unnamed.second); });
  EXPECT_NE(auto_refusal.find("strategy=auto takes no options (given algorithm=bytegrad)"), std::string::npos) << auto_refusal;
  // A mapping without a name, or a nested value, says what shape is expected.
  EXPECT_NE(config_error([] { parsed_strategy({"--trainer.strategy={algorithm: bytegrad}"}); }).find("names no strategy"),
            std::string::npos);
  EXPECT_NE(config_error([] { parsed_strategy({"--trainer.strategy.algorithm=[1, 2]"}); }).find("single value"),
            std::string::npos);
}

StrategyChoice choose(const std::string& name, const InitParams& options, int devices = 2) {
  return select_strategy(name, StrategyContext{"cpu", devices, 1}, strategy_registry(), options);
}

void expect_refused(const std::string& name, const InitParams& options, const std::vector<std::string>& words,
                    int devices = 2) {
  const std::string message = config_error([&] { choose(name, options, devices); });
  for (const auto& w : words) EXPECT_NE(message.find(w), std::string::npos) << "missing '" << w << "' in: " << message;
}

// Typos of a strategy, an algorithm or an option are answered with the closest registered one.
TEST(BaguaOptions, TyposSuggestTheClosestRegisteredName) {
  expect_refused("ddpp", {}, {"unknown strategy 'ddpp' (did you mean 'ddp'?)", "choose auto or a registered strategy"});
  expect_refused("bagua", {{"algorithm", "bytgrad"}}, {"unknown algorithm 'bytgrad' (did you mean 'bytegrad'?)"});
  expect_refused("bagua", {{"algoritm", "bytegrad"}}, {"has no option 'algoritm'", "(did you mean 'algorithm'?)"});
}

TEST(BaguaOptions, RegistryBuildsEachAlgorithmAndRefusesWhatItDoesNotTake) {
  EXPECT_EQ(choose("bagua", {}).name, "bagua");
  for (const char* algorithm : {"gradient_allreduce", "bytegrad", "decentralized", "low_precision_decentralized", "async", "qadam"}) {
    const StrategyChoice c = choose("bagua", {{"algorithm", algorithm}});
    EXPECT_EQ(dynamic_cast<const tandem::BaguaStrategy*>(c.strategy.get()) != nullptr, true);
  }
  expect_refused("bagua", {{"algorithm", "allgather_magic"}},
                 {"unknown algorithm 'allgather_magic'", "bytegrad", "decentralized", "gradient_allreduce"});
  expect_refused("bagua", {{"algorithm", "decentralized"}, {"hierarchical", "true"}},
                 {"algorithm=decentralized does not take hierarchical", "communication_interval, peer_selection_mode"});
  expect_refused("bagua", {{"colour", "red"}}, {"'bagua' has no option 'colour'", "algorithm", "hierarchical"});
  expect_refused("ddp", {{"algorithm", "bytegrad"}}, {"strategy 'ddp' has no option 'algorithm'", "takes no options"});
  expect_refused("bagua", {{"algorithm", "bytegrad"}}, {"bytegrad", "1 process", "gradient_allreduce"}, 1);
  expect_refused("bagua", {{"hierarchical", "maybe"}}, {"hierarchical=maybe", "true or false"});
  expect_refused("bagua", {{"hierarchical", "true"}, {"ranks_per_node", "3"}}, {"ranks_per_node=3", "2 ranks", "divisor"});
  expect_refused("bagua", {{"ranks_per_node", "2"}}, {"hierarchical=true"});
  expect_refused("bagua", {{"algorithm", "decentralized"}, {"peer_selection_mode", "ring"}},
                 {"peer_selection_mode=ring", "all", "shift_one"});
  expect_refused("bagua", {{"algorithm", "decentralized"}, {"communication_interval", "0"}},
                 {"communication_interval=0", "integer >= 1"});
  for (const char* interval : {"0", "-5", "soon"}) {
    expect_refused("bagua", {{"algorithm", "async"}, {"sync_interval_ms", interval}},
                   {std::string("sync_interval_ms=") + interval, "integer >= 1", "milliseconds"});
  }
  expect_refused("bagua", {{"algorithm", "async"}, {"warmup_steps", "-1"}}, {"warmup_steps=-1", "integer >= 0"});
  expect_refused("bagua", {{"algorithm", "bytegrad"}, {"sync_interval_ms", "5"}},
                 {"algorithm=bytegrad does not take sync_interval_ms", "hierarchical, ranks_per_node"});
}

}  // namespace
}  // namespace tandem::bagua
