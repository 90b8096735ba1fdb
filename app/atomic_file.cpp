#include "app/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"

namespace mpbench {

namespace {

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& path, int err, const std::string& tmp) {
  if (!tmp.empty()) ::unlink(tmp.c_str());
  throw_runtime(fmt::format("cannot write {}: {}", path, std::strerror(err)));
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  if (path.empty()) throw_runtime("cannot write an empty path");
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  // Nothing was created when open fails, so there is no temporary file to remove.
  if (fd < 0) fail(path, errno, "");

  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail(path, err, tmp);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, err, tmp);
  }
  if (::close(fd) != 0) fail(path, errno, tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(path, errno, tmp);

  // Make the rename itself durable; best effort, the file is complete either way.
  const int dfd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void check_writable(const std::string& path, const std::string& option) {
  const std::string what = option.empty() ? path : fmt::format("{} {}", option, path);
  if (path.empty())
    throw_bad_input(fmt::format("{}: empty path", option.empty() ? "output" : option));
  if (path.back() == '/') throw_bad_input(fmt::format("{}: is a directory, expected a file", what));
  const std::string dir = parent_dir(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      throw_bad_input(fmt::format("{}: directory {} does not exist", what, dir));
    }
    throw_bad_input(fmt::format("{}: directory {}: {}", what, dir, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) throw_bad_input(fmt::format("{}: {} is not a directory", what, dir));
  // Creating the temporary file and renaming it need write and search permission on the
  // directory; the old file's own permissions do not matter to rename.
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw_bad_input(fmt::format("{}: directory {} is not writable", what, dir));
  }
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw_bad_input(fmt::format("{}: is a directory, expected a file", what));
  }
}

}  // namespace mpbench
