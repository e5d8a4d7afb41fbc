// What libfreeride_gate.so exports, read from its dynamic symbol table: the
// library is preloaded into every gated program, so any other symbol it
// exports (its static C++ runtime's operator new or exceptions, a std
// template it instantiated) would stand in for the program's own.
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "gate/gated_functions.h"
#include "gate/symbol_table.h"

namespace {

// The names the uncovered entry points' refusers are exported as.
constexpr const char* kUncoveredExports[] = {
#define FREERIDE_UNCOVERED_NAME(id, name) #name,
    FREERIDE_UNCOVERED_EXPORTS(FREERIDE_UNCOVERED_NAME)
#undef FREERIDE_UNCOVERED_NAME
};

// The defined global and weak names of an ELF64 shared library's .dynsym.
std::vector<std::string> DefinedDynamicSymbols(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GE(image.size(), sizeof(Elf64_Ehdr)) << path;
  if (image.size() < sizeof(Elf64_Ehdr)) return {};
  Elf64_Ehdr header;
  std::memcpy(&header, image.data(), sizeof header);
  EXPECT_EQ(std::memcmp(header.e_ident, ELFMAG, SELFMAG), 0) << path;
  EXPECT_EQ(header.e_ident[EI_CLASS], ELFCLASS64) << path;
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (header.e_shoff + sizeof(Elf64_Shdr) * sections.size() > image.size()) {
    ADD_FAILURE() << path << ": section headers past the file's end";
    return {};
  }
  std::memcpy(sections.data(), image.data() + header.e_shoff, sizeof(Elf64_Shdr) * sections.size());
  std::vector<std::string> names;
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_type != SHT_DYNSYM || section.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strings = sections[section.sh_link];
    for (size_t at = section.sh_offset; at + sizeof(Elf64_Sym) <= section.sh_offset + section.sh_size;
         at += sizeof(Elf64_Sym)) {
      Elf64_Sym symbol;
      std::memcpy(&symbol, image.data() + at, sizeof symbol);
      const int binding = ELF64_ST_BIND(symbol.st_info);
      if (symbol.st_shndx == SHN_UNDEF || (binding != STB_GLOBAL && binding != STB_WEAK)) continue;
      names.emplace_back(image.data() + strings.sh_offset + symbol.st_name);
    }
  }
  return names;
}

TEST(GateExports, OnlyTheDriversNamesDlsymAndOurLookUpsAreExported) {
  const std::vector<std::string> names = DefinedDynamicSymbols(GATE_LIBRARY);
  const std::set<std::string> ours = {"dlsym", "FreerideGetProcAddressV1", "FreerideGetProcAddressV2",
                                      "cuGetProcAddress", "cuGetProcAddress_v2",
                                      "cuGraphInstantiateWithParams",
                                      "cuGraphInstantiateWithParams_ptsz"};
  size_t gated = 0, ordered = 0, uncovered = 0;
  for (const std::string& name : names) {
    if (ours.count(name)) continue;
    if (freeride::gate::GatedByExportName(name.c_str())) {
      ++gated;
    } else if (freeride::gate::OrderedByExportName(name.c_str())) {
      ++ordered;
    } else if (freeride::gate::UncoveredByName(name.c_str())) {
      ++uncovered;
    } else {
      ADD_FAILURE() << "libfreeride_gate.so exports " << name
                    << ", which is neither a driver name it wraps or refuses nor its own look-up";
    }
  }
  EXPECT_GT(gated, 0u);
  EXPECT_GT(ordered, 0u);
  // Every name by which a program linked against libcuda calls an uncovered entry point is refused there.
  for (const char* name : kUncoveredExports)
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name << " is not exported";
  EXPECT_EQ(uncovered, std::size(kUncoveredExports));
  for (const char* name : {"dlsym", "cuGetProcAddress_v2", "cuLaunchKernel", "cuStreamSynchronize"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name << " is not exported";
}

}  // namespace
