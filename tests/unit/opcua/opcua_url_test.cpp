// opc.tcp URL parsing and the rewriting rule for advertised URLs.
#include "opcua_url.hpp"

#include <netdb.h>

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace opcua {
namespace {

OpcTcpUrl parsed(const std::string& text) {
  auto url = parse_opc_tcp_url(text);
  if (!url) throw std::invalid_argument(text);
  return *url;
}

TEST(OpcuaUrl, ParsesHostPortAndPath) {
  EXPECT_EQ(parsed("opc.tcp://10.0.0.5:4841/UA/Server"),
            (OpcTcpUrl{"10.0.0.5", 4841, "/UA/Server"}));
  EXPECT_EQ(parsed("OPC.TCP://Host"), (OpcTcpUrl{"Host", 4840, ""})) << "default port 4840";
  EXPECT_EQ(parsed("opc.tcp://localhost:4840/"), (OpcTcpUrl{"localhost", 4840, "/"}));
  EXPECT_EQ(parsed("opc.tcp://[::1]:48010"), (OpcTcpUrl{"::1", 48010, ""}));
}

TEST(OpcuaUrl, RefusesWhatIsNotAnOpcTcpUrl) {
  std::string why;
  for (const char* bad : {"http://h:80", "opc.tcp://", "opc.tcp://:4840", "opc.tcp://h:0",
                          "opc.tcp://h:65536", "opc.tcp://h:12ab", "opc.tcp://u@h:4840",
                          "opc.tcp://[::1", "opc.tcp://[::1]x", "opc.tcp://h:"}) {
    EXPECT_FALSE(parse_opc_tcp_url(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

TEST(OpcuaUrl, PrintsCanonically) {
  EXPECT_EQ(to_string(OpcTcpUrl{"h", 4840, ""}), "opc.tcp://h:4840");
  EXPECT_EQ(to_string(OpcTcpUrl{"fe80::1", 4841, "/x"}), "opc.tcp://[fe80::1]:4841/x");
}

TEST(OpcuaUrl, KnowsLoopbackHosts) {
  for (const char* host :
       {"localhost", "LOCALHOST", "localhost.", "app.localhost", "127.0.0.1", "127.1.2.3", "::1"})
    EXPECT_TRUE(is_loopback_host(host)) << host;
  for (const char* host : {"10.0.0.1", "128.0.0.1", "localhostx", "::2", "example.com"})
    EXPECT_FALSE(is_loopback_host(host)) << host;
}

// A resolver that answers every name with status (nothing here asks DNS).
Resolver answering(int status) {
  return [status](const char*, const char*, const addrinfo*, addrinfo**) { return status; };
}

TEST(OpcuaUrl, ResolvesNumericAddressesAndSaysWhenItCannotKnow) {
  Cancellation cancellation;
  EXPECT_EQ(resolves_with_getaddrinfo("127.0.0.1", cancellation), std::optional(true));
  EXPECT_EQ(resolves_with_getaddrinfo("plc1.factory", cancellation, answering(EAI_NONAME)),
            std::optional(false));
  EXPECT_EQ(resolves_with_getaddrinfo("plc1.factory", cancellation, answering(EAI_AGAIN)),
            std::nullopt);
  cancellation.cancel();
  EXPECT_EQ(resolves_with_getaddrinfo("127.0.0.1", cancellation), std::nullopt)
      << "a cancelled scan knows nothing";
}

TEST(OpcuaUrl, AResolverThatCannotSayGivesTheLastAnswerForThatName) {
  std::map<std::string, std::optional<bool>> answers;
  auto resolves =
      remembering_last_answers([&answers](const std::string& host) { return answers.at(host); });
  answers = {{"up", true}, {"gone", false}, {"never", std::nullopt}};
  EXPECT_TRUE(resolves("up"));
  EXPECT_FALSE(resolves("gone"));
  EXPECT_FALSE(resolves("never")) << "no answer yet: as on a node without DNS";

  answers = {{"up", std::nullopt}, {"gone", std::nullopt}, {"never", std::nullopt}};
  EXPECT_TRUE(resolves("up"));
  EXPECT_FALSE(resolves("gone"));
  EXPECT_FALSE(resolves("never"));

  answers = {{"up", false}, {"gone", true}};  // definite answers win
  EXPECT_FALSE(resolves("up"));
  EXPECT_TRUE(resolves("gone"));
  answers = {{"up", std::nullopt}, {"gone", std::nullopt}};
  EXPECT_FALSE(resolves("up"));
  EXPECT_TRUE(resolves("gone"));
}

// Names that do not resolve (an LDS may list any number) take no room; of
// those that do, at most kRememberedHosts are kept: the one that resolved
// longest ago goes first.
TEST(OpcuaUrl, RememberedNamesAreBounded) {
  std::optional<bool> answer = true;
  auto resolves = remembering_last_answers([&answer](const std::string&) { return answer; });
  const auto name = [](size_t i) { return "host" + std::to_string(i); };
  resolves("zz-first");
  answer = false;
  for (size_t i = 0; i < 2 * kRememberedHosts; ++i) resolves(name(i));
  answer = std::nullopt;
  EXPECT_TRUE(resolves("zz-first")) << "crowded out by names that do not resolve";

  answer = true;
  for (size_t i = 0; i < kRememberedHosts; ++i) resolves(name(i));  // one more than room
  resolves("aa-last");
  answer = std::nullopt;
  EXPECT_FALSE(resolves("zz-first")) << "the oldest goes, whatever its name";
  EXPECT_TRUE(resolves("aa-last"));
  size_t kept = 0;
  for (size_t i = 0; i < kRememberedHosts; ++i) kept += resolves(name(i)) ? 1 : 0;
  EXPECT_EQ(kept, kRememberedHosts - 1) << "host0 made room for aa-last";
  EXPECT_FALSE(resolves(name(0)));
}

// Resolves only the names given; nothing here touches DNS.
HostResolves resolves_only(std::set<std::string> names) {
  return [names](const std::string& host) { return names.contains(host); };
}

std::string rewritten(const std::string& advertised, const std::string& queried,
                      const HostResolves& resolves) {
  return reachable_url(advertised, parsed(advertised), parsed(queried), resolves);
}

TEST(OpcuaUrl, AResolvableUrlIsKeptAsSent) {
  auto all = resolves_only({"plc1.factory", "10.0.0.9", "localhost"});
  EXPECT_EQ(rewritten("opc.tcp://plc1.factory:4841/", "opc.tcp://10.0.0.5:4840", all),
            "opc.tcp://plc1.factory:4841/");
  EXPECT_EQ(rewritten("opc.tcp://10.0.0.9:4841", "opc.tcp://10.0.0.5:4840", all),
            "opc.tcp://10.0.0.9:4841");
}

TEST(OpcuaUrl, AnUnresolvableHostTakesTheQueriedHostKeepingPortAndPath) {
  auto none = resolves_only({});
  EXPECT_EQ(rewritten("opc.tcp://OPCTest.invalid:50000/OPCUA/Simulation",
                      "opc.tcp://192.168.0.1:50000", none),
            "opc.tcp://192.168.0.1:50000/OPCUA/Simulation");
  EXPECT_EQ(rewritten("opc.tcp://box:4842", "opc.tcp://lds.site:4840/", none),
            "opc.tcp://lds.site:4842");
}

TEST(OpcuaUrl, LocalhostFromARemoteLdsMeansTheLdsMachine) {
  auto all = resolves_only({"localhost", "127.0.0.1"});
  EXPECT_EQ(rewritten("opc.tcp://localhost:4841/a", "opc.tcp://10.0.0.5:4840", all),
            "opc.tcp://10.0.0.5:4841/a");
  EXPECT_EQ(rewritten("opc.tcp://127.0.0.1:4841", "opc.tcp://lds.site:4840", all),
            "opc.tcp://lds.site:4841");
}

TEST(OpcuaUrl, LocalhostFromALocalLdsStaysLocal) {
  auto all = resolves_only({"localhost", "127.0.0.1"});
  EXPECT_EQ(rewritten("opc.tcp://localhost:4841/a", "opc.tcp://127.0.0.1:4840", all),
            "opc.tcp://localhost:4841/a");
  EXPECT_EQ(rewritten("opc.tcp://127.0.0.1:4841", "opc.tcp://localhost:4840/", all),
            "opc.tcp://127.0.0.1:4841");
}

}  // namespace
}  // namespace opcua
