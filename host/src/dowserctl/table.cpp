#include "dowserctl.hpp"
#include "log_lines.hpp"

#include <algorithm>
#include <ostream>

namespace dowser::ctl {

std::string paint(const std::string& text, Colour colour, bool enabled) {
  if (!enabled || colour == Colour::none) return text;
  const char* code = colour == Colour::green ? "32" : colour == Colour::yellow ? "33" : "31";
  return std::string("\033[") + code + "m" + text + "\033[0m";
}

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::add(std::vector<Cell> row) {
  row.resize(headers_.size());
  // Cells hold what handlers and manifests said: a newline or an escape
  // sequence in one must not break the table or reach the terminal.
  for (auto& cell : row) cell.text = log_lines::escape_controls(cell.text);
  rows_.push_back(std::move(row));
}

void Table::print(std::ostream& out, bool colour) const {
  std::vector<size_t> widths;
  for (const auto& header : headers_) widths.push_back(header.size());
  for (const auto& row : rows_)
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].text.size());
  auto line = [&](const std::vector<Cell>& cells) {
    std::string text;
    for (size_t i = 0; i < cells.size(); ++i) {
      bool last = i + 1 == cells.size();
      text += paint(cells[i].text, cells[i].colour, colour);
      if (!last) text += std::string(widths[i] - cells[i].text.size() + 2, ' ');
    }
    text.erase(text.find_last_not_of(' ') + 1);  // an empty last column leaves padding
    out << text << '\n';
  };
  line({headers_.begin(), headers_.end()});
  for (const auto& row : rows_) line(row);
}

}  // namespace dowser::ctl
