// The corpus-replay driver: linked with one fuzz target instead of libFuzzer (gcc builds, every
// ctest run), it feeds each file under the given files or directories to LLVMFuzzerTestOneInput
// once. A finding aborts the process (an uncaught exception of a type the target does not
// accept, or fuzz::finding), so the test fails naming the input it was on.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

void replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    std::exit(2);
  }
  std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...  (runs each input through the fuzz target once)\n", argv[0]);
    return 2;
  }
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path root = argv[i];
    if (!fs::exists(root)) {
      std::fprintf(stderr, "%s does not exist\n", argv[i]);
      return 2;
    }
    std::vector<fs::path> files;
    if (fs::is_directory(root)) {
      for (const auto& entry : fs::recursive_directory_iterator(root))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else {
      files.push_back(root);
    }
    std::sort(files.begin(), files.end());  // a stable order, so a failing run is repeatable
    for (const auto& file : files) replay(file), ++count;
  }
  std::printf("%zu inputs replayed without a finding\n", count);
  return 0;
}
