// data::TextDataModule (engine/data/text_data.h) on small temp files: windows are the file's
// tokens shifted by one, the 90/10 split, determinism by (seed, epoch, index) and fresh windows
// per epoch, llm.c's token format, and each bad input's ConfigError.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "base/error.h"
#include "data_test_util.h"
#include "engine/data/text_data.h"

using namespace tandem;
using namespace tandem::data;
using tandem::data::testing::TempDir;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// llm.c's layout: int32 header[256] = {magic, version, count}, then uint16 tokens.
void write_llmc(const std::string& path, const std::vector<uint16_t>& tokens, int32_t magic = 20240520,
                int32_t version = 1, int32_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count < 0 ? int32_t(tokens.size()) : count;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(2 * tokens.size()));
}

std::string alphabet_text(int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += char('a' + i % 26);
  return s;
}

TextDataOptions small(const std::string& path, int64_t block = 4) {
  TextDataOptions o;
  o.path = path;
  o.block_size = block;
  o.batch_size = 3;
  o.samples_per_epoch = 15;  // 5 batches of 3
  o.val_samples = 6;
  o.prefetch = 0;
  return o;
}

std::vector<Batch> epoch_batches(DataLoader& loader, int64_t epoch, int64_t skip = 0) {
  loader.start_epoch(epoch, skip);
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(*b);
  return out;
}

bool same(const Batch& a, const Batch& b) {
  return a.input.to_vector<int64_t>() == b.input.to_vector<int64_t>() && a.target.to_vector<int64_t>() == b.target.to_vector<int64_t>();
}

template <typename F>
void expect_config_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

}  // namespace

TEST(TextData, WindowsAreConsecutiveBytesAndTheirNextBytesFromTheRightSplit) {
  TempDir dir;
  write_bytes(dir.file("t.txt"), alphabet_text(1000));  // 900 train bytes, 100 val bytes
  TextDataModule dm(small(dir.file("t.txt")));
  dm.setup("fit");
  EXPECT_EQ(dm.train_tokens(), 900);
  EXPECT_EQ(dm.val_tokens(), 100);
  auto train = dm.train_dataloader();
  EXPECT_EQ(train->num_batches(), 5);
  for (const Batch& b : epoch_batches(*train, 0)) {
    ASSERT_EQ(b.input.shape(), (Shape{3, 4}));
    ASSERT_EQ(b.input.dtype(), DType::Int64);
    const auto x = b.input.to_vector<int64_t>(), y = b.target.to_vector<int64_t>();
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t t = 0; t < 4; ++t) {
        const int64_t cur = x[size_t(r * 4 + t)];
        EXPECT_EQ(y[size_t(r * 4 + t)], 'a' + (cur - 'a' + 1) % 26);                  // the next byte
        if (t > 0) EXPECT_EQ(cur, 'a' + (x[size_t(r * 4 + t - 1)] - 'a' + 1) % 26);  // consecutive
      }
    }
  }
  // Validation windows come from the last 100 bytes only: positions 900.. hold 'q' (900 % 26 = 16)
  // onward; a window starting there at offset k begins with 'a' + (16 + k) % 26. Check the split by
  // a file whose val part has its own bytes.
  std::string marked = std::string(900, 'x') + std::string(100, 'v');
  write_bytes(dir.file("m.txt"), marked);
  TextDataModule m(small(dir.file("m.txt")));
  for (const Batch& b : epoch_batches(*m.val_dataloader(), 0))
    for (int64_t v : b.input.to_vector<int64_t>()) EXPECT_EQ(v, 'v');
  for (const Batch& b : epoch_batches(*m.train_dataloader(), 0))
    for (int64_t v : b.target.to_vector<int64_t>()) EXPECT_EQ(v, 'x');
}

TEST(TextData, DeterministicBySeedFreshEachEpochAndResumableMidEpoch) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) text += char(i * 7919 % 251);
  write_bytes(dir.file("t.bin"), text);
  TextDataModule a(small(dir.file("t.bin"))), b(small(dir.file("t.bin")));
  auto la = a.train_dataloader(), lb = b.train_dataloader();
  const auto e0 = epoch_batches(*la, 0), e0_again = epoch_batches(*lb, 0), e1 = epoch_batches(*la, 1);
  ASSERT_EQ(e0.size(), 5u);
  for (size_t i = 0; i < e0.size(); ++i) EXPECT_TRUE(same(e0[i], e0_again[i])) << i;
  int differ = 0;
  for (size_t i = 0; i < e0.size(); ++i) differ += !same(e0[i], e1[i]);
  EXPECT_EQ(differ, 5);
  // A resumed epoch (skip 2 batches) sees the uninterrupted run's batches 2..4.
  const auto resumed = epoch_batches(*lb, 1, 2);
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same(resumed[i], e1[i + 2]));
  TextDataOptions other = small(dir.file("t.bin"));
  other.seed = 7;
  TextDataModule c(other);
  EXPECT_FALSE(same(epoch_batches(*c.train_dataloader(), 0)[0], e0[0]));
  // Validation windows are the same every time.
  EXPECT_TRUE(same(epoch_batches(*a.val_dataloader(), 0)[1], epoch_batches(*a.val_dataloader(), 3)[1]));
}

TEST(TextData, ReadsLlmcTokenFilesAndDirectories) {
  TempDir dir;
  std::vector<uint16_t> train(200), val(50);
  for (size_t i = 0; i < train.size(); ++i) train[i] = uint16_t(1000 + i);
  for (size_t i = 0; i < val.size(); ++i) val[i] = uint16_t(40000 + i);
  write_llmc(dir.file("tiny_shakespeare_train.bin"), train);
  write_llmc(dir.file("tiny_shakespeare_val.bin"), val);
  TextDataOptions o = small("", 8);
  o.tokens = dir.str();
  o.vocab_size = 50304;
  TextDataModule dm(o);
  dm.setup("fit");
  EXPECT_EQ(dm.train_tokens(), 200);
  EXPECT_EQ(dm.val_tokens(), 50);
  for (const Batch& b : epoch_batches(*dm.train_dataloader(), 0)) {
    const auto x = b.input.to_vector<int64_t>(), y = b.target.to_vector<int64_t>();
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_GE(x[i], 1000);
      EXPECT_LT(x[i], 1200);
      EXPECT_EQ(y[i], x[i] + 1);
    }
  }
  for (const Batch& b : epoch_batches(*dm.val_dataloader(), 0))
    for (int64_t v : b.input.to_vector<int64_t>()) EXPECT_GE(v, 40000);
  // One file: split 90/10 by position.
  o.tokens = dir.file("tiny_shakespeare_train.bin");
  TextDataModule one(o);
  one.setup("fit");
  EXPECT_EQ(one.train_tokens(), 180);
  EXPECT_EQ(one.val_tokens(), 20);
}

TEST(TextData, BadInputIsAConfigErrorSayingWhatIsWrong) {
  TempDir dir;
  write_bytes(dir.file("empty.txt"), "");
  expect_config_error([&] { TextDataModule(small(dir.file("empty.txt"))).setup("fit"); }, {"empty.txt", "is empty"});
  write_bytes(dir.file("short.txt"), alphabet_text(40));  // val split: 4 bytes < block 4 + 1
  expect_config_error([&] { TextDataModule(small(dir.file("short.txt"))).setup("fit"); },
                      {"short.txt", "validation split has 4 tokens", "block_size + 1 = 5"});
  expect_config_error([&] { TextDataModule(small(dir.file("missing.txt"))).setup("fit"); }, {"missing.txt", "cannot open"});
  std::vector<uint16_t> tokens(100, 5);
  TextDataOptions o = small("", 4);
  o.tokens = dir.file("magic.bin");
  write_llmc(o.tokens, tokens, 12345);
  expect_config_error([&] { TextDataModule(o).setup("fit"); }, {"magic.bin", "magic number 20240520", "12345"});
  o.tokens = dir.file("version.bin");
  write_llmc(o.tokens, tokens, 20240520, 2);
  expect_config_error([&] { TextDataModule(o).setup("fit"); }, {"version 2", "only version 1"});
  o.tokens = dir.file("count.bin");
  write_llmc(o.tokens, tokens, 20240520, 1, 150);
  expect_config_error([&] { TextDataModule(o).setup("fit"); }, {"says it holds 150 tokens", "hold 100"});
  o.tokens = dir.file("vocab.bin");
  tokens[17] = 300;
  write_llmc(o.tokens, tokens);
  o.vocab_size = 256;
  expect_config_error([&] { TextDataModule(o).setup("fit"); }, {"token id 300", "vocab_size 256"});
  write_bytes(dir.file("bytes.txt"), alphabet_text(200));
  TextDataOptions bytes = small(dir.file("bytes.txt"));
  bytes.vocab_size = 100;  // 'z' = 122
  expect_config_error([&] { TextDataModule(bytes).setup("fit"); }, {"token id 122"});
  TextDataOptions both = small(dir.file("bytes.txt"));
  both.tokens = dir.file("vocab.bin");
  expect_config_error([&] { TextDataModule{both}; }, {"--data.path and --data.tokens"});
  expect_config_error([&] { TextDataModule(small(dir.file("bytes.txt"), 0)).setup("fit"); }, {"--data.block_size"});
}
