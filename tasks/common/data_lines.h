// Reading the tasks' text inputs (edge lists, rating files).
#pragma once
#include <cstdint>
#include <istream>
#include <string>

namespace freeride::tasks {

// Reads the next line that holds data into *line, skipping blank lines and
// comments ('#' or '%'); counts every line read in *line_no.  False at the end.
inline bool NextDataLine(std::istream& in, std::string* line, int64_t* line_no) {
  while (std::getline(in, *line)) {
    ++*line_no;
    size_t start = line->find_first_not_of(" \t\r");
    if (start != std::string::npos && (*line)[start] != '#' && (*line)[start] != '%') return true;
  }
  return false;
}

}  // namespace freeride::tasks
