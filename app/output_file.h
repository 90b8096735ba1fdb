#pragma once
// Every file mpbench writes goes through here, so that nothing the user owns is destroyed:
// - a regular file (or a symlink to one, or a name that does not exist yet) is written whole or
//   not at all: a run that fails half-way, or is interrupted, never leaves a truncated JSON/CSV
//   that a later `compare` or CI step would read as a result, nor a temporary file;
// - a device, a FIFO or our own stdout/stderr (`/dev/null`, `/dev/stdout`) is written into,
//   never renamed over: as root, renaming over /dev/null would replace the device;
// - a symlink is written through to its target, as a shell's `>` does; the link stays.
#include <functional>
#include <string>
#include <vector>

namespace mpbench {

// Writes `content` to `path` by the rules above. A regular target is written to
// `<target>.tmp.<pid>` in the target's directory, fsynced and renamed over it. On any failure the
// temporary file is removed and Error(Runtime) is thrown: "cannot write <path>: <strerror>".
void write_output(const std::string& path, const std::string& content);

// Up-front check, before minutes of training, that `path` can be written: not empty, not a
// directory, and its (target's) directory exists and is writable, or it is an existing device or
// FIFO we may write. Throws Error(BadInput), e.g. "--json out/r.json: directory out does not
// exist"; `option` ("--json") prefixes the message when given.
void check_writable(const std::string& path, const std::string& option = "");

struct OutputArg {
  std::string option;  // "--json"
  std::string path;    // empty: not given
};
// check_writable for every given output, then refuses (BadInput) two outputs that are one file
// (`--json X --csv X`) and an output that is also an input (`report a.json --html a.json`), by
// the file they reach (links followed). Devices and FIFOs may be named more than once.
void check_outputs(const std::vector<OutputArg>& outputs, const std::vector<std::string>& inputs);

// SIGINT, SIGTERM and SIGHUP (unless ignored when we started): remove the temporary file of a
// write in progress, print "mpbench: interrupted" and exit 128 + the signal (130, 143, 129).
void install_interrupt_handlers();

namespace detail {
// write_output with a hook called after the temporary file is complete and before the rename,
// so that tests can interrupt a write at its most delicate point.
void write_output(const std::string& path, const std::string& content,
                  const std::function<void()>& before_rename);
}  // namespace detail

}  // namespace mpbench
