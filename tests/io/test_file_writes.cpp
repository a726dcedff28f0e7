// The writers every Tandem file goes through (engine/io/atomic_file.h), on a "full disk": the
// process's file-size limit (RLIMIT_FSIZE) makes writes past 4 KiB fail with EFBIG, as a full
// filesystem fails them with ENOSPC, without needing root or a small filesystem.
#include <signal.h>
#include <sys/resource.h>

#include "base/error.h"
#include "engine/io/atomic_file.h"
#include "io_test_util.h"

namespace tandem::test {
namespace {

// Limits the size of files this process writes to `bytes` while alive (SIGXFSZ ignored, so the
// write fails instead of killing the process).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  sighandler_t old_handler_;
};

std::string text_of(const std::string& path) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

TEST(FileWrites, AFailedAtomicWriteIsAnErrorAndKeepsTheOldFile) {
  ScratchDir dir;
  const std::string path = dir.file("predictions.csv");
  io::write_file_atomically(path, "old\n");
  {
    FileSizeLimit full(4096);
    expect_error<DataError>([&] { io::write_file_atomically(path, std::string(10000, 'x')); },
                            {"cannot save '" + path + "'", "File too large", "was left as it was"});
  }
  EXPECT_EQ(text_of(path), "old\n");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"predictions.csv"});  // no temporary file left
}

TEST(FileWrites, AFailedAppendIsAnErrorAndLeavesNoPartialLine) {
  ScratchDir dir;
  const std::string path = dir.file("metrics.csv");
  const std::string rows = "step,epoch,loss\n" + std::string(4000, '1') + "\n";
  io::append_to_file(path, rows);
  {
    FileSizeLimit full(4096);  // room for 80 of the next row's 200 bytes
    expect_error<DataError>([&] { io::append_to_file(path, std::string(199, '2') + "\n"); },
                            {"cannot append to '" + path + "'", "File too large", "cut back to what it held before"});
  }
  EXPECT_EQ(text_of(path), rows);
  io::append_to_file(path, "3,0,0.5\n");
  EXPECT_EQ(text_of(path), rows + "3,0,0.5\n");
}

}  // namespace tandem::test
