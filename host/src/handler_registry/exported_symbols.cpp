// What a handler file's ELF headers say: what it exports (its dynamic symbol
// table) and whether it is whole. No code of the file runs.
#include "handler_registry.hpp"

#include <cxxabi.h>
#include <link.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dowser::host {
namespace {

using Header = ElfW(Ehdr);
using Segment = ElfW(Phdr);
using Section = ElfW(Shdr);
using Symbol = ElfW(Sym);

// Native class only: the dynamic loader opens no other.
constexpr unsigned char kNativeClass = __ELF_NATIVE_CLASS == 64 ? ELFCLASS64 : ELFCLASS32;

// More than any real handler's tables: a corrupt size must not exhaust memory.
constexpr uint64_t kMaxTableBytes = uint64_t{256} << 20;

std::string read_bytes(std::ifstream& in, uint64_t offset, uint64_t size) {
  if (size > kMaxTableBytes) throw std::runtime_error("an ELF table of implausible size");
  std::string bytes(size, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw std::runtime_error("the file ends inside its ELF tables");
  return bytes;
}

template <typename Record>
Record read_record(std::ifstream& in, uint64_t offset) {
  Record record{};
  std::memcpy(&record, read_bytes(in, offset, sizeof record).data(), sizeof record);
  return record;
}

Header read_header(std::ifstream& in) {
  Header header{};
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  if (in.gcount() != sizeof header || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    throw std::runtime_error("not an ELF file");
  if (header.e_ident[EI_CLASS] != kNativeClass ||
      (header.e_shnum != 0 && header.e_shentsize != sizeof(Section)))
    throw std::runtime_error("an ELF file of another class than this machine's");
  return header;
}

// Where the linker put the symbols the dynamic loader sees, if anywhere.
std::optional<Section> dynamic_symbols(std::ifstream& in, const Header& header) {
  for (size_t i = 0; i < header.e_shnum; ++i) {
    auto section = read_record<Section>(in, header.e_shoff + i * sizeof(Section));
    if (section.sh_type == SHT_DYNSYM) return section;
  }
  return std::nullopt;
}

// What AddressSanitizer adds beside each exported variable (an ODR
// indicator): the author's export is listed already.
constexpr std::string_view kSanitizerOdrIndicator = "__odr_asan";

// Defined here and visible to other objects. Version names (absolute
// symbols) and undefined references are not exports.
bool exported(const Symbol& symbol) {
  // The 64-bit macros: the fields are the same in both classes.
  const auto binding = ELF64_ST_BIND(symbol.st_info);
  const auto visibility = ELF64_ST_VISIBILITY(symbol.st_other);
  return symbol.st_name != 0 && symbol.st_shndx != SHN_UNDEF && symbol.st_shndx != SHN_ABS &&
         (binding == STB_GLOBAL || binding == STB_WEAK || binding == STB_GNU_UNIQUE) &&
         (visibility == STV_DEFAULT || visibility == STV_PROTECTED);
}

// Where the file's two header tables end.
uint64_t header_tables_end(const Header& header) {
  return std::max(header.e_phoff + uint64_t{header.e_phnum} * header.e_phentsize,
                  header.e_shoff + uint64_t{header.e_shnum} * header.e_shentsize);
}

// Where the last segment's file image ends (what the loader maps).
uint64_t segments_end(std::ifstream& in, const Header& header) {
  uint64_t end = 0;
  if (header.e_phentsize != sizeof(Segment)) return end;  // the loader refuses it itself
  for (size_t i = 0; i < header.e_phnum; ++i) {
    const auto segment = read_record<Segment>(in, header.e_phoff + i * sizeof(Segment));
    if (segment.p_type == PT_LOAD)
      end = std::max(end, uint64_t{segment.p_offset} + segment.p_filesz);
  }
  return end;
}

}  // namespace

std::optional<std::string> unfinished_file_reason(const std::filesystem::path& file) {
  std::error_code error;
  const uint64_t size = std::filesystem::file_size(file, error);
  std::ifstream in(file, std::ios::binary);
  if (error || !in) return std::nullopt;
  try {
    const Header header = read_header(in);
    uint64_t described = header_tables_end(header);
    if (size >= described) described = std::max(described, segments_end(in, header));
    if (size >= described) return std::nullopt;
    return "the file is shorter than the " + std::to_string(described) +
           " bytes its ELF headers describe: is it still being written? Put a handler in place "
           "by rename (copy it next to the directory, then mv it in); it is tried again at the "
           "next scan";
  } catch (const std::runtime_error&) {
    return std::nullopt;  // not an ELF file of this machine: the loader says so in its words
  }
}

std::vector<std::string> exported_symbols(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file.string() + ": " + std::strerror(errno));
  try {
    const Header header = read_header(in);
    const auto symbols = dynamic_symbols(in, header);
    if (!symbols) return {};
    const auto strings =
        read_record<Section>(in, header.e_shoff + symbols->sh_link * sizeof(Section));
    const std::string names = read_bytes(in, strings.sh_offset, strings.sh_size);
    const std::string table = read_bytes(in, symbols->sh_offset, symbols->sh_size);
    std::vector<std::string> result;
    for (size_t at = 0; at + sizeof(Symbol) <= table.size(); at += sizeof(Symbol)) {
      Symbol symbol{};
      std::memcpy(&symbol, table.data() + at, sizeof symbol);
      if (!exported(symbol) || symbol.st_name >= names.size()) continue;
      const std::string_view name = names.c_str() + symbol.st_name;
      if (!name.starts_with(kSanitizerOdrIndicator)) result.emplace_back(name);
    }
    return result;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
}

std::string missing_entry_reason(const std::filesystem::path& file) {
  std::string reason = std::string("no exported symbol ") + DOWSER_ENTRY_SYMBOL +
                       ": not a dowser handler, or built without the SDK's export";
  std::vector<std::string> symbols;
  try {
    symbols = exported_symbols(file);
  } catch (const std::runtime_error&) {
    return reason;  // the hint is a bonus: the reason stands without it
  }
  for (const auto& name : symbols) {
    if (name.starts_with("_Z") && name.find(DOWSER_ENTRY_SYMBOL) != std::string::npos)
      return reason.append("; it exports ")
          .append(name)
          .append(", which is C++ for ")
          .append(demangled_symbol(name))
          .append(
              ": declare the entry extern \"C\" (in C++, or use the SDK's DOWSER_HANDLER macro)");
  }
  return reason;
}

namespace {

constexpr size_t kSymbolsNamed = 5;         // of the extra exports, in the warning
constexpr size_t kMaxSymbolNameBytes = 80;  // a C++ template's name can run to pages

// "a, b, c and 4 more".
std::string some_symbols(const std::vector<std::string>& symbols) {
  std::string text;
  for (size_t i = 0; i < symbols.size() && i < kSymbolsNamed; ++i)
    text += (i == 0 ? "" : ", ") + shortened(demangled_symbol(symbols[i]), kMaxSymbolNameBytes);
  if (symbols.size() > kSymbolsNamed)
    text += " and " + std::to_string(symbols.size() - kSymbolsNamed) + " more";
  return text;
}

}  // namespace

std::optional<std::string> extra_exports_warning(const std::filesystem::path& file) {
  std::vector<std::string> extra;
  try {
    for (auto& name : exported_symbols(file))
      if (name != DOWSER_ENTRY_SYMBOL) extra.push_back(std::move(name));
  } catch (const std::runtime_error& e) {
    return std::string("cannot list the exported symbols: ") + e.what();
  }
  if (extra.empty()) return std::nullopt;
  return "exports " + std::to_string(extra.size()) + " symbol(s) besides " + DOWSER_ENTRY_SYMBOL +
         ": " + some_symbols(extra) +
         "; each can clash with a symbol of the same name in dowserd or another library. Export "
         "only the entry: build with -fvisibility=hidden and link with the SDK's version script "
         "dowser-handler.map (dowser_add_handler does both)";
}

std::string demangled_symbol(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> text(
      ::abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && text ? std::string(text.get()) : name;
}

}  // namespace dowser::host
