// UTF-8 for text that others write: task names, units from a task's shared
// segment.  A protobuf `string` must be valid UTF-8, and one bad unit would
// make every status reply that carries it fail to serialise, for every
// client of the daemon; so text from a task is repaired before it goes into
// one, and cut only on a character's boundary.  Pure; any thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace freeride {

// The code point starting at text[*at], advancing *at past it; -1 (and *at
// unmoved) for bytes that are not UTF-8: stray continuation bytes, overlong
// forms, surrogates, code points past U+10FFFF, a sequence cut short.
int32_t NextCodePoint(std::string_view text, size_t* at);

// `text` as valid UTF-8: a character cut short at the end is dropped (a
// writer cut it to fit), any other byte that is not UTF-8 becomes U+FFFD.
std::string ValidUtf8(std::string_view text);

// The longest prefix of `text` of at most `max_bytes` that does not end in
// the middle of a character (of valid text: cut so, it stays valid).
std::string_view Utf8Prefix(std::string_view text, size_t max_bytes);

// `text` from its first byte that is not a continuation byte: a tail cut at a
// byte count starts on a whole character.
std::string_view Utf8SuffixFromACharacter(std::string_view text);

}  // namespace freeride
