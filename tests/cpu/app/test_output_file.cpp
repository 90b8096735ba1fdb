// Output files: regular files replaced whole (never partial, never a temporary left behind, even
// when interrupted), devices and FIFOs written into, symlinks written through, outputs that
// collide with each other or with an input refused.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "app/output_file.h"
#include "kernels/error.h"

namespace mpbench {
namespace {

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mpbench_output_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    chmod(dir_.c_str(), 0700);
    for (const std::string& f : files()) std::remove((dir_ + "/" + f).c_str());
    rmdir(dir_.c_str());
  }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
      }
      closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static mode_t mode_of(const std::string& path, bool follow = true) {
    struct stat st {};
    EXPECT_EQ(follow ? stat(path.c_str(), &st) : lstat(path.c_str(), &st), 0) << path;
    return st.st_mode;
  }
  std::string dir_;
};

TEST_F(OutputFile, ReplacesARegularFileAndLeavesNoTempFile) {
  const std::string path = dir_ + "/r.json";
  write_output(path, "first");
  write_output(path, std::string(1 << 20, 'x') + "end");
  EXPECT_EQ(read(path), std::string(1 << 20, 'x') + "end");
  EXPECT_EQ(files(), std::vector<std::string>{"r.json"});
  write_output(path, "");
  EXPECT_EQ(read(path), "");
}

TEST_F(OutputFile, KeepsTheReplacedFilesPermissions) {
  const std::string path = dir_ + "/r.json";
  write_output(path, "old");
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  write_output(path, "new");
  EXPECT_EQ(mode_of(path) & 0777, 0640u);
}

// Replaced by root, another user's file stays theirs (a shell's `>` keeps the owner too).
TEST_F(OutputFile, KeepsTheReplacedFilesOwnerWhereItMay) {
  if (geteuid() != 0) GTEST_SKIP() << "only root may give a file away";
  const std::string path = dir_ + "/r.json";
  write_output(path, "old");
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  write_output(path, "new");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_gid, 65534u);
}

// check_writable's answer for `path` in a child running as the unprivileged user 65534 (nobody):
// "" when it takes the path, else its message.
std::string check_as_nobody(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string msg;
    if (setgid(65534) != 0 || setuid(65534) != 0) {
      msg = "setuid failed";
    } else {
      try {
        check_writable(path, "--json");
      } catch (const Error& e) {
        msg = e.what();
      }
    }
    ssize_t ignored = write(fds[1], msg.data(), msg.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) msg.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return msg;
}

// Refused before any work, where the write after the run would replace what the user may not
// (a write-protected file: a shell's `>` refuses it, rename did not) or fail (another user's
// file in a sticky directory such as /tmp: only its owner may rename over it; the run trained
// for its whole length, then exit 3). The user's own files in either are taken.
TEST_F(OutputFile, AFileTheUserMayNotReplaceIsRefusedUpFront) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to act as another user";
  ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
  const std::string open_dir = dir_ + "/open", sticky = dir_ + "/sticky";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);  // whatever the umask
  ASSERT_EQ(mkdir(sticky.c_str(), 0777), 0);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);
  auto file = [](const std::string& path, mode_t mode, uid_t uid) {
    write_output(path, "precious");
    EXPECT_EQ(chmod(path.c_str(), mode), 0);
    EXPECT_EQ(chown(path.c_str(), uid, uid), 0);
  };
  file(open_dir + "/protected.json", 0444, 0);
  file(open_dir + "/own.json", 0644, 65534);
  file(sticky + "/shared.json", 0666, 0);
  file(sticky + "/own.json", 0644, 65534);

  EXPECT_TRUE(contains(check_as_nobody(open_dir + "/protected.json"),
                       "protected.json: not writable (Permission denied); refusing to replace it"))
      << check_as_nobody(open_dir + "/protected.json");
  EXPECT_TRUE(contains(check_as_nobody(sticky + "/shared.json"),
                       "another user's file in the sticky directory"))
      << check_as_nobody(sticky + "/shared.json");
  EXPECT_EQ(check_as_nobody(open_dir + "/own.json"), "");
  EXPECT_EQ(check_as_nobody(sticky + "/own.json"), "");
  EXPECT_EQ(check_as_nobody(sticky + "/new.json"), "");
  EXPECT_EQ(read(open_dir + "/protected.json"), "precious");
  EXPECT_EQ(read(sticky + "/shared.json"), "precious");

  for (const std::string& d : {open_dir, sticky}) std::filesystem::remove_all(d);
}

TEST_F(OutputFile, IntoAMissingDirectoryFailsCleanly) {
  const std::string path = dir_ + "/missing/r.json";
  try {
    write_output(path, "data");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 3);
    EXPECT_TRUE(contains(e.what(), "cannot write " + path)) << e.what();
    EXPECT_TRUE(contains(e.what(), "No such file or directory")) << e.what();
  }
  EXPECT_TRUE(files().empty());
}

// The device is written into, not renamed over: as root, the old writer replaced /dev/null
// with a regular file.
TEST_F(OutputFile, DevNullStaysADevice) {
  write_output("/dev/null", "{\"a\": 1}\n");
  EXPECT_TRUE(S_ISCHR(mode_of("/dev/null")));
  EXPECT_NO_THROW(check_writable("/dev/null", "--json"));
}

TEST_F(OutputFile, AFifoIsWrittenIntoAndStaysAFifo) {
  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read(fifo); });
  write_output(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
  EXPECT_EQ(files(), std::vector<std::string>{"pipe"});
}

// A FIFO nobody reads: the write waits a while for a reader (one that comes late is served),
// then fails (exit 3) instead of blocking for good.
TEST_F(OutputFile, AFifoWithoutAReaderFailsInsteadOfHanging) {
  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    got = read(fifo);
  });
  write_output(fifo, "late reader");
  late.join();
  EXPECT_EQ(got, "late reader");

  const auto start = std::chrono::steady_clock::now();
  try {
    write_output(fifo, "nobody");
    ADD_FAILURE() << "wrote into a FIFO nobody reads";
  } catch (const mpbench::Error& e) {
    EXPECT_EQ(e.exit_code(), 3);
    EXPECT_NE(std::string(e.what()).find("no process opened for reading"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
}

TEST_F(OutputFile, ASymlinkIsWrittenThroughAndStaysALink) {
  const std::string target = dir_ + "/target.json", link = dir_ + "/link.json";
  write_output(target, "old");
  ASSERT_EQ(symlink("target.json", link.c_str()), 0);  // relative, as people make them
  check_writable(link, "--json");
  write_output(link, "new");
  EXPECT_TRUE(S_ISLNK(mode_of(link, false)));
  EXPECT_EQ(read(target), "new");
  EXPECT_EQ(files(), (std::vector<std::string>{"link.json", "target.json"}));

  // A dangling link: the shell's `>` creates its target, and so do we.
  const std::string dangling = dir_ + "/dangling.json";
  ASSERT_EQ(symlink("created.json", dangling.c_str()), 0);
  check_writable(dangling, "--json");
  write_output(dangling, "made");
  EXPECT_TRUE(S_ISLNK(mode_of(dangling, false)));
  EXPECT_EQ(read(dir_ + "/created.json"), "made");
}

// A child process writes with SIGINT or SIGTERM arriving when the temporary file is complete and
// not yet renamed; it must exit 128 + signal, say so in one line, and leave no file behind (and
// the old file, when there was one, as it was).
struct Interrupted {
  int status = 0;
  std::string err;
};
Interrupted interrupt_write(const std::string& path, int sig, const std::string& err_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, STDERR_FILENO);
    install_interrupt_handlers();
    try {
      detail::write_output(path, std::string(1 << 16, 'y'), [sig] { raise(sig); });
    } catch (...) {
    }
    _exit(0);  // not reached when the handler works
  }
  Interrupted r;
  waitpid(pid, &r.status, 0);
  std::ifstream in(err_path);
  std::getline(in, r.err, '\0');
  std::remove(err_path.c_str());
  return r;
}

TEST_F(OutputFile, InterruptedWriteLeavesNothingBehind) {
  for (const auto& [sig, code] : {std::pair{SIGINT, 130}, std::pair{SIGTERM, 143}}) {
    const std::string path = dir_ + "/r.json";
    const Interrupted r =
        interrupt_write(path, sig, "/tmp/mpbench_interrupt_err_" + std::to_string(getpid()));
    ASSERT_TRUE(WIFEXITED(r.status)) << "signal " << sig;
    EXPECT_EQ(WEXITSTATUS(r.status), code);
    EXPECT_EQ(r.err, "mpbench: interrupted\n");
    EXPECT_TRUE(files().empty()) << files().front();

    write_output(path, "old");
    const Interrupted again =
        interrupt_write(path, sig, "/tmp/mpbench_interrupt_err_" + std::to_string(getpid()));
    EXPECT_EQ(WEXITSTATUS(again.status), code);
    EXPECT_EQ(read(path), "old");
    EXPECT_EQ(files(), std::vector<std::string>{"r.json"});
    std::remove(path.c_str());
  }
}

// A failure between the complete temporary file and its rename (an exception, not a signal):
// the old file stays as it was and the temporary goes with the failure.
TEST_F(OutputFile, AFailureBeforeTheRenameLeavesNoTempFile) {
  const std::string path = dir_ + "/r.json";
  write_output(path, "old");
  EXPECT_THROW(detail::write_output(path, "new", [] { throw std::runtime_error("disk gone"); }),
               std::runtime_error);
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(files(), std::vector<std::string>{"r.json"});
}

// A signal ignored when the process started (nohup, a shell's `trap '' HUP`) stays ignored: the
// interrupt handlers are not put in its place.
TEST_F(OutputFile, ASignalIgnoredAtTheStartStaysIgnored) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO);
    signal(SIGHUP, SIG_IGN);
    install_interrupt_handlers();
    raise(SIGHUP);
    _exit(7);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

TEST_F(OutputFile, CheckWritable) {
  EXPECT_NO_THROW(check_writable(dir_ + "/r.json"));
  write_output(dir_ + "/r.json", "old");
  EXPECT_NO_THROW(check_writable(dir_ + "/r.json"));  // replacing an existing file is fine

  try {
    check_writable(dir_ + "/nope/r.json", "--json");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_EQ(std::string(e.what()),
              "--json " + dir_ + "/nope/r.json: directory " + dir_ + "/nope does not exist");
  }
  try {
    check_writable(dir_ + "/r.json/x.csv");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_TRUE(contains(e.what(), "not a directory") || contains(e.what(), "does not exist"))
        << e.what();
  }
  EXPECT_THROW(check_writable(dir_), Error);  // a directory, not a file
  // A trailing '/' names a directory whatever is there: not told as "is a directory".
  for (const std::string& slashed : {dir_ + "/new.json/", dir_ + "/r.json/"}) {
    try {
      check_writable(slashed, "--json");
      ADD_FAILURE() << "expected an Error: " << slashed;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "--json " + slashed + ": ends in '/', a directory's name; expected a file");
    }
  }
  EXPECT_THROW(check_writable(""), Error);
  EXPECT_NO_THROW(check_writable("relative_name.json"));  // the current directory

  if (geteuid() != 0) {  // root writes anywhere
    chmod(dir_.c_str(), 0500);
    try {
      check_writable(dir_ + "/r2.json");
      ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "not writable")) << e.what();
    }
    chmod(dir_.c_str(), 0700);
  }
}

std::string refusal(const std::vector<OutputArg>& outputs, const std::vector<std::string>& inputs) {
  try {
    check_outputs(outputs, inputs);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  return "";
}

TEST_F(OutputFile, CollidingOutputsAndInputsAreRefused) {
  const std::string a = dir_ + "/a.json", b = dir_ + "/b.csv", link = dir_ + "/l.json";
  write_output(a, "{}");
  EXPECT_EQ(refusal({{"--json", a}, {"--csv", b}, {"--md", ""}}, {}), "");
  EXPECT_EQ(refusal({{"--json", b}, {"--csv", b}}, {}),
            "--csv " + b + ": the same file as --json " + b + "; give each output its own path");
  // The same file by another name: a link, or a path with a detour.
  ASSERT_EQ(symlink("a.json", link.c_str()), 0);
  EXPECT_TRUE(contains(refusal({{"--json", a}, {"--md", link}}, {}), "the same file"));
  EXPECT_TRUE(contains(refusal({{"--json", b}, {"--md", dir_ + "/./b.csv"}}, {}), "the same file"));
  // An output that is an input.
  EXPECT_EQ(refusal({{"--html", a}}, {a}),
            "--html " + a + ": is the input " + a + "; refusing to overwrite it");
  EXPECT_TRUE(contains(refusal({{"--html", link}}, {a}), "is the input"));
  // A hard link is the same file under a name no path rule tells apart: its inode does.
  const std::string hard = dir_ + "/hard.json";
  ASSERT_EQ(::link(a.c_str(), hard.c_str()), 0);
  EXPECT_TRUE(contains(refusal({{"--html", hard}}, {a}), "is the input"));
  EXPECT_TRUE(contains(refusal({{"--json", a}, {"--md", hard}}, {}), "the same file"));
  // A device may take several outputs.
  EXPECT_EQ(refusal({{"--json", "/dev/null"}, {"--csv", "/dev/null"}}, {}), "");
  EXPECT_EQ(read(a), "{}");
}

// A loop of links is refused (ELOOP, as the shell's `>`), up front and by the write itself; the
// links stay links. Renaming over the name used to replace a link with a regular file.
TEST_F(OutputFile, ASymlinkLoopIsRefusedAndStaysALoop) {
  const std::string self = dir_ + "/l", a = dir_ + "/a", b = dir_ + "/b";
  ASSERT_EQ(symlink("l", self.c_str()), 0);
  ASSERT_EQ(symlink("b", a.c_str()), 0);  // a -> b -> a
  ASSERT_EQ(symlink("a", b.c_str()), 0);
  for (const std::string& path : {self, a, b}) {
    try {
      check_writable(path, "--md");
      ADD_FAILURE() << "expected an Error for " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_EQ(std::string(e.what()), "--md " + path + ": " + std::strerror(ELOOP));
    }
    try {
      write_output(path, "table");
      ADD_FAILURE() << "expected an Error for " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 3);
      EXPECT_TRUE(contains(e.what(), std::strerror(ELOOP))) << e.what();
    }
    EXPECT_TRUE(S_ISLNK(mode_of(path, false))) << path;
  }
  char buf[8] = {};
  ASSERT_EQ(readlink(a.c_str(), buf, sizeof(buf) - 1), 1);
  EXPECT_STREQ(buf, "b");
  EXPECT_EQ(files(), (std::vector<std::string>{"a", "b", "l"}));
}

std::string bad_input(const std::string& path, const std::string& option = "--json") {
  try {
    check_writable(path, option);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  return "";
}

// Paths that stat and access let through but the final write would fail on: each is refused
// by the up-front check, and the check leaves nothing behind.
TEST_F(OutputFile, CheckWritableTriesWhatTheWriteWillDo) {
  // 250 bytes: a legal name, but not with ".tmp.PID" after it.
  const std::string long_name = dir_ + "/" + std::string(246, 'n') + ".csv";
  const std::string why = bad_input(long_name);
  EXPECT_TRUE(contains(why, "name too long")) << why;
  EXPECT_THROW(write_output(long_name, "x"), Error);
  EXPECT_NO_THROW(check_writable(dir_ + "/" + std::string(230, 'n') + ".csv"));
  // Longer than any name: stat itself fails.
  EXPECT_TRUE(contains(bad_input(dir_ + "/" + std::string(300, 'n')), std::strerror(ENAMETOOLONG)));

  // A UNIX socket takes no write.
  const std::string sock = dir_ + "/s.sock";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  std::strcpy(addr.sun_path, sock.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(bad_input(sock),
            "--json " + sock + ": is a socket, expected a file, a device or a FIFO");
  close(fd);

  // Pseudo filesystems pass access() (as root) and take no new file.
  // (Not root: refused as not writable, before the probe.)
  EXPECT_TRUE(contains(bad_input("/proc/self/x.json"), "/proc/self"))
      << bad_input("/proc/self/x.json");
  EXPECT_NE(bad_input("/proc/self/comm"), "");  // an existing /proc file is not replaced either
  if (access("/sys", F_OK) == 0) {
    EXPECT_NE(bad_input("/sys/x.json"), "");
  }

  // Something already named like our temporary file is not ours to truncate.
  const std::string taken = dir_ + "/t.json";
  std::ofstream(taken + ".tmp." + std::to_string(getpid())) << "not ours";
  EXPECT_TRUE(contains(bad_input(taken), "is in the way of its temporary file"))
      << bad_input(taken);
  EXPECT_THROW(write_output(taken, "x"), Error);
  EXPECT_EQ(read(taken + ".tmp." + std::to_string(getpid())), "not ours");
  std::remove((taken + ".tmp." + std::to_string(getpid())).c_str());

  EXPECT_EQ(files(), std::vector<std::string>{"s.sock"});  // the probes left nothing
}

// A relative name in a working directory that was removed: stat(".") works, creating does not.
// In a child, since the working directory is the process's.
TEST_F(OutputFile, ARemovedWorkingDirectoryIsRefused) {
  const std::string gone = dir_ + "/gone";
  ASSERT_EQ(mkdir(gone.c_str(), 0700), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(gone.c_str()) != 0 || rmdir(gone.c_str()) != 0) _exit(10);
    try {
      check_writable("x.json", "--json");
      _exit(11);
    } catch (const Error& e) {
      _exit(std::string(e.what()) == "--json x.json: the current directory no longer exists" ? 0
                                                                                             : 12);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// write_output_set (`mpbench data`): killed at every stage, with SIGKILL (no cleanup at all), a
// reader who goes by the index finds the old set complete, no index, or the new set complete.
class OutputSet : public OutputFile {
 protected:
  std::vector<std::string> names() const {
    return {dir_ + "/d.x.f32", dir_ + "/d.y.i32", dir_ + "/d.ex.f32"};
  }
  std::string index() const { return dir_ + "/d.json"; }
  // The whole set, `tag` in the index and in every file.
  void write_set(const std::string& tag, const std::function<void(const std::string&)>& at) {
    std::vector<std::string> contents;
    for (const std::string& n : names()) contents.push_back(tag + " " + n);
    std::vector<FileBytes> files;
    for (size_t i = 0; i < names().size(); ++i) files.push_back({names()[i], contents[i]});
    detail::write_output_set(files, {index(), tag}, at);
  }
  // What a reader gets: "" (no index) or the index's tag, after checking every file is of it.
  std::string reader_sees() const {
    if (access(index().c_str(), F_OK) != 0) return "";
    const std::string tag = read(index());
    for (const std::string& n : names()) EXPECT_EQ(read(n), tag + " " + n) << "mixed set";
    return tag;
  }
  // Runs write_set("new") in a child that `sig` stops at its `stop`th stage; the stages seen.
  int run_until(int stop, int sig) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int null = open("/dev/null", O_WRONLY);  // not the handler's "mpbench: interrupted"
      dup2(null, STDERR_FILENO);
      install_interrupt_handlers();
      int n = 0;
      try {
        write_set("new", [&](const std::string&) {
          if (n++ == stop) raise(sig);
        });
      } catch (...) {
        _exit(1);
      }
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  }
};

TEST_F(OutputSet, AllOrNothingForAReaderAtEveryStage) {
  std::vector<std::string> stages;
  write_set("old", [&](const std::string& s) { stages.push_back(s); });
  // Three files staged, the old index removed, three renamed, the index staged.
  ASSERT_EQ(stages.size(), 8u);
  EXPECT_EQ(stages[3], "old index removed");
  EXPECT_EQ(reader_sees(), "old");
  for (int sig : {SIGKILL, SIGTERM}) {
    for (int stop = 0; stop < static_cast<int>(stages.size()); ++stop) {
      write_output_set({{names()[0], "old " + names()[0]},
                        {names()[1], "old " + names()[1]},
                        {names()[2], "old " + names()[2]}},
                       {index(), "old"});
      const int status = run_until(stop, sig);
      ASSERT_TRUE(WIFSIGNALED(status) || WIFEXITED(status));
      const std::string seen = reader_sees();
      SCOPED_TRACE("signal " + std::to_string(sig) + " at " + stages[stop]);
      // Before the old index goes, the old set is intact; after, there is no index until the
      // new one is complete.
      EXPECT_EQ(seen, stop < 3 ? "old" : "");
      if (sig == SIGTERM) {
        EXPECT_EQ(WEXITSTATUS(status), 143);
        for (const std::string& f : files())
          EXPECT_FALSE(contains(f, ".tmp.")) << f << " left behind";
      }
      for (const std::string& f : files())
        if (contains(f, ".tmp.")) std::remove((dir_ + "/" + f).c_str());
    }
  }
  write_set("new", nullptr);
  EXPECT_EQ(reader_sees(), "new");
  EXPECT_EQ(files(), (std::vector<std::string>{"d.ex.f32", "d.json", "d.x.f32", "d.y.i32"}));
}

// The index goes before the files it names are replaced; its replacement still keeps its
// permissions (a private set stayed 0600, its index became 0644) and, as root, its owner.
TEST_F(OutputSet, KeepsEveryFilesPermissionsIndexIncluded) {
  write_set("old", nullptr);
  for (const std::string& f : names()) ASSERT_EQ(chmod(f.c_str(), 0600), 0);
  ASSERT_EQ(chmod(index().c_str(), 0600), 0);
  const bool root = geteuid() == 0;
  if (root) ASSERT_EQ(chown(index().c_str(), 65534, 65534), 0);
  write_set("new", nullptr);
  EXPECT_EQ(reader_sees(), "new");
  EXPECT_EQ(mode_of(index()) & 0777, 0600u);
  for (const std::string& f : names()) EXPECT_EQ(mode_of(f) & 0777, 0600u) << f;
  struct stat st {};
  ASSERT_EQ(stat(index().c_str(), &st), 0);
  if (root) EXPECT_EQ(st.st_uid, 65534u);
}

}  // namespace
}  // namespace mpbench
