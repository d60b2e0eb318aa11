// A fleet of simulated ONVIF cameras in one process, built with gSOAP (so
// GPL-2.0-or-later, see LICENSE here). It answers WS-Discovery Probes (one
// ProbeMatches per camera, as real cameras do), sends Hello and Bye, and
// serves GetSystemDateAndTime, GetNetworkInterfaces, GetDeviceInformation,
// GetServices, GetProfiles, GetVideoSources and GetStreamUri over HTTP (or
// HTTPS, with a certificate given) with Content-Length, checking WS-Security
// PasswordDigest tokens. See README.md.
#include "wsddapi.h"

#include "Device.nsmap"  // NOLINT(bugprone-suspicious-include): the generated namespace table

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr const char* kGroup = "239.255.255.250";
constexpr const char* kTypes = "dn:NetworkVideoTransmitter tds:Device";
constexpr const char* kMediaNamespace = "http://www.onvif.org/ver10/media/wsdl";
constexpr const char* kDeviceNamespace = "http://www.onvif.org/ver10/device/wsdl";

struct Profile {
  std::string token;
  std::string uri;
};

struct Camera {
  std::string name;
  std::string uuid;
  std::string manufacturer = "dowser test lab";
  std::string model = "SimCam";
  std::string serial;
  std::string firmware = "1.0";
  std::string hardware_id = "sim";
  std::vector<std::string> scopes;
  std::string ip;
  std::string mac;
  std::optional<std::string> username;
  std::string password;
  std::vector<Profile> profiles;
  bool online = true;
  bool services_up = true;     // false: every call but GetSystemDateAndTime fails
  bool services_hang = false;  // true: those calls are never answered
};

struct Simulator {
  std::vector<Camera> cameras;
  std::string http_base;  // http://host:port or https://host:port
  bool multicast = false;
  bool tls = false;  // the device and media services speak HTTPS
  soap* udp = nullptr;
  soap* http = nullptr;
  size_t probes_answered = 0;
  std::vector<int> held_connections;  // of services-hang calls, never answered
};

Simulator& simulator(soap* context) { return *static_cast<Simulator*>(context->user); }

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : " ") + item;
  return text;
}

std::string device_url(const Simulator& sim, const Camera& camera) {
  return sim.http_base + "/onvif/" + camera.name + "/device_service";
}

std::string media_url(const Simulator& sim, const Camera& camera) {
  return sim.http_base + "/onvif/" + camera.name + "/media_service";
}

// ---- configuration --------------------------------------------------------

Camera camera_from_json(const nlohmann::json& entry, size_t index) {
  Camera camera;
  camera.name = entry.value("name", "cam" + std::to_string(index));
  char uuid[40];
  std::snprintf(uuid, sizeof uuid, "5e1f0000-0000-4000-8000-%012zx", index);
  camera.uuid = entry.value("uuid", std::string(uuid));
  camera.manufacturer = entry.value("manufacturer", camera.manufacturer);
  camera.model = entry.value("model", camera.model);
  camera.serial = entry.value("serial", "SN-" + camera.name);
  camera.firmware = entry.value("firmware", camera.firmware);
  camera.hardware_id = entry.value("hardware_id", camera.hardware_id);
  camera.scopes =
      entry.value("scopes", std::vector<std::string>{"onvif://www.onvif.org/type/video_encoder",
                                                     "onvif://www.onvif.org/name/" + camera.name});
  camera.ip = entry.value(
      "ip", "10.0." + std::to_string(index / 250) + "." + std::to_string(index % 250 + 1));
  char mac[20];
  std::snprintf(mac, sizeof mac, "02:00:00:00:%02zx:%02zx", (index >> 8) & 0xff, index & 0xff);
  camera.mac = entry.value("mac", std::string(mac));
  if (entry.contains("username")) camera.username = entry["username"].get<std::string>();
  camera.password = entry.value("password", "");
  if (entry.contains("profiles")) {
    for (const auto& profile : entry["profiles"])
      camera.profiles.push_back({profile.at("token"), profile.at("uri")});
  } else {
    camera.profiles.push_back(
        {"profile_1", "rtsp://" + camera.ip + ":554/" + camera.name + "/main"});
    camera.profiles.push_back(
        {"profile_2", "rtsp://" + camera.ip + ":554/" + camera.name + "/sub"});
  }
  return camera;
}

std::vector<Camera> load_cameras(const std::string& file, int count) {
  std::vector<Camera> cameras;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read " + file);
    auto config = nlohmann::json::parse(in);
    for (const auto& entry : config.at("cameras"))
      cameras.push_back(camera_from_json(entry, cameras.size()));
  }
  for (int i = 0; i < count; ++i)
    cameras.push_back(camera_from_json(nlohmann::json::object(), cameras.size()));
  return cameras;
}

// ---- WS-Security -----------------------------------------------------------

std::string base64(const unsigned char* bytes, size_t size) {
  std::string text(4 * ((size + 2) / 3) + 1, '\0');
  int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()), bytes, static_cast<int>(size));
  text.resize(static_cast<size_t>(n));
  return text;
}

std::optional<std::string> unbase64(const std::string& text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string bytes(text.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  bytes.resize(static_cast<size_t>(n));
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) bytes.pop_back();
  return bytes;
}

// PasswordDigest = Base64(SHA-1(nonce + created + password)).
bool token_valid(const _wsse__UsernameToken& token, const Camera& camera) {
  if (token.wsse__Username != *camera.username || token.wsse__Password == nullptr ||
      token.wsse__Nonce == nullptr || token.wsu__Created == nullptr)
    return false;
  auto nonce = unbase64(token.wsse__Nonce->__item);
  if (!nonce) return false;
  std::string input = *nonce + *token.wsu__Created + camera.password;
  std::array<unsigned char, SHA_DIGEST_LENGTH> digest{};
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest.data());
  return base64(digest.data(), digest.size()) == token.wsse__Password->__item;
}

// The camera a request's path names ("/onvif/<name>/..."), or a fault.
// `authenticated`: the operation needs a valid token when the camera has a user.
Camera* camera_for(soap* context, bool authenticated) {
  std::string path = context->path;
  const std::string prefix = "/onvif/";
  Camera* found = nullptr;
  if (path.rfind(prefix, 0) == 0) {
    std::string name = path.substr(prefix.size(), path.find('/', prefix.size()) - prefix.size());
    for (auto& camera : simulator(context).cameras)
      if (camera.name == name && camera.online) found = &camera;
  }
  const _wsse__Security* security =
      context->header != nullptr ? context->header->wsse__Security : nullptr;
  context->header = nullptr;  // never echo the client's header back
  if (found == nullptr) {
    soap_sender_fault(context, "no such camera", path.c_str());
    return nullptr;
  }
  if (authenticated && !found->services_up) {
    soap_receiver_fault(context, "service unavailable", nullptr);
    return nullptr;
  }
  if (authenticated && found->services_hang) {
    // No answer, and the connection kept open (taken from gSOAP, which would
    // shut it down): the client waits for its timeout.
    simulator(context).held_connections.push_back(context->socket);
    context->socket = SOAP_INVALID_SOCKET;
    std::cout << "HUNG " << found->name << std::endl;
    context->error = SOAP_STOP;
    return nullptr;
  }
  if (authenticated && found->username &&
      (security == nullptr || security->wsse__UsernameToken == nullptr ||
       !token_valid(*security->wsse__UsernameToken, *found))) {
    std::cout << "AUTH-FAILED " << found->name << std::endl;
    soap_sender_fault_subcode(context, "ter:NotAuthorized", "Sender not Authorized", nullptr);
    return nullptr;
  }
  return found;
}

// ---- WS-Discovery ------------------------------------------------------------

std::string peer_endpoint(soap* context) {
  std::array<char, INET6_ADDRSTRLEN> host{};
  int port = 0;
  const auto* peer = reinterpret_cast<const sockaddr*>(&context->peer);
  if (peer->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(peer);
    ::inet_ntop(AF_INET, &v4->sin_addr, host.data(), host.size());
    port = ntohs(v4->sin_port);
  }
  return "soap.udp://" + std::string(host.data()) + ":" + std::to_string(port);
}

void announce(Simulator& sim, const Camera& camera, bool hello) {
  if (!sim.multicast) return;
  std::string to = "soap.udp://" + std::string(kGroup) + ":3702";
  std::string reference = "urn:uuid:" + camera.uuid;
  std::string scopes = join(camera.scopes);
  std::string xaddrs = device_url(sim, camera);
  const char* id = soap_wsa_rand_uuid(sim.udp);
  if (hello) {
    soap_wsdd_Hello(sim.udp, SOAP_WSDD_ADHOC, to.c_str(), id, nullptr, reference.c_str(), kTypes,
                    scopes.c_str(), nullptr, xaddrs.c_str(), 1);
  } else {
    soap_wsdd_Bye(sim.udp, SOAP_WSDD_ADHOC, to.c_str(), id, reference.c_str(), kTypes,
                  scopes.c_str(), nullptr, xaddrs.c_str(), 1);
  }
  soap_destroy(sim.udp);
  soap_end(sim.udp);
}

}  // namespace

// Each online camera answers for itself with its own ProbeMatches.
soap_wsdd_mode wsdd_event_Probe(struct soap* soap, const char* MessageID, const char* /*ReplyTo*/,
                                const char* Types, const char* /*Scopes*/, const char* /*MatchBy*/,
                                struct wsdd__ProbeMatchesType* /*matches*/) {
  Simulator& sim = simulator(soap);
  std::string types = Types != nullptr ? Types : "";
  if (!types.empty() && types.find("NetworkVideoTransmitter") == std::string::npos &&
      types.find("Device") == std::string::npos)
    return SOAP_WSDD_ADHOC;
  std::string relates_to = MessageID != nullptr ? MessageID : "";
  std::string reply_to = peer_endpoint(soap);
  for (const auto& camera : sim.cameras) {
    if (!camera.online) continue;
    wsdd__ProbeMatchesType matches;
    soap_wsdd_init_ProbeMatches(soap, &matches);
    // add_ProbeMatch keeps the pointers: the strings must outlive the send.
    std::string reference = "urn:uuid:" + camera.uuid;
    std::string scopes = join(camera.scopes);
    std::string xaddrs = device_url(sim, camera);
    soap_wsdd_add_ProbeMatch(soap, &matches, reference.c_str(), kTypes, scopes.c_str(), nullptr,
                             xaddrs.c_str(), 1);
    soap_wsdd_ProbeMatches(soap, reply_to.c_str(), soap_wsa_rand_uuid(soap), relates_to.c_str(),
                           nullptr, &matches);
  }
  std::cout << "PROBED " << ++sim.probes_answered << std::endl;  // tests count discovery passes
  return SOAP_WSDD_ADHOC;                                        // already answered
}

void wsdd_event_ProbeMatches(struct soap*, unsigned int, const char*, unsigned int, const char*,
                             const char*, struct wsdd__ProbeMatchesType*) {}
void wsdd_event_Hello(struct soap*, unsigned int, const char*, unsigned int, const char*,
                      const char*, const char*, const char*, const char*, const char*, const char*,
                      unsigned int) {}
void wsdd_event_Bye(struct soap*, unsigned int, const char*, unsigned int, const char*, const char*,
                    const char*, const char*, const char*, const char*, const char*,
                    unsigned int*) {}
soap_wsdd_mode wsdd_event_Resolve(struct soap*, const char*, const char*, const char*,
                                  struct wsdd__ResolveMatchType*) {
  return SOAP_WSDD_ADHOC;
}
void wsdd_event_ResolveMatches(struct soap*, unsigned int, const char*, unsigned int, const char*,
                               const char*, struct wsdd__ResolveMatchType*) {}
int SOAP_ENV__Fault(struct soap*, char*, char*, char*, struct SOAP_ENV__Detail*,
                    struct SOAP_ENV__Code*, struct SOAP_ENV__Reason*, char*, char*,
                    struct SOAP_ENV__Detail*) {
  return SOAP_OK;
}

// ---- device and media services ------------------------------------------------

int __tds__GetSystemDateAndTime(struct soap* soap, _tds__GetSystemDateAndTime*,
                                _tds__GetSystemDateAndTimeResponse& response) {
  if (camera_for(soap, false) == nullptr) return soap->error;
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  auto* when = soap_new_tt__SystemDateTime(soap);
  when->tt__DateTimeType = "Manual";
  when->tt__DaylightSavings = false;
  when->tt__TimeZone = soap_new_tt__TimeZone(soap);
  when->tt__TimeZone->tt__TZ = "UTC0";
  when->tt__UTCDateTime = soap_new_tt__DateTime(soap);
  when->tt__UTCDateTime->tt__Date = soap_new_tt__Date(soap);
  when->tt__UTCDateTime->tt__Date->tt__Year = utc.tm_year + 1900;
  when->tt__UTCDateTime->tt__Date->tt__Month = utc.tm_mon + 1;
  when->tt__UTCDateTime->tt__Date->tt__Day = utc.tm_mday;
  when->tt__UTCDateTime->tt__Time = soap_new_tt__Time(soap);
  when->tt__UTCDateTime->tt__Time->tt__Hour = utc.tm_hour;
  when->tt__UTCDateTime->tt__Time->tt__Minute = utc.tm_min;
  when->tt__UTCDateTime->tt__Time->tt__Second = utc.tm_sec;
  response.tds__SystemDateAndTime = when;
  return SOAP_OK;
}

int __tds__GetNetworkInterfaces(struct soap* soap, _tds__GetNetworkInterfaces*,
                                _tds__GetNetworkInterfacesResponse& response) {
  Camera* camera = camera_for(soap, true);
  if (camera == nullptr) return soap->error;
  tt__NetworkInterface interface;
  interface.token = "eth0";
  interface.tt__Enabled = true;
  interface.tt__Info = soap_new_tt__NetworkInterfaceInfo(soap);
  interface.tt__Info->tt__Name = soap_new_std__string(soap);
  *interface.tt__Info->tt__Name = "eth0";
  interface.tt__Info->tt__HwAddress = camera->mac;
  interface.tt__IPv4 = soap_new_tt__IPv4NetworkInterface(soap);
  interface.tt__IPv4->tt__Enabled = true;
  interface.tt__IPv4->tt__Config = soap_new_tt__IPv4Configuration(soap);
  tt__PrefixedIPv4Address address;
  address.tt__Address = camera->ip;
  address.tt__PrefixLength = 24;
  interface.tt__IPv4->tt__Config->tt__Manual.push_back(address);
  interface.tt__IPv4->tt__Config->tt__DHCP = false;
  response.tds__NetworkInterfaces.push_back(interface);
  return SOAP_OK;
}

int __tds__GetDeviceInformation(struct soap* soap, _tds__GetDeviceInformation*,
                                _tds__GetDeviceInformationResponse& response) {
  Camera* camera = camera_for(soap, true);
  if (camera == nullptr) return soap->error;
  response.tds__Manufacturer = camera->manufacturer;
  response.tds__Model = camera->model;
  response.tds__FirmwareVersion = camera->firmware;
  response.tds__SerialNumber = camera->serial;
  response.tds__HardwareId = camera->hardware_id;
  return SOAP_OK;
}

int __tds__GetServices(struct soap* soap, _tds__GetServices*, _tds__GetServicesResponse& response) {
  Camera* camera = camera_for(soap, false);
  if (camera == nullptr) return soap->error;
  const Simulator& sim = simulator(soap);
  for (const auto& [space, url] : {std::pair{kDeviceNamespace, device_url(sim, *camera)},
                                   std::pair{kMediaNamespace, media_url(sim, *camera)}}) {
    tds__Service service;
    service.tds__Namespace = space;
    service.tds__XAddr = url;
    service.tds__Version = soap_new_tt__OnvifVersion(soap);
    service.tds__Version->tt__Major = 2;
    service.tds__Version->tt__Minor = 60;
    response.tds__Service.push_back(service);
  }
  return SOAP_OK;
}

int __trt__GetProfiles(struct soap* soap, _trt__GetProfiles*, _trt__GetProfilesResponse& response) {
  Camera* camera = camera_for(soap, true);
  if (camera == nullptr) return soap->error;
  for (const auto& source : camera->profiles) {
    tt__Profile profile;
    profile.token = source.token;
    profile.tt__Name = source.token;
    profile.tt__VideoSourceConfiguration = soap_new_tt__VideoSourceConfiguration(soap);
    profile.tt__VideoSourceConfiguration->token = "vsc_1";
    profile.tt__VideoSourceConfiguration->tt__Name = "video source 1";
    profile.tt__VideoSourceConfiguration->tt__UseCount = static_cast<int>(camera->profiles.size());
    profile.tt__VideoSourceConfiguration->tt__SourceToken = "vs_1";
    profile.tt__VideoSourceConfiguration->tt__Bounds = soap_new_tt__IntRectangle(soap);
    profile.tt__VideoSourceConfiguration->tt__Bounds->width = 1920;
    profile.tt__VideoSourceConfiguration->tt__Bounds->height = 1080;
    profile.tt__VideoEncoderConfiguration = soap_new_tt__VideoEncoderConfiguration(soap);
    profile.tt__VideoEncoderConfiguration->token = "vec_" + source.token;
    profile.tt__VideoEncoderConfiguration->tt__Name = source.token;
    profile.tt__VideoEncoderConfiguration->tt__UseCount = 1;
    profile.tt__VideoEncoderConfiguration->tt__Encoding = "H264";
    profile.tt__VideoEncoderConfiguration->tt__Resolution = soap_new_tt__VideoResolution(soap);
    profile.tt__VideoEncoderConfiguration->tt__Resolution->tt__Width = 1920;
    profile.tt__VideoEncoderConfiguration->tt__Resolution->tt__Height = 1080;
    profile.tt__VideoEncoderConfiguration->tt__Quality = 5;
    response.trt__Profiles.push_back(profile);
  }
  return SOAP_OK;
}

int __trt__GetVideoSources(struct soap* soap, _trt__GetVideoSources*,
                           _trt__GetVideoSourcesResponse& response) {
  if (camera_for(soap, true) == nullptr) return soap->error;
  tt__VideoSource source;
  source.token = "vs_1";
  source.tt__Framerate = 25;
  source.tt__Resolution = soap_new_tt__VideoResolution(soap);
  source.tt__Resolution->tt__Width = 1920;
  source.tt__Resolution->tt__Height = 1080;
  response.trt__VideoSources.push_back(source);
  return SOAP_OK;
}

int __trt__GetStreamUri(struct soap* soap, _trt__GetStreamUri* request,
                        _trt__GetStreamUriResponse& response) {
  Camera* camera = camera_for(soap, true);
  if (camera == nullptr) return soap->error;
  for (const auto& profile : camera->profiles) {
    if (request == nullptr || profile.token != request->trt__ProfileToken) continue;
    response.trt__MediaUri = soap_new_tt__MediaUri(soap);
    response.trt__MediaUri->tt__Uri = profile.uri;
    response.trt__MediaUri->tt__Timeout = "PT0S";
    return SOAP_OK;
  }
  return soap_sender_fault_subcode(soap, "ter:InvalidArgVal", "No such profile", nullptr);
}

namespace {

soap* bound_context(int mode, const std::string& host, int port, Simulator& sim) {
  soap* context = soap_new1(mode | SOAP_C_UTFSTRING);
  context->user = &sim;
  context->bind_flags = SO_REUSEADDR;
  if (!soap_valid_socket(soap_bind(context, host.c_str(), port, 100))) {
    soap_print_fault(context, stderr);
    std::exit(1);
  }
  return context;
}

int local_port(int fd) {
  sockaddr_in address{};
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  return ntohs(address.sin_port);
}

Camera* named(Simulator& sim, const std::string& name) {
  for (auto& camera : sim.cameras)
    if (camera.name == name) return &camera;
  return nullptr;
}

// "bye NAME": goes offline after a Bye; "hello NAME": back online with a
// Hello; "silence NAME": offline without a word; "services-down NAME" /
// "services-up NAME": every call but GetSystemDateAndTime fails / works
// again; "services-hang NAME": those calls get no answer ("HUNG NAME" on
// stdout for each); "quit". Answers "OK ..." or "ERROR ...".
bool run_command(Simulator& sim, const std::string& line) {
  std::istringstream words(line);
  std::string verb, name;
  words >> verb >> name;
  if (verb == "quit") return false;
  Camera* camera = named(sim, name);
  bool presence = verb == "bye" || verb == "hello" || verb == "silence";
  if (camera == nullptr ||
      (!presence && verb != "services-down" && verb != "services-up" && verb != "services-hang")) {
    std::cout << "ERROR " << line << std::endl;
    return true;
  }
  if (presence) camera->online = verb == "hello";
  if (verb == "bye" || verb == "hello") announce(sim, *camera, verb == "hello");
  if (!presence) {
    camera->services_up = verb != "services-down";
    camera->services_hang = verb == "services-hang";
  }
  std::cout << "OK " << line << std::endl;
  return true;
}

// The HTTP service speaks TLS with this certificate (chain) and private key,
// both PEM. Clients are not asked for certificates.
void use_tls(Simulator& sim, const std::string& certificate, const std::string& key) {
  if (soap_ssl_server_context(sim.http, SOAP_SSL_NO_AUTHENTICATION, nullptr, nullptr, nullptr,
                              nullptr, nullptr, nullptr, nullptr) != SOAP_OK) {
    soap_print_fault(sim.http, stderr);
    std::exit(1);
  }
  // gSOAP reads one PEM holding both; `openssl req -x509` writes two files.
  SSL_CTX* context = sim.http->ctx;
  if (SSL_CTX_use_certificate_chain_file(context, certificate.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(context, key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(context) != 1) {
    std::cerr << "cannot use certificate " << certificate << " with key " << key << "\n";
    ERR_print_errors_fp(stderr);
    std::exit(1);
  }
  sim.tls = true;
}

// One request on one connection (after the TLS handshake, with TLS).
void serve_connection(Simulator& sim) {
  if (!soap_valid_socket(soap_accept(sim.http))) return;
  if (sim.tls && soap_ssl_accept(sim.http) != SOAP_OK) {
    soap_print_fault(sim.http, stderr);  // e.g. a client that gave up in the handshake
    soap_closesock(sim.http);
    return;
  }
  soap_serve(sim.http);
  soap_destroy(sim.http);
  soap_end(sim.http);
}

void serve(Simulator& sim) {
  std::string line;
  for (;;) {
    std::array<pollfd, 3> fds = {pollfd{STDIN_FILENO, POLLIN, 0},
                                 pollfd{sim.udp->master, POLLIN, 0},
                                 pollfd{sim.http->master, POLLIN, 0}};
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;
    if (fds[0].revents != 0) {
      if (!std::getline(std::cin, line) || !run_command(sim, line)) return;
    }
    if (fds[1].revents != 0) soap_wsdd_listen(sim.udp, -1000);
    if (fds[2].revents != 0) serve_connection(sim);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ONVIF camera simulator (gSOAP)"};
  std::string config, bind = "127.0.0.1", tls_certificate, tls_key;
  int count = 0, wsd_port = 0;
  bool multicast = false;
  app.add_option("--config", config,
                 "JSON file: {\"cameras\": [{name, uuid, scopes, ip, mac, ...}]}");
  app.add_option("--count", count, "add this many generated cameras");
  app.add_option("--bind", bind, "address of the HTTP service and unicast WS-Discovery");
  app.add_option("--wsd-port", wsd_port, "WS-Discovery UDP port (0: any; 3702 only in a netns)");
  app.add_flag("--multicast", multicast,
               "join 239.255.255.250 and send Hello/Bye (inside a private network namespace only)");
  auto* certificate_option =
      app.add_option("--tls-cert", tls_certificate,
                     "serve the device and media services over HTTPS with this certificate (PEM)");
  auto* key_option =
      app.add_option("--tls-key", tls_key, "the certificate's private key (PEM, unencrypted)");
  certificate_option->needs(key_option);
  key_option->needs(certificate_option);
  CLI11_PARSE(app, argc, argv);

  Simulator sim;
  sim.cameras = load_cameras(config, count);
  sim.multicast = multicast;
  sim.http = bound_context(SOAP_IO_DEFAULT, bind, 0, sim);
  sim.http->accept_timeout = 1;
  sim.http->recv_timeout = sim.http->send_timeout = 5;
  if (!tls_certificate.empty()) use_tls(sim, tls_certificate, tls_key);
  sim.http_base = (sim.tls ? "https://" : "http://") + bind + ":" +
                  std::to_string(local_port(sim.http->master));
  // Multicast datagrams reach only sockets bound to the wildcard address.
  sim.udp = bound_context(SOAP_IO_UDP, multicast ? "0.0.0.0" : bind, wsd_port, sim);
  if (multicast) {
    ip_mreqn group{};
    ::inet_pton(AF_INET, kGroup, &group.imr_multiaddr);
    if (::setsockopt(sim.udp->master, IPPROTO_IP, IP_ADD_MEMBERSHIP, &group, sizeof group) != 0) {
      std::perror("IP_ADD_MEMBERSHIP");
      return 1;
    }
  }
  for (const auto& camera : sim.cameras) announce(sim, camera, true);
  std::cout << "READY wsd=" << local_port(sim.udp->master)
            << " http=" << local_port(sim.http->master) << " cameras=" << sim.cameras.size()
            << std::endl;
  serve(sim);
  for (const auto& camera : sim.cameras)
    if (camera.online) announce(sim, camera, false);
  soap_free(sim.udp);
  soap_free(sim.http);
  return 0;
}
