// A complete training loop on synthetic data, written with the core engine only (tensors,
// autograd, nn modules, an optimizer): a student MLP learns to classify points labelled by a
// fixed random "teacher" network. It stands in for `tandem fit` until the Trainer exists.
//
//   build/bin/train_synthetic [--epochs N] [--samples N] [--batch N] [--lr X] [--seed N]
// Exit codes: 0 trained, 2 bad flags, 1 runtime error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "base/error.h"
#include "engine/nn/nn.h"
#include "engine/optim/adam.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

using namespace tandem;

namespace {

struct Options {
  int64_t epochs = 8, samples = 8192, batch = 128, features = 32, classes = 10, seed = 42;
  double lr = 2e-3;
};

int64_t parse_int(const std::string& flag, const std::string& v, int64_t min) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < min)
    throw ConfigError(flag + " must be an integer >= " + std::to_string(min) + ", got '" + v + "'");
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string v;
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a != "--help" && a != "-h") {
      if (i + 1 >= argc) throw ConfigError(a + " needs a value");
      v = argv[++i];
    }
    if (a == "--help" || a == "-h") {
      std::cout << "usage: train_synthetic [--epochs N] [--samples N] [--batch N] [--lr X] [--seed N]\n";
      std::exit(0);
    } else if (a == "--epochs") o.epochs = parse_int(a, v, 1);
    else if (a == "--samples") o.samples = parse_int(a, v, 2);
    else if (a == "--batch") o.batch = parse_int(a, v, 1);
    else if (a == "--seed") o.seed = parse_int(a, v, 0);
    else if (a == "--lr") {
      char* end = nullptr;
      o.lr = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.lr > 0)) throw ConfigError("--lr must be a positive number, got '" + v + "'");
    } else {
      throw ConfigError("unknown flag '" + a + "'; allowed: --epochs, --samples, --batch, --lr, --seed, --help");
    }
  }
  return o;
}

std::shared_ptr<nn::Sequential> mlp(int64_t in, int64_t hidden, int64_t out) {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(in, hidden), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(hidden, hidden), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(hidden, out));
}

double accuracy(nn::Module& model, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  model.eval();
  Tensor pred = argmax(model(x), 1);
  model.train();
  return sum(eq(pred, y)).item() / double(y.numel());
}

int run(const Options& o) {
  manual_seed(uint64_t(o.seed));
  // Data: x ~ N(0, 1); labels from a fixed random teacher.
  auto teacher = mlp(o.features, 64, o.classes);
  Tensor x = Tensor::randn({o.samples, o.features});
  Tensor y;
  {
    NoGradGuard no_grad;
    y = argmax((*teacher)(x * 2.0), 1);
  }
  const int64_t n_train = o.samples * 7 / 8;
  Tensor x_train = x.narrow(0, 0, n_train), y_train = y.narrow(0, 0, n_train);
  Tensor x_val = x.narrow(0, n_train, o.samples - n_train), y_val = y.narrow(0, n_train, o.samples - n_train);

  auto student = mlp(o.features, 256, o.classes);
  optim::AdamW opt(student->parameters(), {o.lr});
  std::printf("train_synthetic: MLP %lld-256-256-%lld on %lld samples (%lld train / %lld val), batch %lld, "
              "AdamW lr %g, cpu\n",
              (long long)o.features, (long long)o.classes, (long long)o.samples, (long long)n_train,
              (long long)(o.samples - n_train), (long long)o.batch, o.lr);
  auto start = std::chrono::steady_clock::now();
  double last_loss = 0;
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    double total = 0;
    int64_t batches = 0;
    for (int64_t b = 0; b + o.batch <= n_train; b += o.batch) {
      Tensor loss = cross_entropy((*student)(x_train.narrow(0, b, o.batch)), y_train.narrow(0, b, o.batch));
      opt.zero_grad();
      loss.backward();
      opt.step();
      total += loss.item();
      ++batches;
    }
    last_loss = total / double(std::max<int64_t>(batches, 1));
    std::printf("epoch %lld  train_loss %.4f  val_acc %.4f\n", (long long)epoch, last_loss,
                accuracy(*student, x_val, y_val));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("done: %lld epochs in %.2f s (%.0f samples/s), final train_loss %.4f, val_acc %.4f\n",
              (long long)o.epochs, seconds, double(o.epochs * n_train) / seconds, last_loss,
              accuracy(*student, x_val, y_val));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "train_synthetic: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_synthetic: error: %s\n", e.what());
    return 1;
  }
}
