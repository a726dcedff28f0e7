// ProgressBar: a TQDM-like bar on rank 0.
//
//   Epoch 3/10: 42%|████▏     | 97/230 [00:05<00:07, 18.4it/s, v_num=2, loss=0.412, val_acc=0.871]
//
// On a terminal (isatty) it redraws in place with '\r'; otherwise (CI logs, files) it prints a
// plain line every `plain_every_percent` percent of an epoch and at the end of each epoch, so
// logs stay short. Validation/test/predict get their own bar on a terminal and one summary line
// otherwise. `loss` is the mean training loss over the last 20 batches, as Lightning shows it.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <optional>
#include <string>

#include "engine/trainer/callback.h"

namespace tandem::trainer {

class ProgressBar : public Callback {
 public:
  // out: where to write (stdout by default); interactive: unset asks isatty(out).
  explicit ProgressBar(std::FILE* out = stdout, std::optional<bool> interactive = std::nullopt,
                       int plain_every_percent = 10);
  std::string name() const override { return "ProgressBar"; }

  void on_sanity_check_start(Trainer&, LightningModule&) override;
  void on_sanity_check_end(Trainer&, LightningModule&) override;
  void on_train_epoch_start(Trainer&, LightningModule&) override;
  void on_train_batch_end(Trainer&, LightningModule&, const Tensor& loss, const data::Batch&, int64_t) override;
  void on_train_epoch_end(Trainer&, LightningModule&) override;
  void on_validation_epoch_start(Trainer&, LightningModule&) override;
  void on_validation_batch_end(Trainer&, LightningModule&, const data::Batch&, int64_t) override;
  void on_validation_epoch_end(Trainer&, LightningModule&) override;
  void on_test_epoch_start(Trainer&, LightningModule&) override;
  void on_test_batch_end(Trainer&, LightningModule&, const data::Batch&, int64_t) override;
  void on_test_epoch_end(Trainer&, LightningModule&) override;
  void on_predict_start(Trainer&, LightningModule&) override;
  void on_predict_batch_end(Trainer&, LightningModule&, const Tensor&, const data::Batch&, int64_t) override;
  void on_predict_end(Trainer&, LightningModule&) override;
  void on_exception(Trainer&, LightningModule&, const std::exception&) override;

  // One rendered bar line (no '\r' or newline), for tests and custom bars.
  static std::string render(const std::string& description, int64_t done, int64_t total, double elapsed_s,
                            const std::string& postfix, int width = 10);

 private:
  struct Bar {
    std::string description;
    int64_t total = 0, done = 0, last_plain_percent = -1;
    std::chrono::steady_clock::time_point start;
    bool active = false;
  };
  void start_bar(Bar& bar, const std::string& description, int64_t total);
  void update(Bar& bar, int64_t done, const std::string& postfix, bool final_update);
  void close(Bar& bar, const std::string& postfix);
  std::string train_postfix(Trainer& trainer) const;
  std::string eval_postfix(Trainer& trainer) const;

  std::FILE* out_;
  bool interactive_;
  int plain_every_percent_;
  bool enabled_ = true;
  Bar main_, eval_;
  std::deque<double> recent_losses_;
};

}  // namespace tandem::trainer
