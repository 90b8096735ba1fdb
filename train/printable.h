#pragma once
// Text from outside (a file's fields, an argument) made safe to print on one line of a terminal:
// ASCII's controls as C writes them (\n, \t, \r, \x1b), invalid UTF-8 byte by byte (\xff), and
// code points a terminal would act on or not show (C1 controls, bidi overrides and isolates,
// zero-width and format characters, line separators, private use, unassigned) as \u{202E}.
// Everything else, box drawing and accents included, is kept as it is.
#include <cstddef>
#include <string>

namespace mpbench {

// Appends s, made printable, to out, stopping before out holds max_bytes or more; returns how
// many bytes of s it took (s.size() when all).
size_t append_printable(const std::string& s, size_t max_bytes, std::string& out);
std::string printable_text(const std::string& s);

}  // namespace mpbench
