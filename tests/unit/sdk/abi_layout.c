/* The layout of every struct of the handler ABI, frozen. A change here is an
 * ABI break (rule V5 of handler.h): the build fails before anyone ships it.
 * Compiled as C11 for _Static_assert; header_c99.c checks plain C99. */
#include <dowser/handler.h>

#include <stddef.h>

#define LAYOUT(type, member, offset) \
  _Static_assert(offsetof(type, member) == (offset), #type "." #member " moved")
#define SIZE(type, size) _Static_assert(sizeof(type) == (size), #type " changed size")

#if defined(__LP64__)
SIZE(dowser_str, 16);
LAYOUT(dowser_str, data, 0);
LAYOUT(dowser_str, len, 8);

SIZE(dowser_property, 48);
LAYOUT(dowser_property, struct_size, 0);
LAYOUT(dowser_property, key, 8);
LAYOUT(dowser_property, value, 24);
LAYOUT(dowser_property, has_value, 40);

SIZE(dowser_mount, 48);
LAYOUT(dowser_mount, struct_size, 0);
LAYOUT(dowser_mount, container_path, 8);
LAYOUT(dowser_mount, host_path, 24);
LAYOUT(dowser_mount, read_only, 40);

SIZE(dowser_device_node, 56);
LAYOUT(dowser_device_node, struct_size, 0);
LAYOUT(dowser_device_node, container_path, 8);
LAYOUT(dowser_device_node, host_path, 24);
LAYOUT(dowser_device_node, permissions, 40);

SIZE(dowser_device, 80);
LAYOUT(dowser_device, struct_size, 0);
LAYOUT(dowser_device, id, 8);
LAYOUT(dowser_device, properties, 24);
LAYOUT(dowser_device, properties_len, 32);
LAYOUT(dowser_device, mounts, 40);
LAYOUT(dowser_device, mounts_len, 48);
LAYOUT(dowser_device, device_nodes, 56);
LAYOUT(dowser_device, device_nodes_len, 64);
LAYOUT(dowser_device, sharing, 72);

SIZE(dowser_discover_request, 40);
LAYOUT(dowser_discover_request, struct_size, 0);
LAYOUT(dowser_discover_request, discovery_details, 8);
LAYOUT(dowser_discover_request, properties, 24);
LAYOUT(dowser_discover_request, properties_len, 32);

SIZE(dowser_host_api, 40);
LAYOUT(dowser_host_api, struct_size, 0);
LAYOUT(dowser_host_api, abi_major, 4);
LAYOUT(dowser_host_api, abi_minor, 6);
LAYOUT(dowser_host_api, log, 8);
LAYOUT(dowser_host_api, report_devices, 16);
LAYOUT(dowser_host_api, report_error, 24);
LAYOUT(dowser_host_api, log_session, 32); /* 1.1 */

SIZE(dowser_handler_api, 72);
LAYOUT(dowser_handler_api, struct_size, 0);
LAYOUT(dowser_handler_api, abi_major, 4);
LAYOUT(dowser_handler_api, abi_minor, 6);
LAYOUT(dowser_handler_api, name, 8);
LAYOUT(dowser_handler_api, version, 16);
LAYOUT(dowser_handler_api, flags, 24);
LAYOUT(dowser_handler_api, init, 32);
LAYOUT(dowser_handler_api, destroy, 40);
LAYOUT(dowser_handler_api, start_discovery, 48);
LAYOUT(dowser_handler_api, stop_discovery, 56);
LAYOUT(dowser_handler_api, validate_request, 64);
#else
#error "layout table is written for LP64 targets; add one for this target"
#endif

/* Values on the wire are part of the ABI too. */
_Static_assert(sizeof(dowser_status) == 4 && sizeof(dowser_bool) == 4, "fixed widths");
_Static_assert(DOWSER_ABI_VERSION_MAJOR == 1, "major");
_Static_assert(DOWSER_OK == 0 && DOWSER_ERR_GENERIC == 1 && DOWSER_ERR_INVALID_ARGUMENT == 2 &&
                   DOWSER_ERR_UNSUPPORTED == 3 && DOWSER_ERR_NO_MEMORY == 4 &&
                   DOWSER_ERR_STOPPED == 5,
               "status codes");
_Static_assert(DOWSER_SHARING_HANDLER_DEFAULT == 0 && DOWSER_SHARING_LOCAL == 1 &&
                   DOWSER_SHARING_SHARED == 2,
               "sharing values");
_Static_assert(DOWSER_LOG_TRACE == 0 && DOWSER_LOG_DEBUG == 1 && DOWSER_LOG_INFO == 2 &&
                   DOWSER_LOG_WARN == 3 && DOWSER_LOG_ERROR == 4,
               "log levels");
_Static_assert(DOWSER_HANDLER_FLAG_SHARED_DEVICES == 1u, "flags");

int main(void) { return 0; }
