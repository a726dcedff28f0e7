// Tandem's GPT and its PyTorch twin (bench/peers/gpt_torch.py) are the same function: a Tandem
// checkpoint's weights, loaded by name into the twin (float64 from the same float32 values),
// give the same loss on the same batch within 1e-5 and the same gradient for every parameter
// within 1e-4 (the tied wte.weight included). Skipped when /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "engine/trainer/checkpoint.h"
#include "models/gpt.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;

namespace {

bool python_has_torch() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

std::string run(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return "";
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

}  // namespace

TEST(GPTTorchTwin, SameLossAndGradientsOnTheSameBatch) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tandem_gpt_twin_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  manual_seed(21);
  for (bool bias : {true, false}) {
    models::GPT g({.n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8, .vocab_size = 37, .bias = bias});
    // Move the weights off their init (zero biases, unit LayerNorms hide mistakes in those paths).
    for (Tensor p : g.parameters()) p.copy_(p.detach() + Tensor::randn(p.shape()) * 0.1);
    const Tensor x = Tensor::from_vector<int64_t>({1, 5, 9, 36, 0, 2, 2, 7, 3, 3, 8, 1, 30, 12, 4, 6, 5, 5, 0, 1, 2, 3, 4, 9}, {3, 8});
    const Tensor y = Tensor::from_vector<int64_t>({5, 9, 36, 0, 2, 2, 7, 3, 3, 8, 1, 30, 12, 4, 6, 11, 5, 0, 1, 2, 3, 4, 9, 10}, {3, 8});
    Tensor loss = g.training_step({x, y}, 0);
    loss.backward();
    trainer::Checkpoint ckpt;
    ckpt.model = g.state_dict();
    ckpt.trainer_state = {{"hparams", g.hparams}};
    const std::string ckpt_path = (dir / "gpt.safetensors").string(), batch_path = (dir / "batch.safetensors").string();
    trainer::save_checkpoint(ckpt_path, ckpt);
    std::vector<std::pair<std::string, Tensor>> batch{{"x", x}, {"y", y}, {"loss", loss.detach()}};
    for (const auto& [name, p] : g.named_parameters()) batch.push_back({"grad." + name, p.grad()});
    io::save_safetensors(batch_path, batch);
    const std::string out = run("/usr/bin/python3 " + std::string(TANDEM_SOURCE_DIR) + "/bench/peers/gpt_torch.py check " +
                                ckpt_path + " " + batch_path + " 2>&1");
    nlohmann::json result;
    try {
      result = nlohmann::json::parse(out);
    } catch (const nlohmann::json::exception&) {
      FAIL() << "the twin did not print JSON:\n" << out;
    }
    EXPECT_LT(result["loss_diff"].get<double>(), 1e-5) << out;
    ASSERT_EQ(result["grads"].size(), g.named_parameters().size());
    for (const auto& [name, diff] : result["grads"].items()) EXPECT_LT(diff.get<double>(), 1e-4) << name << " bias=" << bias;
  }
  std::filesystem::remove_all(dir);
}
