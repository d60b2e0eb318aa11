/*
 * dowser discovery-handler ABI, version 1.1.
 *
 * A discovery handler is a shared object that exports exactly one symbol,
 * DOWSER_ENTRY_SYMBOL, returning a table of functions (dowser_handler_api).
 * The host (dowserd, or the test kit) passes its own services in as a table
 * (dowser_host_api). This header is pure C99 and depends only on <stddef.h>
 * and <stdint.h>.
 *
 * The rules below are normative. "MUST" binds handler authors and the host.
 *
 * VERSIONING
 *  V1. DOWSER_ABI_VERSION_MAJOR changes only on a break of layout or of
 *      semantics (including any change to the ownership or threading rules).
 *      The host refuses a handler whose major differs from its own.
 *  V2. DOWSER_ABI_VERSION_MINOR increases with every release that adds
 *      something. Additions go only at the end of a struct. A host with minor
 *      N loads handlers built with minor <= N and refuses newer ones.
 *  V3. Every struct that crosses the boundary (except the dowser_str view)
 *      starts with `uint32_t struct_size`, set by the sender to sizeof() as it
 *      was compiled. A receiver reads min(struct_size, sizeof) bytes into a
 *      zeroed copy, so members the sender did not know read as 0 / NULL.
 *      Arrays of records are read with a stride of the first element's
 *      struct_size; all elements of one array MUST have the same struct_size.
 *      A struct_size smaller than the record's 1.0 members need (up to the
 *      end of its last 1.0 member) is an error, never read as zeros: the
 *      receiver refuses that record (the host leaves such a device out of its
 *      snapshot) or, when it is the first element and so the stride, the whole
 *      array. A larger struct_size (a newer minor) is accepted, up to
 *      DOWSER_MAX_RECORD_SIZE bytes; a struct_size above that is no record of
 *      this major (an uninitialised one, say) and is refused like a too small
 *      one.
 *  V4. A handler built with minor M that wants to use a host member added in
 *      minor K > 0 MUST first check host->abi_minor >= K.
 *  V5. Members are never removed or reordered within a major. A replaced
 *      member stays, and its successor is appended with a _v2 suffix.
 *
 * OWNERSHIP
 *  O1. Every pointer the host passes to the handler (requests, strings, the
 *      error buffer) is borrowed for the duration of that call only.
 *  O2. Every pointer the handler passes to the host (report_devices,
 *      report_error, log, log_session) is borrowed for the duration of that
 *      call only: the host deep-copies before it returns. Neither side frees
 *      the other's memory.
 *  O3. dowser_handler_api and the strings it points to (name, version) are
 *      static: valid for the life of the process. The host never unloads a
 *      handler it accepted. A library it refuses once open (another major, a
 *      bad table) is unloaded, and opened again only when its file changes:
 *      start no thread from a constructor or the entry function.
 *  O4. Strings are (data, len) views, not NUL-terminated, and may contain NUL
 *      bytes. data may be NULL only when len is 0.
 *  O5. Error buffers are provided by the caller: (err, err_cap). On failure the
 *      callee writes a NUL-terminated, possibly truncated, message there.
 *      err may be NULL when err_cap is 0.
 *
 * THREADING
 *  T1. The control calls init, destroy, start_discovery, stop_discovery and
 *      validate_request of one dowser_handler instance are never called
 *      concurrently with each other (they may come from different threads,
 *      one at a time).
 *  T2. The dowser_host_api functions are thread-safe: the handler MAY call
 *      them from any thread, concurrently, from inside start_discovery and
 *      until the matching stop_discovery returns.
 *  T3. start_discovery MUST return promptly (no waiting on devices or the
 *      network); it MAY report an initial snapshot before returning. Longer
 *      work runs on the handler's own threads.
 *  T4. stop_discovery is blocking and final: when it returns, no thread of
 *      the handler touches that session (or its dowser_session_host) again.
 *      The host drops, and logs, any report (or log_session line) that
 *      arrives later.
 *  T5. Host functions never call back into the handler and never block for
 *      long. report_devices keeps only the newest snapshot per session when
 *      the host is behind (reports are full snapshots, so none is lost).
 *  T6. No exception, longjmp or signal crosses the boundary. A handler MUST
 *      NOT call exit(), install signal handlers, change the working directory
 *      or umask, or fork without exec.
 *
 * DEVICES (what report_devices accepts; the limits are the DOWSER_MAX_*
 * macros below, in bytes)
 *  D1. A device id is 1 to DOWSER_MAX_DEVICE_ID_LEN bytes of UTF-8 with no
 *      control character, and unique within one snapshot.
 *  D2. A property key is an environment variable name as Kubernetes defines
 *      one ([-._a-zA-Z][-._a-zA-Z0-9]*), at most DOWSER_MAX_PROPERTY_KEY_LEN
 *      bytes, and unique within its device. A value is UTF-8 with no NUL byte,
 *      at most DOWSER_MAX_PROPERTY_VALUE_LEN bytes.
 *  D3. Mount paths and device-node container paths are absolute; a
 *      device-node host path is absolute or empty (then the container path
 *      is used). Paths are UTF-8 with no NUL byte, at most DOWSER_MAX_PATH_LEN
 *      bytes. Device-node permissions are a non-empty subset of "rwm".
 *  D4. sharing is one of the DOWSER_SHARING_* values.
 *  D5. A device has at most DOWSER_MAX_DEVICE_ENTRIES properties, as many
 *      mounts and as many device nodes, and at most DOWSER_MAX_DEVICE_LEN
 *      bytes of strings in all (id, keys, values, paths, permissions).
 *  D6. The host leaves a device that breaks D1-D5, V3 or O4 out of the
 *      snapshot, takes the other devices, and says why once. A snapshot with
 *      a duplicate id, or an array it cannot read, is refused whole
 *      (DOWSER_ERR_INVALID_ARGUMENT).
 *  D7. A snapshot holds at most DOWSER_MAX_SNAPSHOT_DEVICES devices (each
 *      becomes an Instance and a device plugin); a larger one is refused
 *      whole (DOWSER_ERR_INVALID_ARGUMENT), and the last one taken stays.
 *  The limits keep an Instance far below Kubernetes' 1.5 MB object limit, and
 *  a kubelet Allocate response below gRPC's 4 MiB default message size.
 */
#ifndef DOWSER_HANDLER_H
#define DOWSER_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DOWSER_ABI_VERSION_MAJOR 1
#define DOWSER_ABI_VERSION_MINOR 1

/* Advisory size for error buffers; report_error messages longer than this
 * are cut by the host. */
#define DOWSER_MAX_ERRLEN 1024
/* Log lines longer than this are cut by the host (the length is shown). */
#define DOWSER_MAX_LOG_LEN 4096

/* Limits of a reported device (rules D1-D5), in bytes or entries. */
#define DOWSER_MAX_DEVICE_ID_LEN 1024
#define DOWSER_MAX_PROPERTY_KEY_LEN 256
#define DOWSER_MAX_PROPERTY_VALUE_LEN 65536
#define DOWSER_MAX_PATH_LEN 4096
#define DOWSER_MAX_DEVICE_ENTRIES 1024 /* each of properties, mounts, device nodes */
#define DOWSER_MAX_DEVICE_LEN 131072   /* all strings of one device together */
/* Devices in one report_devices call (D7); the largest struct_size of a record (V3). */
#define DOWSER_MAX_SNAPSHOT_DEVICES 10000
#define DOWSER_MAX_RECORD_SIZE 65536

/* Status codes. Fixed width, never a C enum inside a struct. */
typedef int32_t dowser_status;
#define DOWSER_OK 0
#define DOWSER_ERR_GENERIC 1
#define DOWSER_ERR_INVALID_ARGUMENT 2 /* bad discovery details or properties */
#define DOWSER_ERR_UNSUPPORTED 3      /* e.g. a host version the handler cannot serve */
#define DOWSER_ERR_NO_MEMORY 4
#define DOWSER_ERR_STOPPED 5 /* the session is stopping: stop producing reports */

/* Boolean with a fixed 4-byte width: 0 is false, anything else is true. */
typedef uint32_t dowser_bool;

/* A borrowed byte string (rule O4). */
typedef struct dowser_str {
  const char* data;
  size_t len;
} dowser_str;

/* Opaque handles. *_host is owned by the host, the others by the handler. */
typedef struct dowser_host_ctx dowser_host_ctx;         /* one handler instance, host side */
typedef struct dowser_session_host dowser_session_host; /* one discovery session, host side */
typedef struct dowser_handler dowser_handler;           /* one handler instance, handler side */
typedef struct dowser_session dowser_session;           /* one discovery session, handler side */

/* A key with an optional value (Akri's ByteData may be absent). */
typedef struct dowser_property {
  uint32_t struct_size;
  dowser_str key;
  dowser_str value; /* meaningful only when has_value */
  dowser_bool has_value;
} dowser_property;

/* A host path mounted into the container that uses the device. */
typedef struct dowser_mount {
  uint32_t struct_size;
  dowser_str container_path;
  dowser_str host_path;
  dowser_bool read_only;
} dowser_mount;

/* A device node made available to the container, e.g. /dev/video0. */
typedef struct dowser_device_node {
  uint32_t struct_size;
  dowser_str container_path;
  dowser_str host_path;
  dowser_str permissions; /* a non-empty subset of "rwm" */
} dowser_device_node;

/* Values of dowser_device.sharing. */
#define DOWSER_SHARING_HANDLER_DEFAULT 0 /* as DOWSER_HANDLER_FLAG_SHARED_DEVICES says */
#define DOWSER_SHARING_LOCAL 1           /* seen only by this node */
#define DOWSER_SHARING_SHARED 2          /* reachable from several nodes (network devices) */

/* One discovered device. The id is unique within a session's snapshot. */
typedef struct dowser_device {
  uint32_t struct_size;
  dowser_str id;
  const dowser_property* properties;
  size_t properties_len;
  const dowser_mount* mounts;
  size_t mounts_len;
  const dowser_device_node* device_nodes;
  size_t device_nodes_len;
  int32_t sharing; /* DOWSER_SHARING_* */
} dowser_device;

/* What a Configuration asks a handler to discover. */
typedef struct dowser_discover_request {
  uint32_t struct_size;
  dowser_str discovery_details; /* YAML text (JSON is YAML too) */
  const dowser_property* properties;
  size_t properties_len;
} dowser_discover_request;

/* Log levels for dowser_host_api.log. */
#define DOWSER_LOG_TRACE 0
#define DOWSER_LOG_DEBUG 1
#define DOWSER_LOG_INFO 2
#define DOWSER_LOG_WARN 3
#define DOWSER_LOG_ERROR 4

/* Services of the host. Every member is non-NULL and thread-safe (T2). */
typedef struct dowser_host_api {
  uint32_t struct_size;
  uint16_t abi_major; /* the host's version, for rule V4 */
  uint16_t abi_minor;
  /* A log line attributed to the handler. Never pass secrets. */
  void (*log)(dowser_host_ctx* host, int32_t level, dowser_str message);
  /* The full list of devices the session sees now; it replaces the previous
   * one. Returns DOWSER_ERR_STOPPED once the session is stopping. */
  dowser_status (*report_devices)(dowser_session_host* session, const dowser_device* devices,
                                  size_t devices_len);
  /* A terminal failure of the session (its bus vanished, ...). The host will
   * call stop_discovery on it later; further reports are dropped. */
  dowser_status (*report_error)(dowser_session_host* session, dowser_status code,
                                dowser_str message);
  /* Since 1.1 (check abi_minor >= 1 first, rule V4): a log line about one
   * session, as log otherwise; the host says which session (dowserd names
   * its Configuration). Like a report, a line logged after stop_discovery
   * returned is dropped, and the host logs the late call (rule T4). */
  void (*log_session)(dowser_session_host* session, int32_t level, dowser_str message);
  /* Append new members here only. */
} dowser_host_api;

/* Values of dowser_handler_api.flags. */
#define DOWSER_HANDLER_FLAG_SHARED_DEVICES 1u /* devices default to DOWSER_SHARING_SHARED */

/* The handler's function table, static storage (rule O3). */
typedef struct dowser_handler_api {
  uint32_t struct_size;
  uint16_t abi_major; /* the header version the handler was compiled with */
  uint16_t abi_minor;
  const char* name;    /* NUL-terminated, e.g. "udev"; what Configurations name */
  const char* version; /* NUL-terminated, the handler's own version */
  uint32_t flags;      /* DOWSER_HANDLER_FLAG_*; other bits are 0 */

  /* Creates one handler instance. host and host_ctx stay valid until destroy.
   * config is handler-level configuration text (may be empty). */
  dowser_status (*init)(const dowser_host_api* host, dowser_host_ctx* host_ctx, dowser_str config,
                        dowser_handler** out, char* err, size_t err_cap);
  /* Ends an instance; called only after every session of it has stopped. */
  void (*destroy)(dowser_handler* handler);
  /* Starts discovering what request asks for (T3). Reports go to session.
   * On DOWSER_OK, *out is what stop_discovery gets back, as it was; the host
   * sets it to NULL first and never reads through it, so a handler that keeps
   * no state of its own per session may leave it NULL. */
  dowser_status (*start_discovery)(dowser_handler* handler, const dowser_discover_request* request,
                                   dowser_session_host* session, dowser_session** out, char* err,
                                   size_t err_cap);
  /* Blocking and final (T4); called exactly once per successful start. */
  void (*stop_discovery)(dowser_handler* handler, dowser_session* session);
  /* Optional (may be NULL): checks a request without starting discovery.
   * Returns DOWSER_ERR_INVALID_ARGUMENT with a message for a bad request. */
  dowser_status (*validate_request)(dowser_handler* handler, const dowser_discover_request* request,
                                    char* err, size_t err_cap);
  /* Append new members here only. */
} dowser_handler_api;

/* The one exported symbol. The host passes its version; the handler returns
 * its table, or NULL with a reason in err when it cannot serve that host. */
#define DOWSER_ENTRY_SYMBOL "dowser_get_handler_api"
typedef const dowser_handler_api* (*dowser_get_handler_api_fn)(uint16_t host_abi_major,
                                                               uint16_t host_abi_minor, char* err,
                                                               size_t err_cap);

/* Whether a handler built with this header can serve a host of the given
 * version (same major, host minor not older). A function rather than an
 * inline comparison: with minor 0, "minor >= 0" trips -Wtype-limits. */
static inline int dowser_abi_version_at_least(unsigned have, unsigned want) { return have >= want; }
static inline int dowser_host_abi_supported(uint16_t host_abi_major, uint16_t host_abi_minor) {
  return host_abi_major == DOWSER_ABI_VERSION_MAJOR &&
         dowser_abi_version_at_least(host_abi_minor, DOWSER_ABI_VERSION_MINOR);
}

#ifdef __cplusplus
}
#endif

#endif /* DOWSER_HANDLER_H */
