# gsoap_code_library(<target> INTERFACE <file.gsoap> PREFIX <prefix> SOURCES <glue.cpp>...)
#
# Runs soapcpp2 at build time over a hand-written gSOAP interface header and
# builds what it generates (serializers and client stubs), the WS-Addressing
# and WS-Discovery plugins (C sources, compiled as C++ against the C++ stubs)
# into a static library with the gSOAP runtime's compile flags. Each user
# gives its own PREFIX (soapcpp2 -p), so the generated files never mix.
# SOURCES is the user's glue: the namespace table (the .nsmap) and the event
# handlers wsddapi calls (wsdd_event_*). They go in the same archive as the
# plugins, ahead of the static gSOAP runtime that refers back to them.
# The runtime is linked statically: a handler module then keeps every gSOAP
# symbol local (its version script exports only the entry point).
# Used by the ONVIF handler and by the camera simulator in tests/peers/onvif.
# Everything built here is GPL-2.0-or-later, as Debian ships gSOAP.

find_package(PkgConfig REQUIRED)
pkg_check_modules(GSOAPSSL REQUIRED gsoapssl++)
find_program(GSOAP_SOAPCPP2 soapcpp2 REQUIRED)
find_path(GSOAP_SHARE_DIR plugin/wsddapi.c PATHS /usr/share/gsoap REQUIRED NO_DEFAULT_PATH)
find_package(OpenSSL REQUIRED)
find_package(ZLIB REQUIRED)
find_library(GSOAP_RUNTIME NAMES libgsoapssl++.a REQUIRED)

function(gsoap_code_library target)
  cmake_parse_arguments(ARG "" "INTERFACE;PREFIX" "SOURCES" ${ARGN})
  # Outside any sdk/, host/ or handlers/ path: clang-tidy's header filter
  # must not lint generated code.
  set(out ${CMAKE_BINARY_DIR}/gsoap-generated/${ARG_PREFIX})
  file(MAKE_DIRECTORY ${out})
  set(generated ${out}/${ARG_PREFIX}C.cpp ${out}/${ARG_PREFIX}Client.cpp
                ${out}/${ARG_PREFIX}Server.cpp ${out}/${ARG_PREFIX}H.h ${out}/${ARG_PREFIX}Stub.h)
  # -2 SOAP 1.2, -L no soapClientLib/soapServerLib, -x no sample messages,
  # -w no WSDL/XSD files.
  add_custom_command(
    OUTPUT ${generated}
    COMMAND ${GSOAP_SOAPCPP2} -2 -L -x -w -p${ARG_PREFIX} -d ${out}
            -I${GSOAP_SHARE_DIR}/import:${GSOAP_SHARE_DIR} ${ARG_INTERFACE} > ${out}/soapcpp2.log 2>&1
    DEPENDS ${ARG_INTERFACE}
    COMMENT "soapcpp2 ${ARG_INTERFACE}"
    VERBATIM)
  foreach(plugin wsaapi wsddapi)
    configure_file(${GSOAP_SHARE_DIR}/plugin/${plugin}.c ${out}/${plugin}.cpp COPYONLY)
  endforeach()
  add_library(${target} STATIC ${generated} ${out}/wsaapi.cpp ${out}/wsddapi.cpp ${ARG_SOURCES})
  # Generated and third-party code: its warnings are not ours to fix.
  set_source_files_properties(${generated} ${out}/wsaapi.cpp ${out}/wsddapi.cpp
                              TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS -w)
  target_compile_definitions(${target} PUBLIC ${GSOAPSSL_CFLAGS_OTHER}
                             SOAP_H_FILE=${ARG_PREFIX}H.h)
  target_include_directories(${target} SYSTEM PUBLIC ${out} ${GSOAP_SHARE_DIR}/plugin
                             ${GSOAP_SHARE_DIR})
  target_link_libraries(${target} PUBLIC ${GSOAP_RUNTIME} OpenSSL::SSL OpenSSL::Crypto ZLIB::ZLIB)
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden
                                             VISIBILITY_INLINES_HIDDEN ON)
endfunction()
