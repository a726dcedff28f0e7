#include "engine/trainer/callbacks/progress_bar.h"

#include <cstdlib>

#include <unistd.h>

#include <cmath>

#include "engine/trainer/trainer.h"

namespace tandem::trainer {

namespace {

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long long s = static_cast<long long>(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%02lld:%02lld", s / 60, s % 60);
  return buf;
}

std::string metric_text(const std::string& name, double v) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s=%.3g", name.c_str(), v);
  return buf;
}

// A terminal redraws in place. Under mpirun, a rank's stdout is Open MPI's pty even when the
// job's output goes to a file, so Tandem's relaunch passes down what the parent saw
// (TANDEM_STDOUT_IS_TTY=0|1).
bool is_terminal(std::FILE* out) {
  if (!out) return false;
  if (out == stdout) {
    if (const char* v = std::getenv("TANDEM_STDOUT_IS_TTY"); v && (v[0] == '0' || v[0] == '1') && v[1] == '\0') return v[0] == '1';
  }
  return isatty(fileno(out)) != 0;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

ProgressBar::ProgressBar(std::FILE* out, std::optional<bool> interactive, int plain_every_percent)
    : out_(out), interactive_(interactive.value_or(is_terminal(out))),
      plain_every_percent_(std::max(1, plain_every_percent)) {}

std::string ProgressBar::render(const std::string& description, int64_t done, int64_t total, double elapsed_s,
                                const std::string& postfix, int width) {
  const double rate = elapsed_s > 0 ? double(done) / elapsed_s : 0.0;
  std::string line = description + ": ";
  if (total > 0) {
    const double frac = std::min(1.0, double(done) / double(total));
    char pct[16];
    std::snprintf(pct, sizeof pct, "%3d%%", int(frac * 100));
    const int filled = int(frac * width);
    line += std::string(pct) + "|" + std::string(size_t(filled), '#') + std::string(size_t(width - filled), ' ') + "| ";
    line += std::to_string(done) + "/" + std::to_string(total);
    const double eta = rate > 0 ? double(total - done) / rate : NAN;
    line += " [" + clock_text(elapsed_s) + "<" + clock_text(eta);
  } else {
    line += std::to_string(done) + " [" + clock_text(elapsed_s);
  }
  char r[32];
  if (rate >= 1.0 || rate == 0.0) std::snprintf(r, sizeof r, ", %.2fit/s", rate);
  else std::snprintf(r, sizeof r, ", %.2fs/it", 1.0 / rate);
  line += r;
  if (!postfix.empty()) line += ", " + postfix;
  return line + "]";
}

void ProgressBar::start_bar(Bar& bar, const std::string& description, int64_t total) {
  bar.description = description;
  bar.total = total;
  bar.done = 0;
  bar.last_plain_percent = 0;
  bar.start = std::chrono::steady_clock::now();
  bar.active = true;
}

void ProgressBar::update(Bar& bar, int64_t done, const std::string& postfix, bool final_update) {
  bar.done = done;
  const std::string line = render(bar.description, done, bar.total, seconds_since(bar.start), postfix);
  if (interactive_) {
    std::fprintf(out_, "\r%s\033[K", line.c_str());  // \033[K clears what a longer line left
    if (final_update) std::fputc('\n', out_);
    std::fflush(out_);
    return;
  }
  // Plain output: a line each plain_every_percent of the way, and the last one.
  const int64_t percent = bar.total > 0 ? done * 100 / bar.total : 0;
  // The 100% line is left to close(), which has the epoch's final metrics.
  if (final_update || (percent < 100 && percent >= bar.last_plain_percent + plain_every_percent_)) {
    bar.last_plain_percent = percent - percent % plain_every_percent_;
    std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
  }
}

void ProgressBar::close(Bar& bar, const std::string& postfix) {
  if (!bar.active) return;
  bar.active = false;
  update(bar, bar.done, postfix, true);
}

std::string ProgressBar::train_postfix(Trainer& trainer) const {
  std::string s;
  if (auto v = trainer.logger_version()) s = "v_num=" + std::to_string(*v);
  if (!recent_losses_.empty()) {
    double sum = 0;
    for (double l : recent_losses_) sum += l;
    s += std::string(s.empty() ? "" : ", ") + metric_text("loss", sum / double(recent_losses_.size()));
  }
  for (const auto& [k, v] : trainer.progress_bar_metrics()) s += std::string(s.empty() ? "" : ", ") + metric_text(k, v);
  return s;
}

std::string ProgressBar::eval_postfix(Trainer& trainer) const {
  std::string s;
  for (const auto& [k, v] : trainer.progress_bar_metrics()) s += std::string(s.empty() ? "" : ", ") + metric_text(k, v);
  return s;
}

void ProgressBar::on_sanity_check_start(Trainer& trainer, LightningModule&) {
  if (interactive_) start_bar(eval_, "Sanity Checking", trainer.num_sanity_val_batches());
}

void ProgressBar::on_sanity_check_end(Trainer&, LightningModule&) {
  if (!interactive_ || !eval_.active) return;
  eval_.active = false;
  std::fprintf(out_, "\r\033[K");  // the sanity bar leaves no line behind
  std::fflush(out_);
}

void ProgressBar::on_train_epoch_start(Trainer& trainer, LightningModule&) {
  const int64_t max_epochs = trainer.max_epochs();
  std::string description = "Epoch " + std::to_string(trainer.current_epoch());
  if (max_epochs > 0) description += "/" + std::to_string(max_epochs);
  start_bar(main_, description, trainer.num_training_batches());
  main_.done = trainer.fit_progress().batch_in_epoch;
}

void ProgressBar::on_train_batch_end(Trainer& trainer, LightningModule&, const Tensor& loss, const data::Batch&,
                                     int64_t batch_idx) {
  if (loss.defined()) {
    recent_losses_.push_back(loss.item());
    if (recent_losses_.size() > 20) recent_losses_.pop_front();
  }
  update(main_, batch_idx + 1, train_postfix(trainer), false);
}

void ProgressBar::on_train_epoch_end(Trainer& trainer, LightningModule&) { close(main_, train_postfix(trainer)); }

void ProgressBar::on_validation_epoch_start(Trainer& trainer, LightningModule&) {
  if (trainer.sanity_checking()) return;
  if (interactive_ || !trainer.fitting()) start_bar(eval_, "Validation", trainer.num_val_batches());
}

void ProgressBar::on_validation_batch_end(Trainer& trainer, LightningModule&, const data::Batch&, int64_t batch_idx) {
  if (!eval_.active) return;
  if (interactive_) update(eval_, batch_idx + 1, "", false);
  else eval_.done = batch_idx + 1;
}

void ProgressBar::on_validation_epoch_end(Trainer& trainer, LightningModule&) {
  if (trainer.sanity_checking() || !eval_.active) return;
  if (trainer.fitting() && interactive_) {
    // Validation inside fit draws over the training bar; put the training bar back.
    eval_.active = false;
    update(main_, main_.done, train_postfix(trainer), false);
    return;
  }
  close(eval_, eval_postfix(trainer));
}

void ProgressBar::on_test_epoch_start(Trainer& trainer, LightningModule&) { start_bar(eval_, "Testing", trainer.num_test_batches()); }

void ProgressBar::on_test_batch_end(Trainer&, LightningModule&, const data::Batch&, int64_t batch_idx) {
  if (interactive_) update(eval_, batch_idx + 1, "", false);
  else eval_.done = batch_idx + 1;
}

void ProgressBar::on_test_epoch_end(Trainer& trainer, LightningModule&) { close(eval_, eval_postfix(trainer)); }

void ProgressBar::on_predict_start(Trainer& trainer, LightningModule&) {
  start_bar(eval_, "Predicting", trainer.num_predict_batches());
}

void ProgressBar::on_predict_batch_end(Trainer&, LightningModule&, const Tensor&, const data::Batch&, int64_t batch_idx) {
  if (interactive_) update(eval_, batch_idx + 1, "", false);
  else eval_.done = batch_idx + 1;
}

void ProgressBar::on_predict_end(Trainer&, LightningModule&) { close(eval_, ""); }

void ProgressBar::on_exception(Trainer&, LightningModule&, const std::exception&) {
  // End the bar's line so the error message starts on its own.
  if (interactive_ && (main_.active || eval_.active)) std::fputc('\n', out_);
  main_.active = eval_.active = false;
  std::fflush(out_);
}

}  // namespace tandem::trainer
