#pragma once
// Text from outside (a file's fields, an argument) made safe to print on one line of a terminal:
// ASCII's controls as C writes them (\n, \t, \r, \x1b), invalid UTF-8 byte by byte (\xff), and
// code points a terminal would act on or not show (C1 controls, bidi overrides and isolates,
// zero-width and format characters, line separators, private use, unassigned) as \u{202E}.
// Everything else, box drawing and accents included, is kept as it is.
#include <cstddef>
#include <cstdint>
#include <string>

namespace mpbench {

// The length of the well-formed UTF-8 sequence at p[i] (no overlong forms, surrogates or code
// points past U+10FFFF), its code point in cp; 0 when p[i] (>= 0x80) starts none. The one UTF-8
// reader of every writer's escaping.
int utf8_sequence(const unsigned char* p, size_t i, size_t n, uint32_t& cp);

// Appends s, made printable, to out, stopping before out holds max_bytes or more; returns how
// many bytes of s it took (s.size() when all).
size_t append_printable(const std::string& s, size_t max_bytes, std::string& out);
std::string printable_text(const std::string& s);

// For writers that keep the rest of their text (HTML, Markdown): a control character at s[i] (C0
// but tab, line feed and carriage return, which each writer treats as it must; DEL; the C1
// controls U+0080 to U+009F, two bytes in UTF-8; the bidi controls, U+202E and its kin, which
// reorder the text around them) appended as C writes it, "\x1b" or "\u{0085}",
// and a byte that starts no well-formed UTF-8 sequence as "\xe9" (a Latin-1 file name: the page
// and the step summary are UTF-8), its backslash written as `backslash`; any other non-ASCII
// character appended whole. The bytes of s it took: 0 for ASCII the writer keeps or escapes.
size_t append_control_escape(const std::string& s, size_t i, const std::string& backslash,
                             std::string& out);

}  // namespace mpbench
