// Text for language models (issue 24): token ids from a memory-mapped file, served as random
// windows the way nanoGPT's get_batch draws them.
//
//   --data.path=FILE     the bytes of any file are the tokens (vocab 256); first 90% train, last
//                        10% validation, split by position
//   --data.tokens=F|DIR  llm.c's token files: a 1024-byte header of 256 int32 (magic 20240520,
//                        version 1, token count), then the tokens as uint16. A file is split 90/10
//                        like a text; a directory holds one *_train*.bin and one *_val*.bin
//   neither              (the CLI) the default corpus: the King James Bible from Debian's
//                        bible-kjv, written once to a cache file (engine/config/data_section.h)
//
// A sample is block_size + 1 consecutive tokens from a uniformly random start in
// [0, n - block_size - 1]: input the first block_size, target the last block_size (the next token
// at each position). A training epoch is samples_per_epoch windows in all (the dataset's size, so
// one process takes ceil(samples_per_epoch / batch_size) batches and DDP's DistributedSampler
// shares them out: the same windows per epoch at any world size); window i of epoch e starts at
// a hash of (seed, e, i), so windows are fresh each epoch, different on every rank (ranks take
// different i), the same at any world size for the same global batch, and a run resumed mid-epoch
// sees exactly the windows the uninterrupted run would have. Validation and test use one fixed set
// of val_samples windows of the validation split (the same every time they run).
//
// Bad input is a ConfigError naming the file and what is allowed (the CLI exits 2): an empty or
// too short file (fewer than block_size + 1 tokens in a split), a wrong magic or version, a token
// count that disagrees with the file's size, a token id >= vocab_size.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/data/data_loader.h"
#include "engine/data/data_module.h"
#include "nlohmann/json.hpp"

namespace tandem::data {

struct TextDataOptions {
  std::string path;     // bytes of this file
  std::string tokens;   // llm.c token file or directory (exclusive with path)
  int64_t block_size = 0;          // tokens per input; 0: set by the model (the CLI: its block_size)
  int64_t vocab_size = 256;        // token ids must be below it (the CLI: the model's)
  int64_t batch_size = 12;
  int64_t samples_per_epoch = 12000;  // windows per training epoch, over all ranks
  int64_t val_samples = 240;        // validation windows (0: no validation)
  uint64_t seed = 1337;
  int prefetch = 2;

  void validate() const;  // ConfigError naming the --data.<key> flag
  nlohmann::json to_json() const;
  static TextDataOptions from_json(const nlohmann::json& json);  // ConfigError for unknown keys
};

// The token ids of one file, memory-mapped (uint8 for bytes, uint16 for llm.c tokens).
class TokenFile;

class TextDataModule : public DataModule {
 public:
  explicit TextDataModule(TextDataOptions options);
  ~TextDataModule() override;
  void setup(const std::string& stage) override;
  std::shared_ptr<DataLoader> train_dataloader() override;
  std::shared_ptr<DataLoader> val_dataloader() override;
  std::shared_ptr<DataLoader> test_dataloader() override;
  nlohmann::json hparams() const override;

  const TextDataOptions& options() const { return options_; }
  // Tokens in each split (after setup).
  int64_t train_tokens() const;
  int64_t val_tokens() const;

 private:
  TextDataOptions options_;
  std::shared_ptr<const TokenFile> train_file_, val_file_;
  int64_t train_begin_ = 0, train_end_ = 0, val_begin_ = 0, val_end_ = 0;
};

}  // namespace tandem::data
