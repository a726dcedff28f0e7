// AtomicFileWriter: writes a file so that readers see either the old file or the complete new
// one, never a torn mix, even if the process dies or the machine loses power mid-write.
//
// How: the bytes go to "<path>.tmp-<pid>" in the same directory (rename is atomic only within
// one filesystem), commit() fsyncs that file, renames it over path, then fsyncs the directory
// so the rename itself is durable. Until commit() succeeds, path is untouched; any failure, or
// destroying the writer without commit(), removes the temporary file. Failures throw DataError
// naming the file and the system's reason (strerror), e.g. "No space left on device".
//
//   io::AtomicFileWriter out("ckpt/last.safetensors");
//   out.write(header.data(), header.size());
//   out.write(data, nbytes);
//   out.commit();
#pragma once
#include <cstddef>
#include <string>

namespace tandem::io {

class AtomicFileWriter {
 public:
  // Creates the temporary file (DataError if the directory is missing or not writable).
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();  // removes the temporary file unless committed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends bytes, retrying short writes and EINTR.
  void write(const void* data, size_t nbytes);
  // Makes the file durable and visible at path. After it, write() is not allowed.
  void commit();

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);  // cleans up, then throws
  void discard() noexcept;

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// The whole of `content` as the file at `path`, through an AtomicFileWriter.
void write_file_atomically(const std::string& path, const std::string& content);

// Appends `content` to `path` (created when missing) for logs that grow by a line at a time
// (metrics.csv). Not atomic, but a failed or short write throws DataError with the system's
// reason and cuts the file back to its old length, so the file never ends in a torn line.
void append_to_file(const std::string& path, const std::string& content);

}  // namespace tandem::io
