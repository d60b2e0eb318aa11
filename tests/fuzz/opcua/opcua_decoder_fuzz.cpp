// libFuzzer target over the OPC UA decoder: every input goes through each
// entry point a server's bytes can reach. Only DecodeError and StatusError
// may come out; any other exception, crash, leak or undefined behaviour is
// a finding.
#include "ua_services.hpp"
#include "ua_transport.hpp"

#include <cstddef>
#include <cstdint>

namespace {

using namespace opcua::ua;

template <typename Decode>
void expect_only_decode_errors(Decode decode) {
  try {
    decode();
  } catch (const DecodeError&) {
  } catch (const StatusError&) {
  }
}

void decode_bodies(ByteView body) {
  expect_only_decode_errors([&] { decode_open_secure_channel_response(body); });
  expect_only_decode_errors([&] { decode_find_servers_response(body); });
  expect_only_decode_errors([&] { decode_get_endpoints_response(body); });
  expect_only_decode_errors([&] { decode_request_handle(body); });
}

void decode_transport(ByteView bytes) {
  expect_only_decode_errors([&] { decode_header(bytes); });
  if (bytes.size() < kHeaderSize) return;
  ByteView body = bytes.subspan(kHeaderSize);
  expect_only_decode_errors([&] { decode_hello(body); });
  expect_only_decode_errors([&] {
    TransportLimits hello{0, 65536, 65536, 0, 0};
    check_acknowledge(hello, decode_acknowledge(body));
  });
  expect_only_decode_errors([&] { decode_error_message(body); });
}

// A chunk as the client reads it, then its body as a response.
void decode_as_chunk(ByteView bytes) {
  expect_only_decode_errors([&] {
    Chunk chunk = decode_chunk(bytes);
    MessageAssembler assembler(1u << 20, 16);
    if (assembler.add(chunk)) decode_bodies(assembler.take());
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteView bytes(data, size);
  decode_transport(bytes);
  decode_as_chunk(bytes);
  decode_bodies(bytes);
  return 0;
}
