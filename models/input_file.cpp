#include "models/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kernels/error.h"

namespace mpbench {

using json = nlohmann::json;

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "is a directory";
  if (S_ISFIFO(m)) return "is a FIFO";
  if (S_ISCHR(m)) return "is a character device";
  if (S_ISBLK(m)) return "is a block device";
  if (S_ISSOCK(m)) return "is a socket";
  return "is not a regular file";
}

[[noreturn]] void refuse(const std::string& path, const std::string& what, const std::string& why) {
  throw_bad_input(fmt::format("{}: cannot read {}: {}", path, what, why));
}

// Opens without blocking (a FIFO with no writer would block in open itself) and checks what the
// descriptor refers to; returns it open, at the start, in blocking mode.
int open_regular(const std::string& path, const std::string& what, uint64_t max_bytes,
                 uint64_t& size) {
  if (path.empty()) refuse("(empty path)", what, "expected a file name");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    // A socket cannot be opened at all (ENXIO): say what it is, as for the other kinds.
    const int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      refuse(path, what, fmt::format("{}, expected a regular file", kind_of(st.st_mode)));
    refuse(path, what, std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    refuse(path, what, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse(path, what, fmt::format("{}, expected a regular file", kind_of(st.st_mode)));
  }
  size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    refuse(
        path, what,
        fmt::format("{} bytes, more than the {} MiB a {} may have", size, max_bytes >> 20, what));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::pair<size_t, size_t> line_col(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  const size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..." -> the
// part after the position, which we print as file:line:col ourselves.
std::string json_message(const std::string& what) {
  std::string s = what;
  if (s.rfind("[json.exception.", 0) == 0) {
    const size_t close = s.find("] ");
    if (close != std::string::npos) s = s.substr(close + 2);
  }
  if (s.rfind("parse error", 0) == 0) {
    const size_t colon = s.find(": ");
    if (colon != std::string::npos) s = s.substr(colon + 2);
  }
  // "last read: '<token>'" echoes the file: a 100 KB string token is cut to its start.
  const std::string last = "last read: '";
  const size_t from = s.find(last);
  if (from != std::string::npos) {
    const size_t begin = from + last.size();
    size_t end = s.rfind("'; ");
    if (end == std::string::npos || end < begin) end = s.size() - (s.back() == '\'' ? 1 : 0);
    constexpr size_t kMaxToken = 60;
    if (end > begin + kMaxToken) {
      size_t cut = begin + kMaxToken;
      while (cut > begin && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
      s.replace(cut, end - cut, "...");
    }
  }
  return s;
}

// nlohmann parses without recursion, but copying, comparing and printing a value recurse: 200k
// nested arrays in a 400 KB file overflow the stack there. One linear pass over the text (strings
// skipped) refuses such a file before it is parsed.
void check_nesting(const std::string& text, const std::string& path) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        const auto [line, col] = line_col(text, i + 1);
        throw_bad_input(fmt::format("{}:{}:{}: JSON error: more than {} levels of nesting", path,
                                    line, col, kMaxJsonDepth));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

// Where nlohmann met a number beyond double range (0: nowhere): its out_of_range error has no
// position, but the SAX event that raises it has the number's last byte.
size_t overflow_byte(const std::string& text) {
  struct Locator : json::json_sax_t {
    size_t byte = 0;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t position, const std::string& token,
                     const json::exception& e) override {
      // The number's first byte, as a syntax error names the byte it failed at.
      if (e.id == 406 && position >= token.size()) byte = position - token.size() + 1;
      return false;
    }
  } locator;
  json::sax_parse(text, &locator);
  return locator.byte;
}

}  // namespace

uint64_t check_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  uint64_t size = 0;
  ::close(open_regular(path, what, max_bytes, size));
  return size;
}

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  uint64_t size = 0;
  const int fd = open_regular(path, what, max_bytes, size);
  // To the end of the file, not to its stated size: a pseudo-file (/proc) says 0 and has text, a
  // file may grow or shrink while it is read. The buffer grows up to one byte over the limit.
  std::string text(static_cast<size_t>(std::max<uint64_t>(size, 4096)), '\0');
  size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (got > max_bytes) break;
      text.resize(static_cast<size_t>(std::min<uint64_t>(2 * got, max_bytes + 1)));
    }
    const ssize_t n = ::read(fd, &text[got], text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      refuse(path, what, std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > max_bytes)
    refuse(path, what, fmt::format("more than the {} MiB a {} may have", max_bytes >> 20, what));
  text.resize(got);
  return text;
}

json parse_json_text(const std::string& text, const std::string& path) {
  // nlohmann reads a NUL byte as the end of the input, so that "{...}\0{...}" would parse as its
  // first value; JSON text holds no raw NUL anywhere (in a string it is written \u0000).
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    const auto [line, col] = line_col(text, nul + 1);
    throw_bad_input(
        fmt::format("{}:{}:{}: JSON syntax error: {}", path, line, col,
                    json::accept(text.begin(), text.begin() + nul)
                        ? "bytes after the JSON value, from a NUL byte"
                        : "a NUL byte (JSON text has none; in a string it is \\u0000)"));
  }
  check_nesting(text, path);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    const auto [line, col] = line_col(text, e.byte);
    throw_bad_input(
        fmt::format("{}:{}:{}: JSON syntax error: {}", path, line, col, json_message(e.what())));
  } catch (const json::exception& e) {
    // out_of_range.406: a number beyond double range (1e400).
    if (const size_t byte = overflow_byte(text)) {
      const auto [line, col] = line_col(text, byte);
      throw_bad_input(
          fmt::format("{}:{}:{}: JSON error: {}", path, line, col, json_message(e.what())));
    }
    throw_bad_input(fmt::format("{}: JSON error: {}", path, json_message(e.what())));
  }
}

json read_json_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  return parse_json_text(read_input_file(path, what, max_bytes), path);
}

}  // namespace mpbench
