#include "engine/data/text_data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <vector>

#include "base/error.h"

namespace tandem::data {

namespace fs = std::filesystem;

namespace {

constexpr int32_t kLlmcMagic = 20240520;
constexpr int32_t kLlmcVersion = 1;
constexpr int64_t kLlmcHeaderBytes = 256 * 4;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

// A read-only memory map of a token file: `count` ids of `width` bytes starting at `first`.
class TokenFile {
 public:
  TokenFile(const std::string& path, bool llmc) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw ConfigError(path + ": cannot open (" + std::strerror(errno) + "); check --data.path / --data.tokens");
    struct stat st {};
    ::fstat(fd, &st);
    size_ = int64_t(st.st_size);
    if (size_ == 0) {
      ::close(fd);
      throw ConfigError(path + " is empty; a text needs at least block_size + 1 tokens");
    }
    void* map = ::mmap(nullptr, size_t(size_), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) throw DataError(path + ": mmap failed (" + std::strerror(errno) + ")");
    map_ = static_cast<const uint8_t*>(map);
    if (!llmc) {
      width_ = 1;
      first_ = map_;
      count_ = size_;
      return;
    }
    width_ = 2;
    if (size_ < kLlmcHeaderBytes) fail("has " + std::to_string(size_) + " bytes, fewer than llm.c's 1024-byte header");
    int32_t header[3];
    std::memcpy(header, map_, sizeof(header));
    if (header[0] != kLlmcMagic) fail("does not start with llm.c's magic number 20240520 (got " + std::to_string(header[0]) + ")");
    if (header[1] != kLlmcVersion) fail("is llm.c token format version " + std::to_string(header[1]) + "; only version 1 (uint16 tokens) is read");
    count_ = header[2];
    if (count_ < 0 || kLlmcHeaderBytes + 2 * count_ != size_) {
      fail("says it holds " + std::to_string(header[2]) + " tokens, but its " + std::to_string(size_) +
           " bytes hold " + std::to_string((size_ - kLlmcHeaderBytes) / 2) + " after the header");
    }
    first_ = map_ + kLlmcHeaderBytes;
  }
  ~TokenFile() { ::munmap(const_cast<uint8_t*>(map_), size_t(size_)); }
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t count() const { return count_; }
  const std::string& path() const { return path_; }
  int64_t at(int64_t i) const {
    if (width_ == 1) return first_[i];
    uint16_t v;
    std::memcpy(&v, first_ + 2 * i, 2);
    return v;
  }
  int64_t max_id() const {
    int64_t m = 0;
    for (int64_t i = 0; i < count_; ++i) m = std::max(m, at(i));
    return m;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    ::munmap(const_cast<uint8_t*>(map_), size_t(size_));
    throw ConfigError(path_ + " " + what + " (llm.c's format: 256 int32 header [20240520, 1, count], then count uint16 tokens)");
  }

  std::string path_;
  const uint8_t* map_ = nullptr;
  const uint8_t* first_ = nullptr;
  int64_t size_ = 0, count_ = 0;
  int width_ = 1;
};

namespace {

// Windows of block_size + 1 tokens from [begin, end) of a token file; example i of epoch e
// starts at hash(seed, stream, e, i) mod (n - block_size). fresh=false: the epoch is ignored.
class TextWindows : public Dataset {
 public:
  TextWindows(std::shared_ptr<const TokenFile> file, int64_t begin, int64_t end, int64_t block, int64_t windows,
              uint64_t seed, uint64_t stream, bool fresh)
      : file_(std::move(file)), begin_(begin), end_(end), block_(block), windows_(windows), seed_(seed),
        stream_(stream), fresh_(fresh) {}
  int64_t size() const override { return windows_; }
  Batch get_batch(const std::vector<int64_t>& indices) const override { return get_epoch_batch(indices, 0); }
  Batch get_epoch_batch(const std::vector<int64_t>& indices, int64_t epoch) const override {
    const int64_t B = int64_t(indices.size());
    Tensor x = Tensor::empty({B, block_}, DType::Int64), y = Tensor::empty({B, block_}, DType::Int64);
    int64_t* xs = x.data_ptr<int64_t>();
    int64_t* ys = y.data_ptr<int64_t>();
    const uint64_t starts = uint64_t(end_ - begin_ - block_);
    for (int64_t b = 0; b < B; ++b) {
      const uint64_t e = fresh_ ? uint64_t(epoch) : 0;
      const uint64_t h = splitmix64(seed_ ^ splitmix64(stream_ ^ splitmix64(e ^ splitmix64(uint64_t(indices[size_t(b)])))));
      const int64_t start = begin_ + int64_t(h % starts);
      for (int64_t t = 0; t < block_; ++t) {
        xs[b * block_ + t] = file_->at(start + t);
        ys[b * block_ + t] = file_->at(start + t + 1);
      }
    }
    return {x, y};
  }

 private:
  std::shared_ptr<const TokenFile> file_;
  int64_t begin_, end_, block_, windows_;
  uint64_t seed_, stream_;
  bool fresh_;
};

// The one file in dir whose name has `part` ("_train", "_val") and ends in .bin.
std::string split_file(const std::string& dir, const std::string& part) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(part) != std::string::npos && entry.path().extension() == ".bin") found.push_back(entry.path().string());
  }
  if (found.size() != 1) {
    throw ConfigError("--data.tokens=" + dir + " must hold exactly one *" + part + "*.bin file (llm.c's naming), found " +
                      std::to_string(found.size()) + (found.size() > 1 ? "; pass one file with --data.tokens=FILE" : ""));
  }
  return found[0];
}

}  // namespace

void TextDataOptions::validate() const {
  auto at_least = [](const char* key, int64_t v, int64_t lo) {
    if (v < lo) throw ConfigError(std::string("--data.") + key + "=" + std::to_string(v) + " is not valid: expected >= " + std::to_string(lo));
  };
  if (!path.empty() && !tokens.empty()) {
    throw ConfigError("--data.path and --data.tokens are both set; give one (bytes of a file, or llm.c token files)");
  }
  at_least("block_size", block_size, 0);
  at_least("vocab_size", vocab_size, 1);
  at_least("batch_size", batch_size, 1);
  at_least("samples_per_epoch", samples_per_epoch, 1);
  at_least("val_samples", val_samples, 0);
  at_least("prefetch", prefetch, 0);
}

nlohmann::json TextDataOptions::to_json() const {
  return {{"path", path}, {"tokens", tokens}, {"block_size", block_size}, {"vocab_size", vocab_size},
          {"batch_size", batch_size}, {"samples_per_epoch", samples_per_epoch}, {"val_samples", val_samples},
          {"seed", seed}, {"prefetch", prefetch}};
}

TextDataOptions TextDataOptions::from_json(const nlohmann::json& json) {
  TextDataOptions o;
  const nlohmann::json known = o.to_json();
  for (const auto& [key, value] : json.items()) {
    if (!known.contains(key)) throw ConfigError("--data." + key + " is not an option of --data=text; it takes " + [&] {
        std::string names;
        for (const auto& [k, v] : known.items()) names += (names.empty() ? "" : ", ") + k;
        return names;
      }());
    try {
      if (key == "path") o.path = value.is_string() ? value.get<std::string>() : value.dump();
      else if (key == "tokens") o.tokens = value.is_string() ? value.get<std::string>() : value.dump();
      else if (key == "block_size") o.block_size = value.get<int64_t>();
      else if (key == "vocab_size") o.vocab_size = value.get<int64_t>();
      else if (key == "batch_size") o.batch_size = value.get<int64_t>();
      else if (key == "samples_per_epoch") o.samples_per_epoch = value.get<int64_t>();
      else if (key == "val_samples") o.val_samples = value.get<int64_t>();
      else if (key == "seed") o.seed = value.get<uint64_t>();
      else if (key == "prefetch") o.prefetch = value.get<int>();
    } catch (const nlohmann::json::exception&) {
      throw ConfigError("--data." + key + "=" + value.dump() + " is not valid: expected " +
                        (known[key].is_string() ? "a path" : "an integer"));
    }
  }
  return o;
}

TextDataModule::TextDataModule(TextDataOptions options) : options_(std::move(options)) { options_.validate(); }
TextDataModule::~TextDataModule() = default;

void TextDataModule::setup(const std::string& stage) {
  if (train_file_) return;
  if (options_.block_size < 1) {
    throw ConfigError("--data.block_size is not set; give it, or train a model that sets it (--model=gpt...)");
  }
  const int64_t need = options_.block_size + 1;
  if (!options_.tokens.empty() && fs::is_directory(options_.tokens)) {
    train_file_ = std::make_shared<TokenFile>(split_file(options_.tokens, "_train"), true);
    val_file_ = std::make_shared<TokenFile>(split_file(options_.tokens, "_val"), true);
    train_end_ = train_file_->count();
    val_end_ = val_file_->count();
  } else {
    const bool llmc = !options_.tokens.empty();
    if (!llmc && options_.path.empty()) {
      throw ConfigError("--data=text needs --data.path=FILE or --data.tokens=FILE_OR_DIR (the CLI fills in the default "
                        "corpus, data_section.h)");
    }
    const std::string path = llmc ? options_.tokens : options_.path;
    train_file_ = std::make_shared<TokenFile>(path, llmc);
    val_file_ = train_file_;
    train_end_ = train_file_->count() * 9 / 10;  // nanoGPT's prepare.py: the first 90% trains
    val_begin_ = train_end_;
    val_end_ = train_file_->count();
  }
  for (const auto& [file, n, what] : {std::tuple{train_file_, train_end_ - train_begin_, "training"},
                                      std::tuple{val_file_, val_end_ - val_begin_, "validation"}}) {
    if (n < need) {
      throw ConfigError(file->path() + ": the " + what + " split has " + std::to_string(n) + " tokens, fewer than block_size + 1 = " +
                        std::to_string(need) + "; use a longer file or a smaller --data.block_size / --model.block_size");
    }
  }
  for (const auto& file : {train_file_, val_file_}) {
    const int64_t largest = file->max_id();
    if (largest >= options_.vocab_size) {
      throw ConfigError(file->path() + " holds token id " + std::to_string(largest) + ", not below vocab_size " +
                        std::to_string(options_.vocab_size) + "; use a model with --model.vocab_size > " + std::to_string(largest));
    }
  }
  (void)stage;
}

int64_t TextDataModule::train_tokens() const { return train_end_ - train_begin_; }
int64_t TextDataModule::val_tokens() const { return val_end_ - val_begin_; }

std::shared_ptr<DataLoader> TextDataModule::train_dataloader() {
  setup("fit");
  auto windows = std::make_shared<TextWindows>(train_file_, train_begin_, train_end_, options_.block_size,
                                               options_.samples_per_epoch, options_.seed, 0, true);
  DataLoaderOptions o;
  o.batch_size = options_.batch_size;
  o.prefetch = options_.prefetch;
  return std::make_shared<DataLoader>(windows, o);
}

std::shared_ptr<DataLoader> TextDataModule::val_dataloader() {
  setup("fit");
  if (options_.val_samples == 0) return nullptr;  // no validation
  auto windows = std::make_shared<TextWindows>(val_file_, val_begin_, val_end_, options_.block_size,
                                               options_.val_samples, options_.seed, 1, false);
  DataLoaderOptions o;
  o.batch_size = options_.batch_size;
  o.prefetch = options_.prefetch;
  return std::make_shared<DataLoader>(windows, o);
}

std::shared_ptr<DataLoader> TextDataModule::test_dataloader() { return val_dataloader(); }

nlohmann::json TextDataModule::hparams() const {
  nlohmann::json h = options_.to_json();
  // Keys of their own: the model's hparams hold its block_size and vocab_size.
  h["data_block_size"] = h["block_size"];
  h.erase("block_size");
  h.erase("vocab_size");
  h.erase("prefetch");
  h["data"] = "text";
  return h;
}

}  // namespace tandem::data
