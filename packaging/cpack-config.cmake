# Read by cpack at packaging time (CPACK_PROJECT_CONFIG_FILE). A Debian
# package built from a /usr/local configuration would put the plugin in
# /usr/local/lib, outside the multiarch folder the package promises; stop
# rather than ship that.
if(CPACK_GENERATOR STREQUAL "DEB" AND NOT CPACK_PACKAGING_INSTALL_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "nccl-rail: the .deb needs a build configured with "
    "-DCMAKE_INSTALL_PREFIX=/usr (this one has ${CPACK_PACKAGING_INSTALL_PREFIX}); "
    "scripts/package.sh does that")
endif()
