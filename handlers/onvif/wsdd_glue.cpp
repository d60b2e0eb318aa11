// gSOAP glue of the handler: the namespace table, and the wsddapi event
// handlers, which pass what the handler listens for to the WsddEvents object
// in soap->user. The handler is a WS-Discovery client only: it answers no
// Probe or Resolve.
#include "wsdd_events.hpp"

#include "wsddapi.h"

#include "Device.nsmap"  // NOLINT(bugprone-suspicious-include): the generated namespace table

namespace {

onvif::WsddEvents* events_of(struct soap* soap) {
  return static_cast<onvif::WsddEvents*>(soap->user);
}

std::string text(const char* value) { return value != nullptr ? value : ""; }

onvif::Announcement announcement(const char* endpoint, const char* types, const char* scopes,
                                 const char* xaddrs) {
  return {text(endpoint), onvif::split_list(text(types)), onvif::split_list(text(scopes)),
          onvif::split_list(text(xaddrs))};
}

}  // namespace

void wsdd_event_Hello(struct soap* soap, unsigned int /*InstanceId*/, const char* /*SequenceId*/,
                      unsigned int /*MessageNumber*/, const char* /*MessageID*/,
                      const char* /*RelatesTo*/, const char* EndpointReference, const char* Types,
                      const char* Scopes, const char* /*MatchBy*/, const char* XAddrs,
                      unsigned int /*MetadataVersion*/) {
  if (auto* events = events_of(soap))
    events->hello(announcement(EndpointReference, Types, Scopes, XAddrs));
}

void wsdd_event_Bye(struct soap* soap, unsigned int /*InstanceId*/, const char* /*SequenceId*/,
                    unsigned int /*MessageNumber*/, const char* /*MessageID*/,
                    const char* /*RelatesTo*/, const char* EndpointReference, const char* /*Types*/,
                    const char* /*Scopes*/, const char* /*MatchBy*/, const char* /*XAddrs*/,
                    unsigned int* /*MetadataVersion*/) {
  if (auto* events = events_of(soap)) events->bye(text(EndpointReference));
}

soap_wsdd_mode wsdd_event_Probe(struct soap* /*soap*/, const char* /*MessageID*/,
                                const char* /*ReplyTo*/, const char* /*Types*/,
                                const char* /*Scopes*/, const char* /*MatchBy*/,
                                struct wsdd__ProbeMatchesType* /*ProbeMatches*/) {
  return SOAP_WSDD_ADHOC;  // not a target service: no answer
}

void wsdd_event_ProbeMatches(struct soap* soap, unsigned int /*InstanceId*/,
                             const char* /*SequenceId*/, unsigned int /*MessageNumber*/,
                             const char* /*MessageID*/, const char* /*RelatesTo*/,
                             struct wsdd__ProbeMatchesType* ProbeMatches) {
  auto* events = events_of(soap);
  if (events == nullptr || ProbeMatches == nullptr) return;
  for (int i = 0; i < ProbeMatches->__sizeProbeMatch; ++i) {
    const wsdd__ProbeMatchType& match = ProbeMatches->ProbeMatch[i];
    events->probe_match(announcement(match.wsa__EndpointReference.Address, match.Types,
                                     match.Scopes != nullptr ? match.Scopes->__item : nullptr,
                                     match.XAddrs));
  }
}

soap_wsdd_mode wsdd_event_Resolve(struct soap* /*soap*/, const char* /*MessageID*/,
                                  const char* /*ReplyTo*/, const char* /*EndpointReference*/,
                                  struct wsdd__ResolveMatchType* /*match*/) {
  return SOAP_WSDD_ADHOC;
}

void wsdd_event_ResolveMatches(struct soap* /*soap*/, unsigned int /*InstanceId*/,
                               const char* /*SequenceId*/, unsigned int /*MessageNumber*/,
                               const char* /*MessageID*/, const char* /*RelatesTo*/,
                               struct wsdd__ResolveMatchType* /*match*/) {}
