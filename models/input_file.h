#pragma once
// Every file mpbench reads because a user named it (specs, idx data, result and profile files)
// is opened here, so that each is refused the same way, in one line naming the file: a
// directory, a FIFO (which would block forever with no writer), a device or socket, a file too
// large to be what it claims, JSON that does not parse or holds a number beyond double range.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mpbench {

// The largest result or profile file read: 256 MiB is about a million training steps with their
// per-step series, far beyond what a benchmark run writes, and parses in seconds.
constexpr uint64_t kMaxResultFileBytes = uint64_t{256} << 20;
// The deepest JSON read: mpbench's own files nest 6 levels, its specs 4.
constexpr size_t kMaxJsonDepth = 64;
// Specs are a few hundred bytes; 16 MiB leaves any hand-written one room.
constexpr uint64_t kMaxSpecFileBytes = uint64_t{16} << 20;

// Throws Error(BadInput) unless `path` is a readable regular file of at most max_bytes, e.g.
// "x.json: cannot read result file: is a FIFO, expected a regular file". `what` names the kind.
// Returns the file's size.
uint64_t check_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// The whole file, after check_input_file; the FIFO check and the read use one descriptor.
std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// Parses JSON text from `path`: a syntax error is "<path>:<line>:<col>: JSON syntax error: ...",
// a number beyond double range "<path>:<line>:<col>: JSON error: number overflow parsing '1e400'"
// (at the number's first character), both BadInput; so is a NUL byte anywhere (nlohmann would
// take it for the end of the input and accept "{...}\0 anything"), bytes after the value, and
// more than kMaxJsonDepth levels of nesting.
nlohmann::json parse_json_text(const std::string& text, const std::string& path);

// read_input_file + parse_json_text.
nlohmann::json read_json_file(const std::string& path, const std::string& what,
                              uint64_t max_bytes = kMaxResultFileBytes);

}  // namespace mpbench
