# Defines the imported target tally::hiredis (and TALLY_HIREDIS_VERSION) when
# hiredis is found: first through hiredis's own CMake config (hiredis >= 1.0
# installs hiredis::hiredis), then through pkg-config (Debian's 0.14 ships
# hiredis.pc). Used by tally's build and by the installed tallyConfig.cmake,
# so that consumers of tally::redis resolve hiredis the same way.
if(TARGET tally::hiredis)
    return()
endif()
find_package(hiredis CONFIG QUIET)
if(TARGET hiredis::hiredis)
    add_library(tally::hiredis INTERFACE IMPORTED GLOBAL)
    set_target_properties(tally::hiredis PROPERTIES INTERFACE_LINK_LIBRARIES hiredis::hiredis)
    set(TALLY_HIREDIS_VERSION "${hiredis_VERSION}")
    return()
endif()
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
    pkg_check_modules(TALLY_HIREDIS QUIET IMPORTED_TARGET GLOBAL hiredis)
    if(TARGET PkgConfig::TALLY_HIREDIS)
        add_library(tally::hiredis INTERFACE IMPORTED GLOBAL)
        set_target_properties(tally::hiredis PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::TALLY_HIREDIS)
    endif()
endif()
