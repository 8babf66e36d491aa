// Escaping of names (run directories, file names, config.json values) before they reach a terminal, a log, a
// report or a gnuplot script: data must never be able to move a cursor, retitle a window, clear a screen or run a
// command.
#pragma once

#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

namespace xgrad {

namespace detail {
// `prefix` then the `digits` low hex digits of `value`, upper case: \x1B, \u0085.
inline std::string hex_escape(const char* prefix, unsigned value, int digits) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out(prefix);
  for (int d = digits - 1; d >= 0; --d) out += kHex[(value >> (4 * d)) & 0xFu];
  return out;
}
}  // namespace detail

/// `text` with every control character written out visibly: C0 controls and DEL as \n, \r, \t, \a, \b, \e or \xHH,
/// and the C1 controls U+0080..U+009F (UTF-8 C2 80..C2 9F, which terminals obey like ESC [) as \u00HH. A backslash
/// is kept as it is. Other bytes (printable ASCII, UTF-8 text) are unchanged. With keep_newlines, '\n' passes
/// through (for text of several lines). The output holds no control character other than those newlines.
inline std::string escape_control(std::string_view text, bool keep_newlines = false) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      out += detail::hex_escape("\\u", static_cast<unsigned char>(text[++i]), 4);
      continue;
    }
    if (ch >= 0x20 && ch != 0x7F) {
      out += static_cast<char>(ch);
      continue;
    }
    switch (ch) {
      case '\n':
        out += keep_newlines ? "\n" : "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case 0x1B:
        out += "\\e";
        break;
      default:
        out += detail::hex_escape("\\x", ch, 2);
    }
  }
  return out;
}

/// The length of the well-formed UTF-8 sequence that starts text[i] (1 to 4 bytes; The Unicode Standard, table 3-7:
/// no overlong forms, surrogates or code points above U+10FFFF), or 0 if none starts there.
inline std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0; };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) n = 2;
  if (b0 >= 0xE0 && b0 <= 0xEF) n = 3;
  if (b0 >= 0xF0 && b0 <= 0xF4) n = 4;
  if (b0 == 0xE0) lo = 0xA0;
  if (b0 == 0xED) hi = 0x9F;
  if (b0 == 0xF0) lo = 0x90;
  if (b0 == 0xF4) hi = 0x8F;
  if (n == 0 || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  return n;
}

namespace detail {
// `bytes` with each byte that begins no well-formed UTF-8 sequence as \xNN and each sequence as `write` gives it.
template <class Write>
std::string escape_utf8(std::string_view bytes, Write write) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const std::size_t n = utf8_sequence_length(bytes, i);
    if (n == 0) {
      out += hex_escape("\\x", static_cast<unsigned char>(bytes[i++]), 2);
      continue;
    }
    out += write(bytes.substr(i, n));
    i += n;
  }
  return out;
}
}  // namespace detail

/// `bytes` with well-formed UTF-8 passed through unchanged and every byte that does not begin a well-formed sequence
/// written as \xNN (upper-case hex, as escape_control), one byte at a time: a sequence cut short or broken shows each
/// of its bytes.
inline std::string escape_invalid_utf8(std::string_view bytes) {
  return detail::escape_utf8(bytes, [](std::string_view sequence) { return sequence; });
}

/// A name (a run directory, a file, a config.json value) as one line of text: each well-formed UTF-8 sequence as
/// escape_control writes it (so a newline is \n, an ESC \e, a C1 control \u00HH) and each byte that starts none
/// as \xHH. The result is valid UTF-8 without a control character; a backslash is kept as it is.
inline std::string escape_name(std::string_view name) {
  return detail::escape_utf8(name, [](std::string_view sequence) { return escape_control(sequence); });
}

/// escape_name of at most the first `max_bytes` of `name`, with "..." when it is longer: a name quoted in a message.
inline std::string shortened_name(std::string_view name, std::size_t max_bytes = 80) {
  return escape_name(name.substr(0, max_bytes)) + (name.size() > max_bytes ? "..." : "");
}

/// A stream buffer that passes what is written through escape_control (newlines kept) to `sink`: for output that
/// mixes xgrad's own text with data (run directory names, file names, config.json values), whose ANSI escapes
/// must be shown, not obeyed. Use: `EscapingStreambuf buf(std::cout); std::ostream out(&buf);`.
class EscapingStreambuf : public std::streambuf {
 public:
  explicit EscapingStreambuf(std::ostream& sink) : sink_(sink) {}
  ~EscapingStreambuf() override { flush_pending(); }

 protected:
  int overflow(int ch) override {
    if (ch == traits_type::eof()) return traits_type::not_eof(ch);
    const auto byte = static_cast<unsigned char>(ch);
    if (pending_) {  // a C1 control is two bytes in UTF-8: C2 then 80..9F
      pending_ = false;
      sink_ << escape_control(std::string{'\xC2', static_cast<char>(byte)}, true);
      return ch;
    }
    if (byte == 0xC2)
      pending_ = true;
    else
      sink_ << escape_control(std::string(1, static_cast<char>(byte)), true);
    return ch;
  }
  int sync() override {
    sink_.flush();
    return 0;
  }

 private:
  void flush_pending() {
    if (pending_) sink_ << '\xC2';
    pending_ = false;
  }
  std::ostream& sink_;
  bool pending_ = false;
};

}  // namespace xgrad
