#include "app/output_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "kernels/error.h"

namespace mpbench {

namespace {

// The temporary file of the write in progress, for the signal handler. A fixed buffer and
// sig_atomic_t flags, since a handler may only touch those and call async-signal-safe functions.
char g_tmp_path[PATH_MAX + 32];
volatile sig_atomic_t g_tmp_active = 0;
volatile sig_atomic_t g_stderr_tty = 0;

extern "C" void on_interrupt(int sig) {
  if (g_tmp_active) ::unlink(g_tmp_path);
  // On a terminal a progress bar may be half drawn: start a line of our own.
  static const char kMsg[] = "\nmpbench: interrupted\n";
  const char* m = g_stderr_tty ? kMsg : kMsg + 1;
  ssize_t ignored = ::write(STDERR_FILENO, m, std::strlen(m));
  (void)ignored;
  ::_exit(128 + sig);
}

// Registers the temporary file for the handler for as long as it may exist. The path is set
// before the file is created and cleared after it is renamed or removed, so that a signal at any
// moment finds either no file or the registered one (unlinking a name that is gone is harmless).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& tmp) {
    if (tmp.size() >= sizeof(g_tmp_path)) return;  // open() fails on such a name anyway
    std::memcpy(g_tmp_path, tmp.c_str(), tmp.size() + 1);
    g_tmp_active = 1;
  }
  ~TempFileGuard() { g_tmp_active = 0; }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
};

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& path, int err, const std::string& tmp = "") {
  if (!tmp.empty()) ::unlink(tmp.c_str());
  throw_runtime(fmt::format("cannot write {}: {}", path, std::strerror(err)));
}

// How a path is written: Replace a regular file (temporary file + rename), write Direct into a
// device or FIFO, or into one of our own Stream fds (stdout, stderr) when the path reaches the
// file they are open on: truncating or replacing that would lose what was already printed.
enum class Kind { Replace, Direct, Stream };
struct Target {
  Kind kind;
  std::string path;  // for Replace: the file the links reach, so that the links stay
  int fd = -1;       // for Stream
};

bool same_file(const struct stat& st, int fd) {
  struct stat other {};
  return ::fstat(fd, &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino;
}

// The name a chain of symlinks ends in when that name does not exist yet (a dangling link): a
// shell's `>` creates it there, and so do we.
std::string follow_dangling(const std::string& path) {
  std::string cur = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(cur.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(cur.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) return cur;
    const std::string link(buf, static_cast<size_t>(n));
    cur = link[0] == '/' ? link : parent_dir(cur) + "/" + link;
  }
  return cur;  // a loop: creating the name then fails with ELOOP, which is reported
}

Target resolve(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    for (int fd : {STDOUT_FILENO, STDERR_FILENO})
      if (same_file(st, fd)) return {Kind::Stream, path, fd};
    if (!S_ISREG(st.st_mode)) return {Kind::Direct, path};
    char real[PATH_MAX];
    if (::realpath(path.c_str(), real)) return {Kind::Replace, real};
    return {Kind::Replace, path};
  }
  return {Kind::Replace, follow_dangling(path)};
}

// Writes everything, retrying short writes and EINTR; returns 0 or the errno.
int write_all(int fd, const std::string& content) {
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

void write_into(const std::string& path, int fd, const std::string& content) {
  if (const int err = write_all(fd, content)) fail(path, err);
}

void write_direct(const std::string& path, const std::string& content) {
  // No O_CREAT and no O_TRUNC: the file exists and is not a regular file.
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail(path, errno);
  const int err = write_all(fd, content);
  ::close(fd);
  if (err) fail(path, err);
}

void write_replace(const std::string& shown, const std::string& path, const std::string& content,
                   const std::function<void()>& before_rename) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  TempFileGuard guard(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  // Nothing was created when open fails, so there is no temporary file to remove.
  if (fd < 0) fail(shown, errno);
  // The replacement keeps the old file's permission bits, as a shell's `>` would.
  struct stat old {};
  if (::stat(path.c_str(), &old) == 0) (void)::fchmod(fd, old.st_mode & 07777);
  if (const int err = write_all(fd, content)) {
    ::close(fd);
    fail(shown, err, tmp);
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail(shown, err, tmp);
  }
  if (::close(fd) != 0) fail(shown, errno, tmp);
  if (before_rename) before_rename();
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(shown, errno, tmp);

  // Make the rename itself durable; best effort, the file is complete either way.
  const int dfd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// What identifies the file a path reaches: device and inode when it exists, else the absolute,
// link-free name it will be created under.
std::string file_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return fmt::format("inode {}:{}", st.st_dev, st.st_ino);
  std::error_code ec;
  const auto abs = std::filesystem::absolute(follow_dangling(path), ec);
  const auto canon = std::filesystem::weakly_canonical(abs, ec);
  return "name " + (ec ? abs.lexically_normal().string() : canon.string());
}

bool is_special(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

}  // namespace

namespace detail {

void write_output(const std::string& path, const std::string& content,
                  const std::function<void()>& before_rename) {
  if (path.empty()) throw_runtime("cannot write an empty path");
  const Target t = resolve(path);
  switch (t.kind) {
    case Kind::Stream:
      // What we printed to the stream so far goes first.
      std::cout.flush();
      std::cerr.flush();
      std::fflush(nullptr);
      return write_into(path, t.fd, content);
    case Kind::Direct:
      return write_direct(path, content);
    case Kind::Replace:
      return write_replace(path, t.path, content, before_rename);
  }
}

}  // namespace detail

void write_output(const std::string& path, const std::string& content) {
  detail::write_output(path, content, nullptr);
}

void check_writable(const std::string& path, const std::string& option) {
  const std::string what = option.empty() ? path : fmt::format("{} {}", option, path);
  if (path.empty())
    throw_bad_input(fmt::format("{}: empty path", option.empty() ? "output" : option));
  if (path.back() == '/') throw_bad_input(fmt::format("{}: is a directory, expected a file", what));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw_bad_input(fmt::format("{}: is a directory, expected a file", what));
  const Target t = resolve(path);
  if (t.kind == Kind::Stream) return;
  if (t.kind == Kind::Direct) {
    // A device or FIFO is written into, so its own permission is what counts.
    if (::access(path.c_str(), W_OK) != 0)
      throw_bad_input(fmt::format("{}: not writable: {}", what, std::strerror(errno)));
    return;
  }
  const std::string dir = parent_dir(t.path);
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
}

void check_outputs(const std::vector<OutputArg>& outputs, const std::vector<std::string>& inputs) {
  for (const OutputArg& o : outputs) {
    // Not a file named "-", and not stdout, where the table goes.
    if (o.path == "-")
      throw_bad_input(fmt::format(
          "{} -: '-' is not taken for stdout (the table is written there); give a file, or "
          "/dev/stdout to mix them",
          o.option));
    if (!o.path.empty()) check_writable(o.path, o.option);
  }

  std::map<std::string, const std::string*> input_keys;
  for (const std::string& in : inputs) input_keys.emplace(file_key(in), &in);
  std::map<std::string, const OutputArg*> seen;
  for (const OutputArg& o : outputs) {
    if (o.path.empty()) continue;
    const std::string key = file_key(o.path);
    if (const auto in = input_keys.find(key); in != input_keys.end())
      throw_bad_input(fmt::format("{} {}: is the input {}; refusing to overwrite it", o.option,
                                  o.path, *in->second));
    // Writing twice into a device or FIFO loses nothing; a regular file would keep one output.
    if (is_special(o.path)) continue;
    const auto [it, fresh] = seen.emplace(key, &o);
    if (!fresh)
      throw_bad_input(fmt::format("{} {}: the same file as {} {}; give each output its own path",
                                  o.option, o.path, it->second->option, it->second->path));
  }
}

void install_interrupt_handlers() {
  g_stderr_tty = ::isatty(STDERR_FILENO) ? 1 : 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    // A signal ignored when we started (nohup, a background job) stays ignored.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace mpbench
