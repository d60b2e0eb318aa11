// Where the WS-Discovery event handlers (wsdd_event_*, called by gSOAP's
// wsddapi plugin) deliver what they hear: the object set as soap->user of
// the UDP context that received the message.
#ifndef DOWSER_HANDLERS_ONVIF_WSDD_EVENTS_HPP
#define DOWSER_HANDLERS_ONVIF_WSDD_EVENTS_HPP

#include "announcement.hpp"

#include <string>

namespace onvif {

class WsddEvents {
 public:
  virtual void probe_match(Announcement camera) = 0;
  virtual void hello(Announcement camera) = 0;
  virtual void bye(const std::string& endpoint) = 0;

 protected:
  ~WsddEvents() = default;
};

}  // namespace onvif

#endif  // DOWSER_HANDLERS_ONVIF_WSDD_EVENTS_HPP
