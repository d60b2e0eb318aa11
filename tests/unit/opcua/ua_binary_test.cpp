// Built-in types of the OPC UA binary encoding, byte by byte (Part 6, 5.2).
#include "codec_test_support.hpp"

namespace opcua::test {
namespace {

using ua::DecodeError;
using ua::NodeId;
using ua::NodeIdKind;
using ua::Reader;
using ua::Writer;

TEST(UaBinary, IntegersAreLittleEndian) {
  Writer out;
  out.uint16(0x0102);
  out.uint32(0x03040506);
  out.int32(-2);
  out.int64(0x0708090a0b0c0d0e);
  EXPECT_EQ(out.bytes(), hex("0201 06050403 feffffff 0e0d0c0b0a090807"));

  Reader in(out.bytes());
  EXPECT_EQ(in.uint16(), 0x0102);
  EXPECT_EQ(in.uint32(), 0x03040506u);
  EXPECT_EQ(in.int32(), -2);
  EXPECT_EQ(in.int64(), 0x0708090a0b0c0d0e);
  EXPECT_EQ(in.remaining(), 0u);
}

TEST(UaBinary, StringsAreLengthPrefixedAndNullIsMinusOne) {
  Writer out;
  out.string("abc");
  out.string("");
  out.null_string();
  EXPECT_EQ(out.bytes(), hex("03000000 616263 | 00000000 | ffffffff"));

  Reader in(out.bytes());
  EXPECT_EQ(in.string(), "abc");
  EXPECT_EQ(in.string(), "");
  EXPECT_EQ(in.string(), "") << "null reads as empty";
}

TEST(UaBinary, StringLengthsAreCheckedBeforeReading) {
  EXPECT_THROW(Reader(hex("feffffff")).string(), DecodeError) << "-2 is not a length";
  EXPECT_THROW(Reader(hex("04000000 616263")).string(), DecodeError) << "one byte short";
  EXPECT_THROW(Reader(hex("ffffff7f")).string(), DecodeError) << "2 GiB claimed, 0 there";
  EXPECT_THROW(Reader(hex("0100")).string(), DecodeError) << "truncated length";
}

TEST(UaBinary, NumericNodeIdsTakeTheirShortestForm) {
  Writer out;
  out.node_id(ua::standard_node_id(0));
  out.node_id(ua::standard_node_id(446));
  out.node_id(ua::standard_node_id(70000));
  out.node_id(NodeId{300, NodeIdKind::numeric, 5});
  EXPECT_EQ(out.bytes(), hex("00 00 | 01 00 be01 | 02 0000 70110100 | 02 2c01 05000000"));

  Reader in(out.bytes());
  EXPECT_EQ(in.node_id(), ua::standard_node_id(0));
  EXPECT_EQ(in.node_id(), ua::standard_node_id(446));
  EXPECT_EQ(in.node_id(), ua::standard_node_id(70000));
  EXPECT_EQ(in.node_id(), (NodeId{300, NodeIdKind::numeric, 5}));
}

TEST(UaBinary, OtherNodeIdFormsAreConsumed) {
  // String "ab" in ns 1, a Guid in ns 2, a ByteString in ns 3, then a byte.
  ua::Bytes bytes =
      hex("03 0100 02000000 6162 | 04 0200 00112233445566778899aabbccddeeff | 05 0300 01000000 ff |"
          " 2a");
  Reader in(bytes);
  EXPECT_EQ(in.node_id().kind, NodeIdKind::string);
  EXPECT_EQ(in.node_id().kind, NodeIdKind::guid);
  NodeId byte_string = in.node_id();
  EXPECT_EQ(byte_string.kind, NodeIdKind::byte_string);
  EXPECT_EQ(byte_string.namespace_index, 3);
  EXPECT_EQ(in.byte(), 0x2a);
}

TEST(UaBinary, MalformedNodeIdsAreRefused) {
  EXPECT_THROW(Reader(hex("06 00")).node_id(), DecodeError) << "unknown encoding";
  EXPECT_THROW(Reader(hex("80 00")).node_id(), DecodeError) << "expanded flag on a NodeId";
  EXPECT_THROW(Reader(hex("04 0000 0011")).node_id(), DecodeError) << "short Guid";
}

TEST(UaBinary, ExpandedNodeIdSkipsNamespaceUriAndServerIndex) {
  ua::Bytes bytes = hex("c1 00 be01 | 03000000 75726e | 07000000 | 2a");
  Reader in(bytes);
  EXPECT_EQ(in.expanded_node_id(), ua::standard_node_id(446));
  EXPECT_EQ(in.byte(), 0x2a);
}

TEST(UaBinary, LocalizedTextCarriesOnlyWhatItsMaskSays) {
  Writer out;
  out.localized_text({"en", "Pump"});
  out.localized_text({"", "B"});
  out.localized_text({});
  EXPECT_EQ(out.bytes(), hex("03 02000000 656e 04000000 50756d70 | 02 01000000 42 | 00"));
  Reader in(out.bytes());
  EXPECT_EQ(in.localized_text(), (ua::LocalizedText{"en", "Pump"}));
  EXPECT_EQ(in.localized_text(), (ua::LocalizedText{"", "B"}));
  EXPECT_EQ(in.localized_text(), ua::LocalizedText{});
}

TEST(UaBinary, ArrayCountsAreCheckedAgainstCapAndBytesLeft) {
  EXPECT_EQ(Reader(hex("ffffffff")).string_array().size(), 0u) << "null array";
  EXPECT_EQ(Reader(hex("02000000 01000000 61 00000000")).string_array(),
            (std::vector<std::string>{"a", ""}));
  EXPECT_THROW(Reader(hex("feffffff")).string_array(), DecodeError) << "negative count";
  // A million strings claimed by 8 bytes: refused before any allocation.
  EXPECT_THROW(Reader(hex("40420f00 00000000")).string_array(), DecodeError);
  ua::Bytes huge = hex("01000100");  // 65537 items: over the cap even if the bytes were there
  huge.resize(4 + 65537 * 4, 0);
  EXPECT_THROW(Reader(huge).string_array(), DecodeError);
}

TEST(UaBinary, ExtensionObjectsAreSkippedByTheirEncoding) {
  ua::Bytes bytes = hex("00 00 00 | 01 00 1601 01 02000000 abcd | 01 00 1601 02 00000000 | 2a");
  Reader in(bytes);
  in.skip_extension_object();
  in.skip_extension_object();
  in.skip_extension_object();
  EXPECT_EQ(in.byte(), 0x2a);
  EXPECT_THROW(Reader(hex("00 00 03")).skip_extension_object(), DecodeError);
  EXPECT_THROW(Reader(hex("00 00 01 05000000 ab")).skip_extension_object(), DecodeError);
}

TEST(UaBinary, DiagnosticInfoFieldsAndNestingAreRead) {
  // Every field, with one inner DiagnosticInfo that has only a symbolic id.
  ua::Bytes bytes =
      hex("7f 01000000 02000000 03000000 04000000 01000000 61 0000a080 | 01 05000000 | 2a");
  Reader in(bytes);
  in.skip_diagnostic_info();
  EXPECT_EQ(in.byte(), 0x2a);
}

TEST(UaBinary, DiagnosticInfoNestingIsBounded) {
  ua::Bytes nested(ua::kMaxDiagnosticNesting, 0x40);  // each has an inner one
  nested.push_back(0x00);
  EXPECT_NO_THROW(Reader(nested).skip_diagnostic_info());
  ua::Bytes too_deep(10000, 0x40);
  too_deep.push_back(0x00);
  EXPECT_THROW(Reader(too_deep).skip_diagnostic_info(), DecodeError);
}

TEST(UaBinary, ExpectEndRefusesTrailingBytes) {
  ua::Bytes bytes = hex("01 02");
  Reader in(bytes);
  (void)in.byte();
  EXPECT_THROW(in.expect_end("test"), DecodeError);
  (void)in.byte();
  EXPECT_NO_THROW(in.expect_end("test"));
}

}  // namespace
}  // namespace opcua::test
