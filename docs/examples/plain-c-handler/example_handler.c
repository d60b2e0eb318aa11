/*
 * exampleC: a discovery handler in plain C99, built against the installed
 * dowser SDK. Its discovery details are a comma-separated list of ids, such
 * as "a,b"; each id becomes a device with the property EXAMPLE_ID=<id>.
 *
 * The device list never changes, so the handler reports it once, inside
 * start_discovery (allowed by rule T3), and needs no threads.
 */
#include <dowser/handler.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXAMPLE_NAME "exampleC"
#define EXAMPLE_VERSION "1.0.0"
#define EXAMPLE_PROPERTY "EXAMPLE_ID"

struct dowser_handler {
  const dowser_host_api* host;
  dowser_host_ctx* host_ctx;
};

/* Nothing runs between start and stop, so a session holds only its size. */
struct dowser_session {
  size_t device_count;
};

/* The ids of one request: views into its details text (borrowed, rule O1). */
typedef struct id_list {
  dowser_str* ids;
  size_t count;
} id_list;

static dowser_str make_str(const char* data, size_t len) {
  dowser_str s;
  s.data = data;
  s.len = len;
  return s;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

/* Trims spaces around one item of the list. */
static dowser_str trimmed(const char* begin, const char* end) {
  while (begin < end && is_space(*begin)) ++begin;
  while (end > begin && is_space(end[-1])) --end;
  return make_str(begin, (size_t)(end - begin));
}

/* Checks one id; on failure writes why to err and returns 0. */
static int check_id(dowser_str id, size_t index, const id_list* before, char* err, size_t err_cap) {
  size_t i;
  if (id.len == 0) {
    snprintf(err, err_cap, "discovery details: item %zu is empty (expected ids like \"a,b\")",
             index + 1);
    return 0;
  }
  for (i = 0; i < id.len; ++i) {
    if (!is_id_char(id.data[i])) {
      snprintf(err, err_cap,
               "discovery details: item %zu has a character other than letters, digits, "
               "'.', '_' or '-'",
               index + 1);
      return 0;
    }
  }
  for (i = 0; i < before->count; ++i) {
    if (before->ids[i].len == id.len && memcmp(before->ids[i].data, id.data, id.len) == 0) {
      snprintf(err, err_cap, "discovery details: id \"%.*s\" appears twice", (int)id.len, id.data);
      return 0;
    }
  }
  return 1;
}

/* Splits details at commas into out (freed with free(out->ids)). */
static dowser_status parse_ids(dowser_str details, id_list* out, char* err, size_t err_cap) {
  const char* end = details.data + details.len;
  const char* item = details.data;
  size_t capacity = 1;
  size_t i;
  out->ids = NULL;
  out->count = 0;
  if (trimmed(details.data, end).len == 0) {
    snprintf(err, err_cap, "discovery details are empty (expected ids like \"a,b\")");
    return DOWSER_ERR_INVALID_ARGUMENT;
  }
  for (i = 0; i < details.len; ++i) capacity += details.data[i] == ',';
  out->ids = malloc(capacity * sizeof *out->ids);
  if (out->ids == NULL) {
    snprintf(err, err_cap, "out of memory");
    return DOWSER_ERR_NO_MEMORY;
  }
  for (;;) {
    const char* comma = memchr(item, ',', (size_t)(end - item));
    const char* item_end = comma != NULL ? comma : end;
    dowser_str id = trimmed(item, item_end);
    if (!check_id(id, out->count, out, err, err_cap)) {
      free(out->ids);
      out->ids = NULL;
      return DOWSER_ERR_INVALID_ARGUMENT;
    }
    out->ids[out->count++] = id;
    if (comma == NULL) return DOWSER_OK;
    item = comma + 1;
  }
}

/* Reads the details of a request, honouring its struct_size (rule V3). */
static dowser_str request_details(const dowser_discover_request* request) {
  dowser_str none = make_str(NULL, 0);
  size_t needed = offsetof(dowser_discover_request, discovery_details) + sizeof(dowser_str);
  if (request == NULL || request->struct_size < needed) return none;
  return request->discovery_details;
}

/* Reports one device per id. The views stay valid for the call (rule O2). */
static dowser_status report_ids(const dowser_handler* handler, dowser_session_host* session,
                                const id_list* list) {
  dowser_device* devices = calloc(list->count, sizeof *devices);
  dowser_property* properties = calloc(list->count, sizeof *properties);
  dowser_status status = DOWSER_ERR_NO_MEMORY;
  size_t i;
  if (devices != NULL && properties != NULL) {
    for (i = 0; i < list->count; ++i) {
      properties[i].struct_size = sizeof properties[i];
      properties[i].key = make_str(EXAMPLE_PROPERTY, strlen(EXAMPLE_PROPERTY));
      properties[i].value = list->ids[i];
      properties[i].has_value = 1;
      devices[i].struct_size = sizeof devices[i];
      devices[i].id = list->ids[i];
      devices[i].properties = &properties[i];
      devices[i].properties_len = 1;
      devices[i].sharing = DOWSER_SHARING_HANDLER_DEFAULT;
    }
    status = handler->host->report_devices(session, devices, list->count);
  }
  free(devices);
  free(properties);
  return status;
}

static dowser_status example_init(const dowser_host_api* host, dowser_host_ctx* host_ctx,
                                  dowser_str config, dowser_handler** out, char* err,
                                  size_t err_cap) {
  dowser_handler* handler;
  (void)config; /* this handler has no handler-level configuration */
  if (host == NULL || out == NULL) {
    snprintf(err, err_cap, "init: NULL argument");
    return DOWSER_ERR_INVALID_ARGUMENT;
  }
  handler = malloc(sizeof *handler);
  if (handler == NULL) {
    snprintf(err, err_cap, "out of memory");
    return DOWSER_ERR_NO_MEMORY;
  }
  handler->host = host;
  handler->host_ctx = host_ctx;
  *out = handler;
  return DOWSER_OK;
}

static void example_destroy(dowser_handler* handler) { free(handler); }

static dowser_status example_validate(dowser_handler* handler,
                                      const dowser_discover_request* request, char* err,
                                      size_t err_cap) {
  id_list list;
  dowser_status status = parse_ids(request_details(request), &list, err, err_cap);
  (void)handler;
  free(list.ids);
  return status;
}

static dowser_status example_start(dowser_handler* handler, const dowser_discover_request* request,
                                   dowser_session_host* session_host, dowser_session** out,
                                   char* err, size_t err_cap) {
  id_list list;
  dowser_session* session;
  dowser_status status = parse_ids(request_details(request), &list, err, err_cap);
  if (status != DOWSER_OK) return status;
  session = malloc(sizeof *session);
  if (session == NULL) {
    free(list.ids);
    snprintf(err, err_cap, "out of memory");
    return DOWSER_ERR_NO_MEMORY;
  }
  session->device_count = list.count;
  /* The list is fixed: one report now is the whole discovery. A refusal
   * (DOWSER_ERR_STOPPED) only means the host is already stopping us. */
  status = report_ids(handler, session_host, &list);
  free(list.ids);
  if (status != DOWSER_OK && status != DOWSER_ERR_STOPPED) {
    free(session);
    snprintf(err, err_cap, "reporting the devices failed with status %d", (int)status);
    return status;
  }
  *out = session;
  return DOWSER_OK;
}

static void example_stop(dowser_handler* handler, dowser_session* session) {
  (void)handler;
  free(session); /* no thread to join: nothing reports after start returned */
}

static const dowser_handler_api example_api = {
    .struct_size = sizeof(dowser_handler_api),
    .abi_major = DOWSER_ABI_VERSION_MAJOR,
    .abi_minor = DOWSER_ABI_VERSION_MINOR,
    .name = EXAMPLE_NAME,
    .version = EXAMPLE_VERSION,
    .flags = 0, /* devices are local to this node unless a device says otherwise */
    .init = example_init,
    .destroy = example_destroy,
    .start_discovery = example_start,
    .stop_discovery = example_stop,
    .validate_request = example_validate,
};

/* The only exported symbol. Refuses hosts it cannot serve (rules V1, V2). */
__attribute__((visibility("default"))) const dowser_handler_api* dowser_get_handler_api(
    uint16_t host_abi_major, uint16_t host_abi_minor, char* err, size_t err_cap) {
  if (!dowser_host_abi_supported(host_abi_major, host_abi_minor)) {
    snprintf(err, err_cap, EXAMPLE_NAME " needs ABI major %d with minor >= %d, host offers %u.%u",
             DOWSER_ABI_VERSION_MAJOR, DOWSER_ABI_VERSION_MINOR, (unsigned)host_abi_major,
             (unsigned)host_abi_minor);
    return NULL;
  }
  return &example_api;
}
