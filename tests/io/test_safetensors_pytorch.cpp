// PyTorch reads what we write: Debian's python3-torch parses our files with a few lines of
// json/struct + torch.frombuffer (the safetensors package may be missing; the layout is simple
// enough that this is an independent reader), and a checkpoint's weights load with strict
// names into the torch.nn twin of the model and give the same outputs. Skipped when
// /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "engine/trainer/checkpoint.h"
#include "io_test_util.h"

using namespace tandem;
using tandem::test::ScratchDir;
using tandem::test::tensor_from_bits;

namespace {

bool python_has_torch() {
  static const bool available = std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
  return available;
}

// Parses a safetensors file into a dict of torch tensors without the safetensors package.
const char* kReader = R"PY(
import json, struct, sys, torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8, "BOOL": torch.bool}

def load(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, spec in header.items():
        begin, end = spec["data_offsets"]
        dtype = DTYPES[spec["dtype"]]
        raw = bytearray(data[begin:end])
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = flat.reshape(spec["shape"])
    return out, meta
)PY";

// Runs a Python program (kReader + body) with argv[1] = file, returns its stdout.
std::string run_python(const ScratchDir& dir, const std::string& body, const std::string& file) {
  const std::string script = dir.file("check.py");
  std::ofstream(script) << kReader << body;
  std::string command = "/usr/bin/python3 " + script + " " + file + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return "popen failed";
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  int status = ::pclose(pipe);
  EXPECT_EQ(status, 0) << output;
  return output;
}

}  // namespace

TEST(SafetensorsPyTorch, TorchReadsEveryDtype) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch not available (apt-get install python3-torch)";
  ScratchDir dir;
  const std::string path = dir.file("dtypes.safetensors");
  io::save_safetensors(path, {
      {"f32", Tensor::from_vector<float>({1.5f, -2.25f, 1e-30f, 3e38f, -0.0f, 7.0f}, {2, 3})},
      {"f64", Tensor::from_vector<double>({0.1, -1e300}, {2})},
      {"f16", tensor_from_bits({0x3c00, 0xc000, 0x7bff, 0x0001}, DType::Float16)},  // 1, -2, 65504, 2^-24
      {"bf16", tensor_from_bits({0x3f80, 0xc040, 0x0001}, DType::BFloat16)},       // 1, -3, min subnormal
      {"i32", Tensor::from_vector<int32_t>({-7, 2147483647}, {2})},
      {"i64", Tensor::from_vector<int64_t>({-5, 1234567890123}, {1, 2})},
      {"u8", Tensor::from_vector<uint8_t>({0, 200, 255}, {3})},
      {"bool", Tensor::from_vector<bool>({true, false, true}, {3})},
      {"scalar", Tensor::scalar(4.0, DType::Float64)},
      {"empty", Tensor::zeros({0, 5})},
      {"transposed", Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}).t()},
  }, {{"format", "pt"}});

  // Python prints, per tensor, its torch dtype, shape and values (floats widened to double,
  // float16/bfloat16 also as raw bits), which we compare with what we wrote.
  std::string out = run_python(dir, R"PY(
tensors, meta = load(sys.argv[1])
res = {"__meta__": meta}
for name, t in tensors.items():
    entry = {"dtype": str(t.dtype), "shape": list(t.shape), "values": t.double().flatten().tolist()}
    if t.dtype in (torch.float16, torch.bfloat16):
        entry["bits"] = (t.view(torch.int16).flatten().to(torch.int32) & 0xFFFF).tolist()
    if t.dtype in (torch.int32, torch.int64):
        entry["ints"] = t.flatten().tolist()
    res[name] = entry
print(json.dumps(res))
)PY", path);
  nlohmann::json got = nlohmann::json::parse(out.substr(out.find('{')));

  EXPECT_EQ(got["__meta__"]["format"], "pt");
  auto expect_tensor = [&](const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                           const std::vector<double>& values) {
    SCOPED_TRACE(name);
    EXPECT_EQ(got[name]["dtype"], dtype);
    EXPECT_EQ(got[name]["shape"].get<std::vector<int64_t>>(), shape);
    EXPECT_EQ(got[name]["values"].get<std::vector<double>>(), values);
  };
  expect_tensor("f32", "torch.float32", {2, 3}, {1.5, -2.25, double(1e-30f), double(3e38f), -0.0, 7.0});
  expect_tensor("f64", "torch.float64", {2}, {0.1, -1e300});
  expect_tensor("f16", "torch.float16", {4}, {1.0, -2.0, 65504.0, 5.960464477539063e-08});
  expect_tensor("bf16", "torch.bfloat16", {3}, {1.0, -3.0, 9.183549615799121e-41});
  expect_tensor("i32", "torch.int32", {2}, {-7, 2147483647});
  expect_tensor("u8", "torch.uint8", {3}, {0, 200, 255});
  expect_tensor("bool", "torch.bool", {3}, {1, 0, 1});
  expect_tensor("scalar", "torch.float64", {}, {4.0});
  expect_tensor("empty", "torch.float32", {0, 5}, {});
  expect_tensor("transposed", "torch.float32", {3, 2}, {0, 3, 1, 4, 2, 5});
  EXPECT_EQ(got["f16"]["bits"].get<std::vector<int>>(), (std::vector<int>{0x3c00, 0xc000, 0x7bff, 0x0001}));
  EXPECT_EQ(got["bf16"]["bits"].get<std::vector<int>>(), (std::vector<int>{0x3f80, 0xc040, 0x0001}));
  EXPECT_EQ(got["i64"]["ints"].get<std::vector<int64_t>>(), (std::vector<int64_t>{-5, 1234567890123}));
  EXPECT_EQ(got["i64"]["shape"].get<std::vector<int64_t>>(), (std::vector<int64_t>{1, 2}));
}

// The checkpoint's model tensors are a PyTorch state_dict: torch.nn.Sequential(Linear,
// BatchNorm1d, ReLU, Linear) loads them with strict=True and computes the same outputs.
TEST(SafetensorsPyTorch, CheckpointWeightsLoadIntoTheTorchTwin) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch not available (apt-get install python3-torch)";
  ScratchDir dir;
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4),
                                                std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 2));
  optim::Adam adam(model->parameters(), {.lr = 0.01});
  Tensor x = Tensor::from_vector<float>({0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f}, {2, 3});
  for (int i = 0; i < 2; ++i) {  // moves the BatchNorm running statistics and the weights
    adam.zero_grad();
    sum((*model)(x)).backward();
    adam.step();
  }
  model->eval();
  std::vector<float> ours = (*model)(x).to_vector<float>();

  const std::string path = dir.file("model.safetensors");
  trainer::save_checkpoint(path, {.model = model->state_dict(), .optimizer = adam.state_dict()});
  std::string out = run_python(dir, R"PY(
tensors, meta = load(sys.argv[1])
assert meta["format"] == "pt", meta
state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
model.load_state_dict(state, strict=True)
model.eval()
x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
with torch.no_grad():
    print(json.dumps({"y": model(x).flatten().tolist(),
                      "tracked": int(model[1].num_batches_tracked),
                      "exp_avg_shape": list(tensors["optimizer.0.exp_avg"].shape)}))
)PY", path);
  nlohmann::json got = nlohmann::json::parse(out.substr(out.find('{')));
  auto theirs = got["y"].get<std::vector<double>>();
  ASSERT_EQ(theirs.size(), ours.size()) << out;
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(theirs[i], ours[i], 1e-5) << i;
  EXPECT_EQ(got["tracked"], 2);
  EXPECT_EQ(got["exp_avg_shape"], nlohmann::json({4, 3}));
}
