// The rule parser: Akri's supported rules with their filter counts, every
// unsupported rule refused with its column and reason, whitespace as udev.
#include "udev_rule.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace udev_handler {
namespace {

struct Counted {
  std::string rule;
  size_t filters;
};

// Akri's test/example.rules (akri-behaviour.md 6.6), with the expected counts.
const std::vector<Counted> kAkriSupported = {
    {R"(SUBSYSTEM=="video4linux")", 1},
    {R"(KERNEL=="video*", ENV{ID_SERIAL}=="?*")", 2},
    {R"(ENV{ID_PATH}=="?*", KERNEL=="video*|vbi*", DRIVER=="some driver")", 3},
    {R"(TAG=="uaccess",ENV{MAJOR}!="")", 2},
    {R"(KERNEL=="video[0-9]", DEVPATH!="/sys/path/to/device")", 2},
    {R"(ATTR{idProduct}=="1900", ENV{ID_MM_ERICSSON_MBM}=="1")", 2},
    {R"(ATTR{idVendor}=="0bdd", ENV{a name}=="Keyboard that has a mouse")", 2},
    {R"(KERNEL=="video[0-9]*", ENV{ID_V4L_CAPABILITIES}==":capture:")", 2},
    {R"(SUBSYSTEMS=="pci")", 1},
    {R"(ATTRS{idVendor}=="0bdd", DRIVERS!="a driver")", 2},
    {R"(TAGS=="uaccess")", 1},
    {R"(KERNELS=="card[0-9]*")", 1},
};

TEST(UdevRule, EveryAkriExampleRuleParsesWithItsFilterCount) {
  for (const auto& [rule, filters] : kAkriSupported) {
    try {
      EXPECT_EQ(parse_rule(rule).size(), filters) << rule;
    } catch (const RuleError& e) {
      ADD_FAILURE() << rule << ": " << e.what();
    }
  }
}

TEST(UdevRule, FiltersCarryFieldKeyOperatorValueAndColumn) {
  auto filters =
      parse_rule(R"(KERNEL=="video[0-9]*",SUBSYSTEM=="video4linux", ATTR{idVendor}!="05a9")");
  ASSERT_EQ(filters.size(), 3u);
  EXPECT_EQ(filters[0], (Filter{Field::kernel, "", Operator::equal, "video[0-9]*", 1}));
  EXPECT_EQ(filters[1], (Filter{Field::subsystem, "", Operator::equal, "video4linux", 23}));
  EXPECT_EQ(filters[2], (Filter{Field::attr, "idVendor", Operator::not_equal, "05a9", 49}));
}

TEST(UdevRule, EveryFieldIsKnownWithItsKeyAndParentWalk) {
  auto filters = parse_rule(
      R"(ATTR{a}=="1", ATTRS{b}=="2", DEVPATH=="3", DRIVER=="4", DRIVERS=="5", ENV{c}=="6", )"
      R"(KERNEL=="7", KERNELS=="8", SUBSYSTEM=="9", SUBSYSTEMS=="10", TAG=="11", TAGS=="12")");
  std::vector<Field> fields;
  for (const auto& f : filters) fields.push_back(f.field);
  EXPECT_EQ(fields,
            (std::vector<Field>{Field::attr, Field::attrs, Field::devpath, Field::driver,
                                Field::drivers, Field::env, Field::kernel, Field::kernels,
                                Field::subsystem, Field::subsystems, Field::tag, Field::tags}));
  for (const auto& f : filters) {
    std::string name(field_name(f.field));
    EXPECT_EQ(walks_parents(f.field), name.back() == 'S' && name != "SUBSYSTEM") << name;
    EXPECT_EQ(takes_key(f.field), name.rfind("ATTR", 0) == 0 || name == "ENV") << name;
  }
}

TEST(UdevRule, WhitespaceIsToleratedAsUdevDoes) {
  auto filters = parse_rule(" \tKERNEL == \"video0\" ,\tSUBSYSTEM!=  \"usb\"  ");
  ASSERT_EQ(filters.size(), 2u);
  EXPECT_EQ(filters[0].value, "video0");
  EXPECT_EQ(filters[0].column, 3u);
  EXPECT_EQ(filters[1].op, Operator::not_equal);
  EXPECT_EQ(filters[1].value, "usb");
  EXPECT_TRUE(parse_rule("").empty());
  EXPECT_TRUE(parse_rule("   ").empty());
  EXPECT_EQ(parse_rule(R"(KERNEL=="a",)").size(), 1u) << "a trailing comma, as udev allows";
}

TEST(UdevRule, QuotesInsideValuesAndBackslashesForTheGlob) {
  EXPECT_EQ(parse_rule(R"(ENV{X}=="say \"hi\"")").at(0).value, R"(say "hi")");
  EXPECT_EQ(parse_rule(R"(KERNEL=="a\*")").at(0).value, R"(a\*)");
  EXPECT_EQ(parse_rule(R"(ENV{a name}=="x,y")").at(0).key, "a name");
  EXPECT_EQ(parse_rule(R"(ATTR{device/vendor}=="0x8086")").at(0).key, "device/vendor");
}

struct Refused {
  std::string rule;
  size_t column;
  std::string reason;  // a part of the message
};

void expect_refused(const Refused& refused) {
  try {
    auto filters = parse_rule(refused.rule);
    ADD_FAILURE() << refused.rule << " was accepted with " << filters.size() << " filter(s)";
  } catch (const RuleError& e) {
    EXPECT_EQ(e.column(), refused.column) << refused.rule << ": " << e.what();
    EXPECT_NE(e.reason().find(refused.reason), std::string::npos)
        << refused.rule << ": " << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("column " + std::to_string(e.column()) + ": ", 0), 0u);
  }
}

TEST(UdevRule, AssignmentOperatorsAreRefusedAtTheOperator) {
  for (std::string op : {"+=", "-=", "=", ":="}) {
    expect_refused(
        {"TAG" + op + "\"uaccess\"", 4, "assignment operator '" + op + "' is not supported"});
  }
  expect_refused({R"(KERNEL=="x", ENV{A}="1")", 20, "assignment operator '='"});
}

TEST(UdevRule, ActionFieldsAreRefusedAtTheField) {
  for (std::string rule :
       {R"(LABEL="x")", R"(GOTO="x")", R"(IMPORT{program}="x")", R"(OPTIONS="x")", R"(OWNER="x")",
        R"(GROUP="x")", R"(MODE="0660")", R"(WAIT_FOR="x")", R"(RUN{builtin}+="uaccess")"}) {
    expect_refused({rule, 1, "is a udev action, not a match"});
  }
  expect_refused({R"(KERNEL=="x", MODE="0660")", 14, "'MODE' is a udev action"});
}

TEST(UdevRule, UnsupportedMatchFieldsAreRefusedAtTheField) {
  for (std::string rule : {R"(ACTION=="add")", R"(NAME=="x")", R"(PROGRAM=="x")", R"(RESULT=="x")",
                           R"(CONST{arch}=="x86-64")", R"(SYSCTL{kernel.x}=="1")",
                           R"(SYMLINK+="x")", R"(TEST{key}=="value)", R"(SECLABEL{key}=="value)"}) {
    expect_refused({rule, 1, "is not supported for discovery"});
  }
}

TEST(UdevRule, MalformedRulesAreRefusedWithThePlace) {
  const std::vector<Refused> cases = {
      {R"(KERNAL=="x")", 1, "unknown field 'KERNAL'"},
      {R"(kernel=="x")", 1, "unknown field 'kernel'"},
      {R"(KERNEL=="x" SUBSYSTEM=="y")", 13, "expected ',' before the next filter"},
      {R"(KERNEL=="x"SUBSYSTEM=="y")", 12, "expected ','"},
      {R"(KERNEL=="unterminated)", 9, "no closing '\"'"},
      {R"(KERNEL==x)", 9, "expected a double-quoted value"},
      {R"(KERNEL=='x')", 9, "expected a double-quoted value"},
      {R"(KERNEL)", 7, "expected == or != after KERNEL, found the end of the rule"},
      {R"(KERNEL<"x")", 7, "expected == or != after KERNEL, found '<'"},
      {R"(ATTR=="x")", 5, "ATTR needs a key"},
      {R"(ENV{}=="x")", 4, "ENV{} has an empty key"},
      {R"(ATTRS{idVendor=="x")", 6, "'{' after ATTRS is not closed"},
      {R"(KERNEL{x}=="y")", 7, "KERNEL takes no {key}"},
      {R"(ATTR{../../etc/shadow}=="x")", 5, "outside the device's sysfs directory"},
      {R"(ATTRS{/etc/shadow}=="x")", 6, "outside the device's sysfs directory"},
      {R"(=="x")", 1, "expected a field name"},
      {std::string("KERNEL==\"a\0b\"", 13), 11, "NUL byte"},
      {std::string("\x01"), 1, "found byte 0x01"},
  };
  for (const auto& refused : cases) expect_refused(refused);
}

TEST(UdevRule, ToTextGivesTheSameFiltersBack) {
  std::string rule = R"(ATTRS{a b}!="x\"y\*", KERNEL=="video*|vbi*", TAGS=="")";
  auto filters = parse_rule(rule);
  std::string text;
  for (const auto& f : filters) text += (text.empty() ? "" : ", ") + to_text(f);
  EXPECT_EQ(text, rule);
  EXPECT_EQ(parse_rule(text), filters);
}

}  // namespace
}  // namespace udev_handler
