#pragma once
// Result files are written whole or not at all: a run that fails half-way (or is killed) must never
// leave a truncated JSON/CSV that a later `compare` or CI step would read as a result.
#include <string>

namespace mpbench {

// Writes `content` to `<path>.tmp.<pid>` in the same directory, fsyncs it and renames it over
// `path`. On any failure the temporary file is removed and Error(Runtime) is thrown:
// "cannot write <path>: <strerror>".
void write_file_atomic(const std::string& path, const std::string& content);

// Up-front check, before minutes of training, that `path` can be written: its directory exists,
// is a directory and is writable, and `path` is not itself a directory. Throws Error(BadInput),
// e.g. "--json out/r.json: directory out does not exist"; `option` ("--json") prefixes the
// message when given.
void check_writable(const std::string& path, const std::string& option = "");

}  // namespace mpbench
