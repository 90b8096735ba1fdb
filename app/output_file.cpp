#include "app/output_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "app/progress.h"  // stderr_is_tty
#include "kernels/error.h"

namespace mpbench {

namespace {

// The temporary files of the writes in progress, for the signal handler: several at once while
// a set of files (`mpbench data`'s arrays) waits to be renamed together. Fixed buffers and
// sig_atomic_t flags, since a handler may only touch those and call async-signal-safe functions.
constexpr int kTempSlots = 16;
char g_tmp_path[kTempSlots][PATH_MAX + 32];
volatile sig_atomic_t g_tmp_active[kTempSlots] = {};
volatile sig_atomic_t g_stderr_tty = 0;

// Standard descriptors that were closed when we started and now hold /dev/null so that no file we
// open takes their number (the table would go into it); fd 1 is opened read-only, so that writing
// the table fails as it would on the closed descriptor.
bool g_std_placeholder[3] = {false, false, false};
// The first error writing stdout, for the one line that says so at the end.
int g_stdout_errno = 0;
// Set on data-parallel ranks but 0: the job's one "interrupted" line is rank 0's.
volatile sig_atomic_t g_interrupt_quiet = 0;
// Under an MPI launcher, its pid (our parent's): its signals end the job for another rank.
volatile sig_atomic_t g_launcher_pid = 0;

// The thread that installed the handler (main's): the one the handler runs on.
pthread_t g_main_thread;
// A signal from the launcher, forwarded to the main thread (where si_pid no longer says so).
volatile sig_atomic_t g_forwarded_from_launcher = 0;
// The InterruptMode set; a first SIGINT since a graceful one has asked the work to stop.
volatile sig_atomic_t g_interrupt_mode = 0;
volatile sig_atomic_t g_stop_requested = 0;

extern "C" void on_interrupt(int sig, siginfo_t* info, void*) {
  const bool from_launcher =
      g_forwarded_from_launcher || (g_launcher_pid != 0 && info && info->si_code == SI_USER &&
                                    info->si_pid == static_cast<pid_t>(g_launcher_pid));
  // A signal to the process may land on any thread (OpenMP's, OpenBLAS's): the main thread might
  // then register and create a temporary file after the loop below had passed its slot, and
  // leave it. On the main thread itself nothing else creates one meanwhile.
  if (!pthread_equal(pthread_self(), g_main_thread)) {
    if (from_launcher) g_forwarded_from_launcher = 1;
    pthread_kill(g_main_thread, sig);
    return;
  }
  // On a terminal a progress bar may be drawn on the line: erase it (an empty line stays empty).
  const auto say = [](const char* msg) {  // msg starts with the erase sequence (4 bytes)
    const char* m = g_stderr_tty ? msg : msg + 4;
    ssize_t ignored = ::write(STDERR_FILENO, m, std::strlen(m));
    (void)ignored;
  };
  if (sig == SIGINT && g_interrupt_mode != 0 && !g_stop_requested && !from_launcher) {
    g_stop_requested = 1;
    say(g_interrupt_mode == 1
            ? "\r\x1b[Kmpbench: interrupted: stopping after this step to show the finished "
              "runs (Ctrl-C again quits at once)\n"
            : "\r\x1b[Kmpbench: interrupted: finishing the files being written (Ctrl-C again "
              "quits at once)\n");
    return;
  }
  for (int i = 0; i < kTempSlots; ++i)
    if (g_tmp_active[i]) ::unlink(g_tmp_path[i]);
  if (!g_interrupt_quiet && !from_launcher) say("\r\x1b[Kmpbench: interrupted\n");
  ::_exit(128 + sig);
}

// Registers a temporary file for the handler for as long as it may exist. The path is set
// before the file is created and cleared after it is renamed or removed, so that a signal at any
// moment finds either no file or the registered one (unlinking a name that is gone is harmless).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& tmp) {
    if (tmp.size() >= sizeof(g_tmp_path[0])) return;  // open() fails on such a name anyway
    for (int i = 0; i < kTempSlots; ++i) {
      if (g_tmp_active[i]) continue;
      std::memcpy(g_tmp_path[i], tmp.c_str(), tmp.size() + 1);
      g_tmp_active[i] = 1;
      slot_ = i;
      return;
    }
  }
  ~TempFileGuard() { release(); }
  void release() {
    if (slot_ >= 0) g_tmp_active[slot_] = 0;
    slot_ = -1;
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int slot_ = -1;
};

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string temp_name(const std::string& path) {
  return fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
}

[[noreturn]] void fail(const std::string& path, int err, const std::string& tmp = "") {
  if (!tmp.empty()) ::unlink(tmp.c_str());
  throw_runtime(fmt::format("cannot write {}: {}", path, std::strerror(err)));
}

// How a path is written: Replace a regular file (temporary file + rename), write Direct into a
// device or FIFO, or into one of our own Stream fds (stdout, stderr) when the path reaches the
// file they are open on: truncating or replacing that would lose what was already printed.
// Unreachable: the name cannot be resolved (a loop of links, a name too long); `err` says why.
enum class Kind { Replace, Direct, Stream, Unreachable };
struct Target {
  Kind kind;
  std::string path;  // for Replace: the file the links reach, so that the links stay
  int fd = -1;       // for Stream
  int err = 0;       // for Unreachable
};

bool same_file(const struct stat& st, int fd) {
  // A descriptor open read-only (the /dev/null put on a closed stdout) takes no output.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) return false;
  struct stat other {};
  return ::fstat(fd, &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino;
}

// The name a chain of symlinks ends in when that name does not exist yet (a dangling link): a
// shell's `>` creates it there, and so do we. Only called when stat said ENOENT, so the chain
// has no loop; the hop limit is the kernel's.
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
  return cur;
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
  // A name that does not exist yet, or a dangling link, is created. Any other reason is one the
  // shell's `>` fails on too: a loop of links (ELOOP; renaming over the name would replace the
  // link with a regular file), a name too long, a directory we may not search.
  if (errno != ENOENT && errno != ENOTDIR) return {Kind::Unreachable, path, -1, errno};
  return {Kind::Replace, follow_dangling(path)};
}

// Writes everything, retrying short writes and EINTR; returns 0 or the errno.
int write_all(int fd, std::string_view content) {
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

void write_into(const std::string& path, int fd, std::string_view content) {
  if (const int err = write_all(fd, content)) fail(path, err);
}

// How long a write waits for a process to open a FIFO for reading: opening one that nobody reads
// would block for good (check_writable cannot ask earlier: a probe's close would end the stream
// for a reader that is there).
constexpr int kFifoReaderWaitMs = 10000;

// No O_CREAT and no O_TRUNC: the file exists and is not a regular file. -1 with errno on failure.
int open_direct(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode))
    return ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kFifoReaderWaitMs);
  for (;;) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
      // A reader is there: write as into any FIFO, waiting while it catches up.
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags != -1 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0) return fd;
      const int err = errno;
      ::close(fd);
      errno = err;
      return -1;
    }
    if (errno != ENXIO) return -1;  // ENXIO: no reader yet
    if (std::chrono::steady_clock::now() >= deadline)
      throw_runtime(
          fmt::format("cannot write {}: a FIFO that no process opened for reading in {} s", path,
                      kFifoReaderWaitMs / 1000));
    ::usleep(50 * 1000);
  }
}

void write_direct(const std::string& path, std::string_view content) {
  const int fd = open_direct(path);
  if (fd < 0) fail(path, errno);
  const int err = write_all(fd, content);
  ::close(fd);
  if (err) fail(path, err);
}

// Makes renames in a directory durable; best effort, the files are complete either way.
void sync_dir(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// A regular file's new content, complete and fsynced under its temporary name, waiting to be
// renamed over `path`. Until it is, the temporary file is registered for the signal handler
// and removed when this goes away (a failure elsewhere).
class Staged {
 public:
  // `old`: the file this one replaces, when it is no longer at `path` (a set's index, removed
  // before its files are replaced); by default whatever is at `path` now.
  Staged(std::string shown, std::string path, std::string_view content,
         std::optional<struct stat> old = std::nullopt)
      : shown_(std::move(shown)), path_(std::move(path)), tmp_(temp_name(path_)), guard_(tmp_) {
    // O_EXCL: a file of that name is not ours to truncate (check_writable refused it already).
    const int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    // Nothing was created when open fails, so there is no temporary file to remove.
    if (fd < 0) fail(shown_, errno);
    // The replacement keeps the old file's permission bits and, where we may give it (as root),
    // its owner, as a shell's `>` would.
    if (!old) {
      struct stat st {};
      if (::stat(path_.c_str(), &st) == 0) old = st;
    }
    if (old) {
      (void)::fchmod(fd, old->st_mode & 07777);
      if (old->st_uid != ::geteuid() || old->st_gid != ::getegid())
        (void)::fchown(fd, old->st_uid, old->st_gid);
    }
    int err = write_all(fd, content);
    // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
    if (!err && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && !err) err = errno;
    // A constructor that throws runs no destructor of its own: remove the file here.
    if (err) fail(shown_, err, tmp_);
    created_ = true;
  }
  ~Staged() {
    if (created_) ::unlink(tmp_.c_str());
  }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;

  void commit() {
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail(shown_, errno);
    created_ = false;
    guard_.release();
  }
  const std::string& path() const { return path_; }

 private:
  std::string shown_, path_, tmp_;
  TempFileGuard guard_;
  bool created_ = false;
};

void write_replace(const std::string& shown, const std::string& path, std::string_view content,
                   const std::function<void()>& before_rename,
                   std::optional<struct stat> old = std::nullopt) {
  Staged staged(shown, path, content, old);
  if (before_rename) before_rename();
  staged.commit();
  sync_dir(parent_dir(path));
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

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  return file_key(a) == file_key(b);
}

void refuse_repeated_files(const std::string& option, const std::vector<std::string>& paths) {
  std::map<std::string, const std::string*> seen;
  for (const std::string& p : paths) {
    const auto [it, fresh] = seen.emplace(file_key(p), &p);
    if (!fresh)
      throw_bad_input(fmt::format("{}: {} is given twice{}", option, p,
                                  *it->second == p ? "" : fmt::format(" (as {})", *it->second)));
  }
}

namespace {

bool is_special(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

// Creates and removes the temporary file the write will create: the one way to know before the
// run that this directory takes a new file of that name. A pseudo filesystem (/proc, /sys), a
// read-only mount, a directory removed under us or a name that `.tmp.PID` pushes past the
// filesystem's limit all pass stat and access, and fail here.
void probe_create(const std::string& what, const std::string& path) {
  const std::string tmp = temp_name(path);
  TempFileGuard guard(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return;
  }
  const int err = errno;
  const std::string dir = parent_dir(path);
  if (err == EEXIST)
    throw_bad_input(
        fmt::format("{}: {} is in the way of its temporary file; remove it", what, tmp));
  if (err == ENAMETOOLONG) {
    const size_t name = tmp.size() - (tmp.find_last_of('/') + 1);
    const long max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
    if (max > 0 && name > static_cast<size_t>(max))
      throw_bad_input(fmt::format(
          "{}: name too long: with the \".tmp.{}\" of its temporary file it is {} bytes, over "
          "the {} a name may have here",
          what, static_cast<long>(::getpid()), name, max));
  }
  throw_bad_input(fmt::format("{}: cannot create a file in {}: {}", what, dir, std::strerror(err)));
}

// write_output of a view (the sets' arrays are not copied).
void write_view(const std::string& path, std::string_view content,
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
    case Kind::Unreachable:
      fail(path, t.err);
  }
}

}  // namespace

namespace detail {

void write_output(const std::string& path, const std::string& content,
                  const std::function<void()>& before_rename) {
  write_view(path, content, before_rename);
}

void write_output_set(const std::vector<FileBytes>& files, const FileBytes& index,
                      const std::function<void(const std::string&)>& at) {
  const auto reached = [&](const std::string& stage) {
    if (at) at(stage);
  };
  // Every regular file complete under its temporary name first: a failure or an interruption
  // here leaves the old set as it was, and no temporary file.
  std::vector<std::unique_ptr<Staged>> staged;
  std::vector<const FileBytes*> direct;
  for (const FileBytes& f : files) {
    if (f.path.empty()) throw_runtime("cannot write an empty path");
    const Target t = resolve(f.path);
    if (t.kind == Kind::Unreachable) fail(f.path, t.err);
    if (t.kind == Kind::Replace)
      staged.push_back(std::make_unique<Staged>(f.path, t.path, f.bytes));
    else
      direct.push_back(&f);
    reached("staged " + f.path);
  }
  // Devices and FIFOs (written through, not staged) before the old index goes: their failure
  // (a full device) leaves the old set whole, index included.
  for (const FileBytes* f : direct) write_view(f->path, f->bytes, nullptr);
  // The old index goes before any file it names is replaced: from here until the new index is
  // renamed into place, a reader finds no index rather than the old one beside new files.
  const Target it = resolve(index.path);
  if (it.kind == Kind::Unreachable) fail(index.path, it.err);
  std::optional<struct stat> old_index;  // its permissions and owner go to the new one
  if (it.kind == Kind::Replace) {
    struct stat st {};
    if (::stat(it.path.c_str(), &st) == 0) old_index = st;
    if (::unlink(it.path.c_str()) != 0 && errno != ENOENT) fail(index.path, errno);
    sync_dir(parent_dir(it.path));
  }
  reached("old index removed");
  std::vector<std::string> dirs;
  for (auto& s : staged) {
    s->commit();
    const std::string dir = parent_dir(s->path());
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    reached("renamed " + s->path());
  }
  // The renames on disk before the index that names their files.
  for (const std::string& dir : dirs) sync_dir(dir);
  const auto index_staged = [&] { reached("index staged"); };
  if (it.kind == Kind::Replace)
    write_replace(index.path, it.path, index.bytes, index_staged, old_index);
  else
    write_view(index.path, index.bytes, index_staged);
}

}  // namespace detail

void write_output(const std::string& path, const std::string& content) {
  detail::write_output(path, content, nullptr);
}

void write_outputs(const std::vector<FileContent>& files) {
  std::exception_ptr first;
  for (const FileContent& f : files) {
    if (f.path.empty()) continue;
    try {
      write_output(f.path, f.content);
    } catch (const Error&) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void write_output_set(const std::vector<FileBytes>& files, const FileBytes& index) {
  detail::write_output_set(files, index, nullptr);
}

void check_writable(const std::string& path, const std::string& option) {
  const std::string what = option.empty() ? path : fmt::format("{} {}", option, path);
  if (path.empty())
    throw_bad_input(fmt::format("{}: empty path", option.empty() ? "output" : option));
  if (path.back() == '/')  // a directory's spelling, whether or not one is there
    throw_bad_input(fmt::format("{}: ends in '/', a directory's name; expected a file", what));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw_bad_input(fmt::format("{}: is a directory, expected a file", what));
  const Target t = resolve(path);
  if (t.kind == Kind::Unreachable)
    throw_bad_input(fmt::format("{}: {}", what, std::strerror(t.err)));
  if (t.kind == Kind::Stream) return;
  if (t.kind == Kind::Direct) {
    if (::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
      throw_bad_input(fmt::format("{}: is a socket, expected a file, a device or a FIFO", what));
    // A device or FIFO is written into, so its own permission is what counts.
    if (::access(path.c_str(), W_OK) != 0)
      throw_bad_input(fmt::format("{}: not writable: {}", what, std::strerror(errno)));
    // A character device is opened as it will be written (/dev/tty without a terminal fails
    // there, not after the work). Not a FIFO: its reader would see our close as the end.
    if (::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) throw_bad_input(fmt::format("{}: {}", what, std::strerror(errno)));
      ::close(fd);
    }
    return;
  }
  // A relative name is created in the working directory, which may have been removed since we
  // started: stat(".") still works in it, creating a file does not.
  if (t.path.front() != '/') {
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof(cwd))) {
      if (errno == ENOENT)
        throw_bad_input(fmt::format("{}: the current directory no longer exists", what));
      throw_bad_input(fmt::format("{}: the current directory: {}", what, std::strerror(errno)));
    }
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
  // directory.
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw_bad_input(fmt::format("{}: directory {} is not writable", what, dir));
  }
  struct stat dir_st = st;
  if (::stat(t.path.c_str(), &st) == 0) {
    // Rename would replace a file we may not write, which a shell's `>` refuses: its
    // protection is the owner's word.
    if (::access(t.path.c_str(), W_OK) != 0)
      throw_bad_input(
          fmt::format("{}: not writable ({}); refusing to replace it", what, std::strerror(errno)));
    // In a sticky directory (/tmp) only the file's or the directory's owner may rename over
    // it: the write would fail after the whole run.
    const uid_t me = ::geteuid();
    if ((dir_st.st_mode & S_ISVTX) && me != 0 && st.st_uid != me && dir_st.st_uid != me)
      throw_bad_input(
          fmt::format("{}: another user's file in the sticky directory {}, which "
                      "only its owner may replace; give another name",
                      what, dir));
  }
  probe_create(what, t.path);
}

void check_outputs(const std::vector<OutputArg>& outputs, const std::vector<std::string>& inputs) {
  for (const OutputArg& o : outputs) {
    // Not a file named "-", and not stdout, where the table goes.
    if (o.path == "-")
      throw_bad_input(fmt::format(
          "{} -: '-' is not taken for stdout; give a file, or /dev/stdout to write it there "
          "(after what the command prints)",
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
    // Writing twice into a device or FIFO, or into the file stdout or stderr is on (appended
    // through their descriptors), loses nothing; a regular file would keep one output.
    if (is_special(o.path) || resolve(o.path).kind == Kind::Stream) continue;
    const auto [it, fresh] = seen.emplace(key, &o);
    if (!fresh)
      throw_bad_input(fmt::format("{} {}: the same file as {} {}; give each output its own path",
                                  o.option, o.path, it->second->option, it->second->path));
  }
}

void set_interrupt_mode(InterruptMode mode) {
  g_interrupt_mode = mode == InterruptMode::AtOnce ? 0 : mode == InterruptMode::AfterStep ? 1 : 2;
}

bool interrupt_requested() {
  return g_stop_requested != 0;
}

void stop_if_interrupted() {
  if (g_stop_requested) throw Interrupted{};
}

void quiet_interrupts() {
  g_interrupt_quiet = 1;
}

void quiet_launcher_signals() {
  g_launcher_pid = static_cast<sig_atomic_t>(::getppid());
}

void install_interrupt_handlers() {
  g_main_thread = pthread_self();
  g_stderr_tty = Progress::stderr_is_tty() ? 1 : 0;  // where a bar may be on the line
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    // A signal ignored when we started (nohup, a background job) stays ignored.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_sigaction = on_interrupt;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

namespace {

// std::cout's buffer, written to fd 1 with write(2). stdio keeps neither the errno of a failed
// flush nor, in glibc, the failure itself past the next flush, and a table larger than its buffer
// fails in the middle of the printing; this keeps the first error for the line that reports it.
// Line-buffered on a terminal, as stdio is, so that `profile` shows each mode when it is done.
class StdoutBuffer : public std::streambuf {
 public:
  StdoutBuffer() : line_(::isatty(STDOUT_FILENO) == 1) { setp(buf_, buf_ + sizeof(buf_)); }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
      if (line_ && traits_type::to_char_type(ch) == '\n' && !drain()) return traits_type::eof();
    }
    return traits_type::not_eof(ch);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::streamsize done = 0;
    while (done < n) {
      if (pptr() == epptr() && !drain()) return done;
      const std::streamsize take = std::min<std::streamsize>(epptr() - pptr(), n - done);
      std::memcpy(pptr(), s + done, static_cast<size_t>(take));
      pbump(static_cast<int>(take));
      done += take;
    }
    if (line_ && std::memchr(s, '\n', static_cast<size_t>(n)) && !drain()) return 0;
    return n;
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  // Writes what is buffered; false once stdout has failed (what is left is dropped).
  bool drain() {
    const size_t n = static_cast<size_t>(pptr() - pbase());
    setp(buf_, buf_ + sizeof(buf_));
    if (g_stdout_errno != 0) return false;
    if (const int err = write_all(STDOUT_FILENO, std::string_view(buf_, n))) {
      g_stdout_errno = err;
      return false;
    }
    return true;
  }
  char buf_[1 << 14];
  bool line_;
};

}  // namespace

void prepare_standard_streams() {
  // A reader that went away (`mpbench run ... | head`) is an error on stdout to report, after the
  // files named by options are written, not a signal that kills us before them.
  ::signal(SIGPIPE, SIG_IGN);
  // So is a file past `ulimit -f`: write() fails with EFBIG, said in one line (exit 3) and the
  // temporary file removed, where the signal killed us and left it.
  ::signal(SIGXFSZ, SIG_IGN);
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // Lowest free number first, so the open lands on `fd` (those below it are open by now).
    const int got = ::open("/dev/null", (fd == STDERR_FILENO ? O_WRONLY : O_RDONLY) | O_NOCTTY);
    if (got == fd)
      g_std_placeholder[fd] = true;
    else if (got >= 0)
      ::close(got);
  }
  // Never freed: std::cout is flushed once more at exit, after every static is destroyed.
  static StdoutBuffer* buffer = new StdoutBuffer;
  std::cout.rdbuf(buffer);
}

bool flush_stdout() {
  std::cout.flush();
  const bool stdio_failed = std::fflush(stdout) != 0 || std::ferror(stdout);
  if (g_stdout_errno == 0 && !std::cout.bad() && !stdio_failed) return true;
  if (g_stdout_errno == 0) g_stdout_errno = EIO;  // stdio's, whose errno is gone
  return false;
}

int finish_stdout(int exit_code) {
  if (flush_stdout()) return exit_code;
  // Bad input, a runtime failure or an interruption has said why in its own line already.
  if (exit_code == 2 || exit_code == 3 || exit_code >= 128) return exit_code;
  const std::string why = g_std_placeholder[STDOUT_FILENO]
                              ? std::string("it is closed")
                              : std::string(std::strerror(g_stdout_errno));
  std::cerr << "mpbench: cannot write stdout: " << why << "\n" << std::flush;
  return 3;
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace mpbench
