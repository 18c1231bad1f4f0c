# Runs at install time (install(CODE) in StrataInstall.cmake): installs the public headers and
# every project header they include, transitively, under <prefix>/include/strata/, and nothing
# else (a header no public header reaches stays in the source tree).
#
# Inside the source tree headers include each other relative to its root ("framework/nn/model.hpp");
# installed, those includes are rewritten under the one include root: "strata/framework/nn/model.hpp".
# So a program sees only <prefix>/include on its include path, and nothing of Strata's but
# strata/... can clash with its own headers.
#
# In: STRATA_HEADERS_SOURCE_DIR (the source root), STRATA_HEADERS_PUBLIC (the public headers,
# relative to the source root: include/strata/*.hpp), STRATA_HEADERS_GENERATED (generated headers,
# absolute, installed as they are under include/strata/), CMAKE_INSTALL_PREFIX, DESTDIR.
cmake_policy(PUSH)
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST): install scripts run without the project's policies
set(_dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/include/strata")
set(_project_dirs "framework|offload|parallel")
set(_queue ${STRATA_HEADERS_PUBLIC})
set(_seen ${STRATA_HEADERS_PUBLIC})
while(_queue)
  list(POP_FRONT _queue _rel)
  set(_src "${STRATA_HEADERS_SOURCE_DIR}/${_rel}")
  if(NOT EXISTS "${_src}")
    message(FATAL_ERROR "Strata install: ${_rel} is included by an installed header but does not exist")
  endif()
  file(READ "${_src}" _text)
  # Every project include, also under #if (installing one header too many is harmless; one too
  # few breaks a user's build).
  string(REGEX MATCHALL "#include \"(${_project_dirs})/[^\"]+\"" _includes "${_text}")
  foreach(_inc IN LISTS _includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\"$" "\\1" _dep "${_inc}")
    if(NOT _dep IN_LIST _seen)
      list(APPEND _seen "${_dep}")
      list(APPEND _queue "${_dep}")
    endif()
  endforeach()
  string(REGEX REPLACE "#include \"(${_project_dirs})/" "#include \"strata/\\1/" _text "${_text}")
  # include/strata/x.hpp (the umbrella headers) go to strata/x.hpp; the rest keep their path.
  string(REGEX REPLACE "^include/strata/" "" _out "${_rel}")
  message(STATUS "Installing: ${_dest}/${_out}")
  file(WRITE "${_dest}/${_out}" "${_text}")
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${_dest}/${_out}")
endwhile()
# file(INSTALL) adds DESTDIR itself.
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/include/strata" TYPE FILE
  FILES ${STRATA_HEADERS_GENERATED})
cmake_policy(POP)
