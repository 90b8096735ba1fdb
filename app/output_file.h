#pragma once
// Every file mpbench writes goes through here, so that nothing the user owns is destroyed:
// - a regular file (or a symlink to one, or a name that does not exist yet) is written whole or
//   not at all: a run that fails half-way, or is interrupted, never leaves a truncated JSON/CSV
//   that a later `compare` or CI step would read as a result, nor a temporary file;
// - a device, a FIFO or our own stdout/stderr (`/dev/null`, `/dev/stdout`) is written into,
//   never renamed over: as root, renaming over /dev/null would replace the device;
// - a symlink is written through to its target, as a shell's `>` does; the link stays. A loop
//   of links is refused (ELOOP), as by the shell, never replaced by a regular file;
// - whatever the final write will need is tried before any work (check_writable), so that a path
//   that cannot be written is bad input (exit 2) up front, not a failure after the run.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

namespace mpbench {

// Writes `content` to `path` by the rules above. A regular target is written to
// `<target>.tmp.<pid>` in the target's directory, fsynced and renamed over it. On any failure the
// temporary file is removed and Error(Runtime) is thrown: "cannot write <path>: <strerror>".
// JSON as mpbench writes it: two-space indent and a final newline. A byte that is not UTF-8 (a
// spec named in Latin-1, echoed in provenance.command) becomes U+FFFD instead of failing the
// write after the work is done.
std::string json_text(const nlohmann::json& j);

void write_output(const std::string& path, const std::string& content);

struct FileContent {
  std::string path;  // empty: not given, skipped by write_outputs
  std::string content;
};
// write_output for each file with a path, every one attempted: one that cannot be written does
// not cost the others. Then throws the first failure, if any.
void write_outputs(const std::vector<FileContent>& files);

// Writes `files` and then `index`, a file that names them, so that a reader who goes by the index
// sees the old set complete, no index, or the new set complete, never the old index beside new
// files: each regular file is first written whole under its temporary name; then the old index
// is removed, the files are renamed into place, and the new index is written last. A failure or
// an interruption before the old index is removed leaves the old set intact (and no temporary
// file); after it, there is no index until the new set is complete.
struct FileBytes {
  std::string path;
  std::string_view bytes;  // not copied: a dataset's arrays may be large
};
void write_output_set(const std::vector<FileBytes>& files, const FileBytes& index);

// Up-front check, before minutes of training, that `path` can be written as write_output will
// write it: not empty, not a directory, not a socket, not a loop of links; its (target's)
// directory exists and is writable and really takes the temporary file (one is created and
// removed: /proc, /sys, a read-only mount, a removed working directory or a name that ".tmp.PID"
// makes too long fail here); or it is an existing device or FIFO we may write. Throws
// Error(BadInput), e.g. "--json out/r.json: directory out does not exist"; `option` ("--json")
// prefixes the message when given.
void check_writable(const std::string& path, const std::string& option = "");

// Refuses (BadInput) a file given twice among `paths` (`option`'s list), by the file the paths
// reach (`a.json` and `./a.json`, a link and its target): its runs would count twice.
void refuse_repeated_files(const std::string& option, const std::vector<std::string>& paths);
// Whether two paths reach one file, by that rule.
bool same_file(const std::string& a, const std::string& b);

struct OutputArg {
  std::string option;  // "--json"
  std::string path;    // empty: not given
};
// check_writable for every given output, then refuses (BadInput) two outputs that are one file
// (`--json X --csv X`) and an output that is also an input (`report a.json --html a.json`), by
// the file they reach (links followed). Devices and FIFOs may be named more than once.
void check_outputs(const std::vector<OutputArg>& outputs, const std::vector<std::string>& inputs);

// SIGINT, SIGTERM and SIGHUP (unless ignored when we started): remove the temporary files of the
// writes in progress, print "mpbench: interrupted" and exit 128 + the signal (130, 143, 129).
void install_interrupt_handlers();
// What a first SIGINT does (`run` without data parallelism): AfterStep, while it trains, only
// asks the work to stop, and stop_if_interrupted() throws Interrupted at the next step, so that
// the runs finished so far are still shown; AfterWriting, while it writes its files, lets the
// set be finished (interrupt_requested() says it came). A second SIGINT, SIGTERM and SIGHUP end
// the process at once as above, and so does any SIGINT under AtOnce (the default).
enum class InterruptMode { AtOnce, AfterStep, AfterWriting };
void set_interrupt_mode(InterruptMode mode);
bool interrupt_requested();
struct Interrupted {};  // not an Error: no layer that handles those may take it for a failure
void stop_if_interrupted();
// From now on the handlers print nothing (a data-parallel rank other than 0: the launcher ends
// every rank, and rank 0 says it).
void quiet_interrupts();
// Under an MPI launcher: a signal our parent (the launcher) sends is the job ending because a
// rank ended it, which has said why; the handlers then print nothing.
void quiet_launcher_signals();

// Stdout is an output like the files: a full disk (`>/dev/full`), a reader gone (`| head`, EPIPE)
// or a closed descriptor (`>&-`) is an I/O error, exit 3 with one line, reported once the files
// named by options are written. prepare_standard_streams, early in main: ignores SIGPIPE
// (a write to a gone reader fails with EPIPE instead of killing us before the files), and puts
// /dev/null on a closed fd 0, 1 or 2 (read-only for stdout, so the table still fails to be
// written) so that no file we open takes the number and receives the table or the messages.
void prepare_standard_streams();
// Flushes std::cout and stdout; false (and the error kept for finish_stdout) when stdout failed
// now or before.
bool flush_stdout();
// The exit code once stdout is flushed: `exit_code` when stdout is fine; else 3 with
// "mpbench: cannot write stdout: <why>" on stderr, unless the exit code already reports a failure
// that said why in its own line (2, 3, 128 + a signal).
int finish_stdout(int exit_code);

namespace detail {
// write_output with a hook called after the temporary file is complete and before the rename,
// so that tests can interrupt a write at its most delicate point.
void write_output(const std::string& path, const std::string& content,
                  const std::function<void()>& before_rename);
// write_output_set with a hook called at each stage ("staged <path>", "old index removed",
// "renamed <path>", "index staged"), so that tests can interrupt it at every step.
void write_output_set(const std::vector<FileBytes>& files, const FileBytes& index,
                      const std::function<void(const std::string&)>& at);
}  // namespace detail

}  // namespace mpbench
