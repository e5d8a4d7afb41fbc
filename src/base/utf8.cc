#include "base/utf8.h"

namespace freeride {
namespace {

// The length a lead byte announces: 1 to 4, or 0 for a byte no character starts with.
int SequenceLength(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
}

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

int32_t NextCodePoint(std::string_view text, size_t* at) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(*at);
  const int length = SequenceLength(lead);
  if (length == 0 || *at + length > text.size()) return -1;
  int32_t code = length == 1 ? lead : lead & (0x7F >> length);
  for (int i = 1; i < length; ++i) {
    if (!IsContinuation(byte(*at + i))) return -1;
    code = (code << 6) | (byte(*at + i) & 0x3F);
  }
  static constexpr int32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kLeast[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return -1;
  *at += length;
  return code;
}

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t from = at;
    if (NextCodePoint(text, &at) >= 0) {
      out.append(text.substr(from, at - from));
      continue;
    }
    // A lead byte whose sequence the text's end cut short, its bytes so far continuations.
    const int length = SequenceLength(static_cast<unsigned char>(text[from]));
    bool cut_at_end = length > 1 && from + length > text.size();
    for (size_t i = from + 1; cut_at_end && i < text.size(); ++i)
      cut_at_end = IsContinuation(static_cast<unsigned char>(text[i]));
    if (cut_at_end) break;
    out.append("\xEF\xBF\xBD");  // U+FFFD
    at = from + 1;
  }
  return out;
}

std::string_view Utf8Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Back over the continuation bytes of the character the cut falls in.
  while (end > 0 && IsContinuation(static_cast<unsigned char>(text[end]))) --end;
  return text.substr(0, end);
}

std::string_view Utf8SuffixFromACharacter(std::string_view text) {
  size_t first = 0;
  while (first < text.size() && IsContinuation(static_cast<unsigned char>(text[first]))) ++first;
  return text.substr(first);
}

}  // namespace freeride
