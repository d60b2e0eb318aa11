# dowser_add_handler(<target> <sources>... [CHECK_ARGS <args>...] [OUTPUT_DIRECTORY <dir>])
#
# Builds a discovery handler as a loadable module (lib<target>.so) that exports
# only the entry symbol: hidden visibility, a version script, and
# --no-undefined so a missing library shows up at link time, not at dlopen.
# When testing is enabled, registers `<target>.conformance`, which runs
# dowser-handler-check on the module with CHECK_ARGS (e.g. --details FILE).
function(dowser_add_handler target)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "CHECK_ARGS" ${ARGN})
  set(version_script "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/dowser-handler.map")
  add_library(${target} MODULE ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${target} PRIVATE dowser::sdk)
  set_target_properties(${target} PROPERTIES
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${version_script}")
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${version_script}" "LINKER:--no-undefined")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()

  if(BUILD_TESTING)
    if(TARGET dowser::dowser-handler-check)
      set(check "$<TARGET_FILE:dowser::dowser-handler-check>")
    elseif(TARGET dowser-handler-check)
      set(check "$<TARGET_FILE:dowser-handler-check>")
    else()
      message(WARNING "dowser_add_handler(${target}): dowser-handler-check not found; no conformance test")
      return()
    endif()
    add_test(NAME ${target}.conformance COMMAND ${check} $<TARGET_FILE:${target}> ${ARG_CHECK_ARGS})
  endif()
endfunction()
