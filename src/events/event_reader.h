// Reads the typed events of events/events.h back from their JSON objects.
// Each Read* throws simdjson::simdjson_error when a required key is missing
// or of the wrong type, or the values contradict each other (an end before
// its begin), or a count, rate or time no writer makes negative is (units,
// alone rate, harvested/allowed/overrun time): the caller counts the line
// as skipped.  A negative progress reads as 0 (older daemons wrote one).  Keys a newer writer
// added are ignored; keys an older one did not write take their defaults;
// a state, verdict or end this reader does not know is left unset.  Any
// thread; no shared state.
#pragma once
#include <simdjson.h>

#include <string_view>

#include "events/events.h"

namespace freeride::events {

BubbleEvent ReadBubbleEvent(simdjson::dom::object o);
StepEvent ReadStepEvent(simdjson::dom::object o);
TransitionEvent ReadTransitionEvent(simdjson::dom::object o);

// Helpers for the other event kinds' readers.
// The number at `key` as an integer (a double is truncated); throws when the
// key is missing or holds anything but a number.
int64_t IntField(simdjson::dom::object o, std::string_view key);
// IntField, but `fallback` when the key is missing or null.
int64_t IntFieldOr(simdjson::dom::object o, std::string_view key, int64_t fallback);
// True when `key` holds a number (not null, not missing).  Never throws.
bool HasNumberField(simdjson::dom::object o, std::string_view key);
// The number at `key`; `fallback` when it is missing or not a number.  Never
// throws.
double DoubleFieldOr(simdjson::dom::object o, std::string_view key, double fallback);
// The string at `key`; "" when it is missing or not a string.  Never throws.
std::string StringFieldOr(simdjson::dom::object o, std::string_view key);

}  // namespace freeride::events
