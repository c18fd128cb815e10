# Installs one file of a package from the npm registry into OUT, at build
# time, checked against the registry's published SHA-512 (nothing vendored
# into the repository). A failure (offline) is a warning, not an error: the
# dashboard then answers 503 saying its assets are missing.
#   cmake -DURL=... -DSHA512=... -DMEMBER=package/dist/x.js -DOUT=dir -P fetch_npm.cmake
get_filename_component(name ${MEMBER} NAME)
file(MAKE_DIRECTORY ${OUT}/npm)
file(DOWNLOAD ${URL} ${OUT}/npm/pkg.tgz EXPECTED_HASH SHA512=${SHA512}
     STATUS st TLS_VERIFY ON TIMEOUT 120)
list(GET st 0 code)
if(NOT code EQUAL 0)
  message(WARNING "dashboard: could not fetch ${URL} (${st}); /dashboard will answer 503")
  return()
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E tar xzf pkg.tgz ${MEMBER}
                WORKING_DIRECTORY ${OUT}/npm RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(WARNING "dashboard: ${MEMBER} missing from ${URL}")
  return()
endif()
file(COPY ${OUT}/npm/${MEMBER} DESTINATION ${OUT})
