// POSIX implementation of AtomicFileWriter (see the header for the protocol).
#include "engine/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace tandem::io {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

std::string parent_directory(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Makes a completed rename durable. Some filesystems cannot fsync a directory and say
// EINVAL; the rename has still happened, so that is not a failure of the save.
void fsync_directory(const std::string& dir, const std::string& path) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    int err = errno;
    throw DataError("saved '" + path + "' but could not open its directory '" + dir +
                    "' to make the rename durable: " + errno_text(err));
  }
  int rc;
  do rc = ::fsync(dfd);
  while (rc != 0 && errno == EINTR);
  int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    throw DataError("saved '" + path + "' but fsync of its directory '" + dir + "' failed: " + errno_text(err) +
                    "; the file may not survive a power loss");
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw DataError("cannot save to an empty path; give a file name");
  temp_path_ = path_ + ".tmp-" + std::to_string(::getpid());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    int err = errno;
    throw DataError("cannot save '" + path_ + "': creating the temporary file '" + temp_path_ +
                    "' failed: " + errno_text(err) + "; check that the directory '" + parent_directory(path_) +
                    "' exists and is writable");
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::fail(const std::string& what, int err) {
  discard();
  throw DataError("cannot save '" + path_ + "': " + what + " failed: " + errno_text(err) + "; '" + path_ +
                  "' was left as it was");
}

void AtomicFileWriter::write(const void* data, size_t nbytes) {
  if (fd_ < 0) throw DataError("AtomicFileWriter: write to '" + path_ + "' after commit or failure");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    // Linux writes at most ~2 GiB per call; the loop also covers short writes.
    ssize_t n = ::write(fd_, p, nbytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("writing '" + temp_path_ + "'", errno);
    }
    p += n;
    nbytes -= size_t(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw DataError("AtomicFileWriter: commit of '" + path_ + "' twice or after a failure");
  int rc;
  do rc = ::fsync(fd_);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) fail("fsync of '" + temp_path_ + "'", errno);
  // close() can report a deferred write error (NFS); the data is not safe if it does.
  rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("closing '" + temp_path_ + "'", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("renaming '" + temp_path_ + "' over it", errno);
  committed_ = true;
  fsync_directory(parent_directory(path_), path_);
}

void write_file_atomically(const std::string& path, const std::string& content) {
  AtomicFileWriter out(path);
  out.write(content.data(), content.size());
  out.commit();
}

void append_to_file(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw DataError("cannot write '" + path + "': " + errno_text(err) + "; check that the directory '" +
                    parent_directory(path) + "' exists and is writable");
  }
  struct stat before {};
  const off_t old_size = ::fstat(fd, &before) == 0 ? before.st_size : -1;
  const char* p = content.data();
  size_t left = content.size();
  int err = 0;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    left -= size_t(n);
  }
  if (err != 0) {
    const bool restored = old_size >= 0 && ::ftruncate(fd, old_size) == 0;
    ::close(fd);
    throw DataError("cannot append to '" + path + "': " + errno_text(err) +
                    (restored ? "; the file was cut back to what it held before" : "; its last line may be partial"));
  }
  if (::close(fd) != 0) {
    err = errno;
    throw DataError("cannot append to '" + path + "': closing it failed: " + errno_text(err));
  }
}

}  // namespace tandem::io
